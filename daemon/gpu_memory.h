#pragma once
// Memory sizes of NVIDIA GPUs. The driver's /proc files that discovery reads do not give them,
// so akad asks NVML (the driver's libnvidia-ml.so.1, loaded at run time: akad neither links nor
// needs it). Matched by GPU UUID. Without NVML, or for a GPU it does not know, memory stays 0
// ("-" in `akactl gpus`): the size is shown to users, nothing depends on it.
#include <string>
#include <vector>

#include "sandbox/gpu_discovery.h"

namespace akad {

struct NvmlMemoryReport {
  int filled = 0;       // GPUs whose memory_bytes NVML gave
  std::string problem;  // why none or not all were filled (empty when all were)
};

// `libraries`: where to look for NVML, in order (default: the loader's search path, then the
// driver folders of common installs).
NvmlMemoryReport fillNvidiaMemory(std::vector<gpu::GpuDevice>& gpus,
                                  const std::vector<std::string>& libraries = {});

}  // namespace akad
