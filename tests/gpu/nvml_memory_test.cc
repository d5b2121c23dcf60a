// NVIDIA GPU memory sizes from NVML. There is no NVIDIA driver here, so these tests load a fake
// NVML library (tests/gpu/fake_nvml.c) and say so in their names; on the GPU machine
// `akactl gpus` shows the real figure.
#include <gtest/gtest.h>

#include "daemon/gpu_memory.h"

namespace akad {
namespace {

gpu::GpuDevice nvidia(const std::string& id, const std::string& uuid) {
  gpu::GpuDevice g;
  g.id = id;
  g.vendor = "nvidia";
  g.uuid = uuid;
  return g;
}

TEST(NvmlMemoryWithFakeNvml, FillsTheKnownGpuAndNamesTheOneNvmlDoesNotKnow) {
  std::vector<gpu::GpuDevice> gpus{nvidia("nvidia0", "GPU-4421ad8f-e3e4-cef2-4db5-6e174abaa159"),
                                   nvidia("nvidia1", "GPU-00000000-0000-0000-0000-000000000000")};
  gpu::GpuDevice amd;
  amd.id = "amd0";
  amd.vendor = "amd";
  amd.uuid = "GPU-4421ad8f-e3e4-cef2-4db5-6e174abaa159";  // same string: still not asked about
  amd.memory_bytes = 123;
  gpus.push_back(amd);
  NvmlMemoryReport r = fillNvidiaMemory(gpus, {FAKE_NVML});
  EXPECT_EQ(r.filled, 1);
  EXPECT_EQ(gpus[0].memory_bytes, 143771ULL << 20);
  EXPECT_EQ(gpus[1].memory_bytes, 0u);
  EXPECT_NE(r.problem.find("nvidia1: Not Found (6)"), std::string::npos) << r.problem;
  EXPECT_EQ(gpus[2].memory_bytes, 123u);
}

TEST(NvmlMemoryWithFakeNvml, MissingOrForeignLibraryLeavesSizesUnknownAndSaysWhy) {
  std::vector<gpu::GpuDevice> gpus{nvidia("nvidia0", "GPU-4421ad8f-e3e4-cef2-4db5-6e174abaa159")};
  NvmlMemoryReport missing = fillNvidiaMemory(gpus, {"/nonexistent/libnvidia-ml.so.1"});
  EXPECT_EQ(missing.filled, 0);
  EXPECT_NE(missing.problem.find("NVML not found"), std::string::npos) << missing.problem;
  EXPECT_NE(missing.problem.find("/nonexistent/libnvidia-ml.so.1"), std::string::npos) << missing.problem;
  NvmlMemoryReport foreign = fillNvidiaMemory(gpus, {"libm.so.6"});
  EXPECT_EQ(foreign.filled, 0);
  EXPECT_NE(foreign.problem.find("lacks"), std::string::npos) << foreign.problem;
  EXPECT_EQ(gpus[0].memory_bytes, 0u);
  // The first library that loads is the one used.
  EXPECT_EQ(fillNvidiaMemory(gpus, {"/nonexistent/libnvidia-ml.so.1", FAKE_NVML}).filled, 1);
  EXPECT_EQ(gpus[0].memory_bytes, 143771ULL << 20);
}

TEST(NvmlMemoryWithFakeNvml, NoNvidiaGpuLoadsNothing) {
  std::vector<gpu::GpuDevice> none;
  NvmlMemoryReport r = fillNvidiaMemory(none, {"/nonexistent/libnvidia-ml.so.1"});
  EXPECT_EQ(r.filled, 0);
  EXPECT_TRUE(r.problem.empty()) << r.problem;
}

}  // namespace
}  // namespace akad
