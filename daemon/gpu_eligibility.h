#pragma once
// Which GPUs may serve an attempt: the one rule behind run.submit's check (is there any such
// GPU here?), the scheduler's claim (is one free now?) and the lease (take one). Until issue
// 28 these disagreed: submit asked only whether the daemon had any GPU, the claim whether any
// was free, and only the lease looked at vendor and model, so an attempt whose GPU this host
// did not have was accepted and failed later, and a worker could claim one while only GPUs
// of another vendor or model were free and then sit waiting for its own.
//
// The rule: the vendor the task's toolchain image drives (image.yaml's requires_gpu_vendor;
// "none" or empty: any vendor) must be the GPU's, exactly; the run's gpu_model option, if
// given, must occur in the GPU's model name, ignoring case ("h200" matches "NVIDIA H200").

#include <string>

#include <nlohmann/json.hpp>

#include "sandbox/gpu_discovery.h"

namespace akad {

// The most stages of one run that may share a GPU (the run option gpu_share).
inline constexpr int kMaxGpuShare = 16;

struct GpuRequest {
  std::string vendor;  // "nvidia" | "amd"; "" or "none": any
  std::string model;   // text the model name must contain, case-insensitive; "": any
  // The run option gpu_share: up to share_slots stages of one group (one run's attempts) may
  // hold a GPU at once. A GPU another group holds is never shared, so one tenant's run can
  // neither see nor disturb another's on it; results timed so are labelled gpu_shared.
  std::string share_group = {};
  int share_slots = 1;
  // A stage of a sharing run that must hold its GPU with no neighbour: the re-score of an
  // attempt whose shared GPU ran out of memory (docs/architecture.md, "GPUs"). It takes a free
  // GPU only; the rest of its run goes on sharing meanwhile (GpuLeases::acquire).
  bool alone = false;
  // For errors: "a GPU by nvidia of model 'h200'", "a GPU".
  std::string describe() const;
};

// What an attempt asks for: its task image's vendor and its run's options (gpu_model, and
// gpu_share among the attempts of run `runId`).
GpuRequest gpuRequestOf(const std::string& imageVendor, const nlohmann::json& runOptions,
                        const std::string& runId = "");

bool gpuServes(const gpu::GpuDevice& gpu, const GpuRequest& request);

}  // namespace akad
