#pragma once
// Exclusive GPU leases: a GPU belongs to at most one attempt stage at a time. Leases live in
// memory only, so a daemon restart releases every one of them (the sandboxes that used them
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
  // Whether a GPU that serves `request` (gpu_eligibility.h's rule) exists at all / is free now.
  bool exists(const GpuRequest& request) const;
  bool anyFree(const GpuRequest& request) const;
  // Waits until a GPU that serves `request` is free; gives up (nullopt) when `cancelled` turns true.
  std::optional<gpu::GpuDevice> acquire(const std::string& holder, const GpuRequest& request,
                                        const std::function<bool()>& cancelled);
  void release(const std::string& gpuId);
  void wakeWaiters();
  nlohmann::json describe() const;  // every GPU with its holder (null when free)

 private:
  mutable std::mutex mutex_;
  std::condition_variable freed_;
  std::vector<gpu::GpuDevice> gpus_;
  std::map<std::string, std::string> holders_;  // gpu id -> holder
};

// Holds a lease for one stage and gives it back when the stage ends, however it ends.
class GpuLease {
 public:
  GpuLease(GpuLeases& leases, std::optional<gpu::GpuDevice> gpu) : leases_(leases), gpu_(std::move(gpu)) {}
  GpuLease(const GpuLease&) = delete;
  GpuLease& operator=(const GpuLease&) = delete;
  ~GpuLease() {
    if (gpu_) leases_.release(gpu_->id);
  }
  const std::optional<gpu::GpuDevice>& gpu() const { return gpu_; }

 private:
  GpuLeases& leases_;
  std::optional<gpu::GpuDevice> gpu_;
};

}  // namespace akad
