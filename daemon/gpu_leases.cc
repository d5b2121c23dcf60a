#include "daemon/gpu_leases.h"

#include <algorithm>
#include <chrono>

namespace akad {

GpuLeases::GpuLeases(std::vector<gpu::GpuDevice> usable) : gpus_(std::move(usable)) {}

bool GpuLeases::exists(const GpuRequest& request) const {
  std::lock_guard lock(mutex_);
  return std::any_of(gpus_.begin(), gpus_.end(), [&](const auto& g) { return gpuServes(g, request); });
}

const gpu::GpuDevice* GpuLeases::takeable(const GpuRequest& request) const {
  auto held = [&](const gpu::GpuDevice& g) -> const std::vector<Holding>* {
    auto it = holders_.find(g.id);
    return it == holders_.end() || it->second.empty() ? nullptr : &it->second;
  };
  for (const auto& g : gpus_)
    if (gpuServes(g, request) && held(g) == nullptr) return &g;
  if (request.alone || request.share_group.empty() || request.share_slots < 2) return nullptr;
  for (const auto& g : gpus_) {
    const auto* h = gpuServes(g, request) ? held(g) : nullptr;
    // Shared only within one group, and only as far as its holders all agreed to.
    if (h != nullptr && std::all_of(h->begin(), h->end(), [&](const Holding& x) {
          return x.group == request.share_group && static_cast<int>(h->size()) < std::min(x.slots, request.share_slots);
        }))
      return &g;
  }
  return nullptr;
}

bool GpuLeases::anyFree(const GpuRequest& request) const {
  std::lock_guard lock(mutex_);
  return takeable(request) != nullptr;
}

std::optional<gpu::GpuDevice> GpuLeases::acquire(const std::string& holder, const GpuRequest& request,
                                                 const std::function<bool()>& cancelled) {
  std::unique_lock lock(mutex_);
  for (;;) {
    if (const gpu::GpuDevice* g = takeable(request)) {
      holders_[g->id].push_back({holder, request.share_group, request.alone ? 1 : std::max(request.share_slots, 1)});
      return *g;
    }
    if (cancelled && cancelled()) return std::nullopt;
    // Re-check cancellation now and then: a cancel does not always come with a release.
    freed_.wait_for(lock, std::chrono::milliseconds(200));
  }
}

void GpuLeases::release(const std::string& gpuId, const std::string& holder) {
  {
    std::lock_guard lock(mutex_);
    auto it = holders_.find(gpuId);
    if (it == holders_.end()) return;
    auto& h = it->second;
    if (auto one = std::find_if(h.begin(), h.end(), [&](const Holding& x) { return x.holder == holder; }); one != h.end())
      h.erase(one);
    if (h.empty()) holders_.erase(it);
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
    if (it == holders_.end()) {
      j["lease"] = nullptr;
    } else {
      std::string names;
      for (const auto& h : it->second) names += (names.empty() ? "" : ", ") + h.holder;
      j["lease"] = names;
    }
    out.push_back(j);
  }
  return out;
}

}  // namespace akad
