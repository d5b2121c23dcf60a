#pragma once
// GPU leases: a GPU belongs to one attempt stage at a time, or, when a run asks for it (the run
// option gpu_share, gpu_eligibility.h), to up to that many stages of that one run. Leases live
// in memory only, so a daemon restart releases every one of them (the sandboxes that used them
// are killed by the restart's clean-up).

#include <condition_variable>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "daemon/gpu_eligibility.h"
#include "sandbox/gpu_discovery.h"

namespace akad {

class GpuLeases {
 public:
  explicit GpuLeases(std::vector<gpu::GpuDevice> usable = {});

  std::size_t size() const { return gpus_.size(); }
  // Whether a GPU that serves `request` (gpu_eligibility.h's rule) exists at all / could be
  // taken now (free, or held by request's own share group with a slot left).
  bool exists(const GpuRequest& request) const;
  bool anyFree(const GpuRequest& request) const;
  // Waits until such a GPU can be taken; gives up (nullopt) when `cancelled` turns true. A free
  // GPU is preferred to joining a shared one. A request `alone` takes only a free GPU, and none
  // joins it; its share group goes on meanwhile, so it waits for a moment the group leaves the
  // GPU empty, at the latest for the group's last stage to end.
  std::optional<gpu::GpuDevice> acquire(const std::string& holder, const GpuRequest& request,
                                        const std::function<bool()>& cancelled);
  // Gives back `holder`'s lease of the GPU.
  void release(const std::string& gpuId, const std::string& holder);
  void wakeWaiters();
  // Every GPU with its holder (null when free; holders joined by ", " when shared).
  nlohmann::json describe() const;

 private:
  struct Holding {
    std::string holder, group;
    int slots = 1;
  };
  // The GPU `request` may take now: a free one first, else one its share group holds with a
  // slot left; nullptr if none. Called with mutex_ held.
  const gpu::GpuDevice* takeable(const GpuRequest& request) const;

  mutable std::mutex mutex_;
  std::condition_variable freed_;
  std::vector<gpu::GpuDevice> gpus_;
  std::map<std::string, std::vector<Holding>> holders_;  // gpu id -> its holders (none: free)
};

// Holds a lease for one stage and gives it back when the stage ends, however it ends.
class GpuLease {
 public:
  GpuLease(GpuLeases& leases, std::optional<gpu::GpuDevice> gpu, std::string holder)
      : leases_(leases), gpu_(std::move(gpu)), holder_(std::move(holder)) {}
  GpuLease(const GpuLease&) = delete;
  GpuLease& operator=(const GpuLease&) = delete;
  ~GpuLease() {
    if (gpu_) leases_.release(gpu_->id, holder_);
  }
  const std::optional<gpu::GpuDevice>& gpu() const { return gpu_; }

 private:
  GpuLeases& leases_;
  std::optional<gpu::GpuDevice> gpu_;
  std::string holder_;
};

}  // namespace akad
