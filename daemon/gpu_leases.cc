#include "daemon/gpu_leases.h"

#include <algorithm>
#include <chrono>

namespace akad {

GpuLeases::GpuLeases(std::vector<gpu::GpuDevice> usable) : gpus_(std::move(usable)) {}

bool GpuLeases::exists(const GpuRequest& request) const {
  std::lock_guard lock(mutex_);
  return std::any_of(gpus_.begin(), gpus_.end(), [&](const auto& g) { return gpuServes(g, request); });
}

bool GpuLeases::anyFree(const GpuRequest& request) const {
  std::lock_guard lock(mutex_);
  return std::any_of(gpus_.begin(), gpus_.end(),
                     [&](const auto& g) { return gpuServes(g, request) && !holders_.count(g.id); });
}

std::optional<gpu::GpuDevice> GpuLeases::acquire(const std::string& holder, const GpuRequest& request,
                                                 const std::function<bool()>& cancelled) {
  std::unique_lock lock(mutex_);
  for (;;) {
    for (const auto& g : gpus_) {
      if (gpuServes(g, request) && !holders_.count(g.id)) {
        holders_[g.id] = holder;
        return g;
      }
    }
    if (cancelled && cancelled()) return std::nullopt;
    // Re-check cancellation now and then: a cancel does not always come with a release.
    freed_.wait_for(lock, std::chrono::milliseconds(200));
  }
}

void GpuLeases::release(const std::string& gpuId) {
  {
    std::lock_guard lock(mutex_);
    holders_.erase(gpuId);
  }
  freed_.notify_all();
}

void GpuLeases::wakeWaiters() { freed_.notify_all(); }

nlohmann::json GpuLeases::describe() const {
  std::lock_guard lock(mutex_);
  nlohmann::json out = nlohmann::json::array();
  for (const auto& g : gpus_) {
    nlohmann::json j = gpu::toJson(g);
    auto it = holders_.find(g.id);
    j["lease"] = it == holders_.end() ? nlohmann::json(nullptr) : nlohmann::json(it->second);
    out.push_back(j);
  }
  return out;
}

}  // namespace akad
