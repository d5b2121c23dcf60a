#pragma once
// GPU records made up for tests: this machine has no GPU, and the rules about GPUs (leases,
// eligibility) need only what discovery would report.
#include <string>

#include "sandbox/gpu_discovery.h"

namespace akad::test {

inline gpu::GpuDevice fakeGpu(const std::string& id, const std::string& vendor, const std::string& model) {
  gpu::GpuDevice g;
  g.id = id;
  g.vendor = vendor;
  g.model = model;
  return g;
}

}  // namespace akad::test
