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

GpuRequest gpuRequestOf(const std::string& imageVendor, const nlohmann::json& runOptions, const std::string& runId) {
  GpuRequest r;
  r.vendor = anyVendor(imageVendor) ? "" : imageVendor;
  if (!runOptions.is_object()) return r;
  if (auto m = runOptions.find("gpu_model"); m != runOptions.end() && m->is_string()) r.model = m->get<std::string>();
  if (auto s = runOptions.find("gpu_share"); s != runOptions.end() && s->is_number_integer() && !runId.empty()) {
    r.share_slots = static_cast<int>(std::clamp<std::int64_t>(s->get<std::int64_t>(), 1, kMaxGpuShare));
    r.share_group = "run " + runId;
  }
  return r;
}

bool gpuServes(const gpu::GpuDevice& gpu, const GpuRequest& request) {
  if (!anyVendor(request.vendor) && gpu.vendor != request.vendor) return false;
  return request.model.empty() || lower(gpu.model).find(lower(request.model)) != std::string::npos;
}

}  // namespace akad
