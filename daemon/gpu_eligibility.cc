#include "daemon/gpu_eligibility.h"

#include <algorithm>
#include <cctype>

namespace akad {

namespace {
std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}
bool anyVendor(const std::string& vendor) { return vendor.empty() || vendor == "none"; }
}  // namespace

std::string GpuRequest::describe() const {
  std::string s = anyVendor(vendor) ? "a GPU" : "a GPU by " + vendor;
  if (!model.empty()) s += " of model '" + model + "'";
  return s;
}

GpuRequest gpuRequestOf(const std::string& imageVendor, const nlohmann::json& runOptions) {
  GpuRequest r;
  r.vendor = anyVendor(imageVendor) ? "" : imageVendor;
  if (runOptions.is_object())
    if (auto m = runOptions.find("gpu_model"); m != runOptions.end() && m->is_string()) r.model = m->get<std::string>();
  return r;
}

bool gpuServes(const gpu::GpuDevice& gpu, const GpuRequest& request) {
  if (!anyVendor(request.vendor) && gpu.vendor != request.vendor) return false;
  return request.model.empty() || lower(gpu.model).find(lower(request.model)) != std::string::npos;
}

}  // namespace akad
