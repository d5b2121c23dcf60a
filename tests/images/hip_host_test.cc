// Host-side checks of the cuda-hip image: the runtime API header from a plain C++ compiler,
// HIP's documented constant values, hip_bfloat16 rounding, and hipcc's flag translation (dry run).

#include <hip/hip_bfloat16.h>
#include <hip/hip_runtime_api.h>

#include <gtest/gtest.h>
#include <glob.h>
#include <sys/wait.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <string>

namespace {

// HIP's documented enumerator values: code that stores or prints them must see the same numbers.
static_assert(hipMemcpyHostToHost == 0 && hipMemcpyHostToDevice == 1 && hipMemcpyDeviceToHost == 2 &&
              hipMemcpyDeviceToDevice == 3 && hipMemcpyDefault == 4);
static_assert(hipSuccess == 0 && hipErrorInvalidValue == 1 && hipErrorOutOfMemory == 2);
static_assert(hipHostMallocPortable == cudaHostAllocPortable && hipHostMallocMapped == cudaHostAllocMapped &&
              hipHostMallocWriteCombined == cudaHostAllocWriteCombined);
static_assert(sizeof(hip_bfloat16) == 2);

bool hostHasNvidiaGpuNode() {
  glob_t g{};
  bool found = glob("/dev/nvidia[0-9]*", 0, nullptr, &g) == 0 && g.gl_pathc > 0;
  globfree(&g);
  return found;
}

struct CommandResult {
  int exitCode;
  std::string output;
};

CommandResult runHipcc(const std::string& args, bool dryRun = true, const std::string& env = "") {
  std::string cmd = std::string("CUDA_HOME=") + AKAD_CUDA_HOME + (dryRun ? " HIPCC_DRY_RUN=1 " : " ") + env + " " +
                    AKAD_HIPCC + " " + args + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) return {-1, "popen failed"};
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  int status = pclose(p);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

TEST(HipBfloat16, RoundsToNearestEven) {
  EXPECT_EQ(hip_bfloat16(1.0f).data, 0x3f80);
  EXPECT_EQ(hip_bfloat16(-2.0f).data, 0xc000);
  // 1 + 2^-8 lies halfway between 1 and 1 + 2^-7: ties go to the even neighbour (1).
  EXPECT_EQ(hip_bfloat16(1.00390625f).data, 0x3f80);
  // 1 + 3*2^-8 lies halfway between 1 + 2^-7 (odd) and 1 + 2^-6 (even).
  EXPECT_EQ(hip_bfloat16(1.01171875f).data, 0x3f82);
  // Just above the halfway point rounds up.
  EXPECT_EQ(hip_bfloat16(1.0040f).data, 0x3f81);
  EXPECT_EQ(hip_bfloat16(1.0040f, hip_bfloat16::truncate).data, 0x3f80);
  EXPECT_EQ(hip_bfloat16::round_to_bfloat16(3.0f).data, 0x4040);
}

TEST(HipBfloat16, KeepsSpecialValues) {
  EXPECT_TRUE(std::isnan(float(hip_bfloat16(std::numeric_limits<float>::quiet_NaN()))));
  // A NaN whose payload sits only in the dropped low bits must not become infinity.
  float lowPayloadNan;
  uint32_t bits = 0x7f800001u;
  std::memcpy(&lowPayloadNan, &bits, sizeof bits);
  EXPECT_TRUE(std::isnan(float(hip_bfloat16(lowPayloadNan))));
  EXPECT_TRUE(std::isinf(float(hip_bfloat16(std::numeric_limits<float>::infinity()))));
  // The largest float rounds up to infinity, as round-to-nearest requires.
  EXPECT_TRUE(std::isinf(float(hip_bfloat16(std::numeric_limits<float>::max()))));
}

TEST(HipBfloat16, ArithmeticRoundsEachResult) {
  hip_bfloat16 a(1.5f), b(0.25f);
  EXPECT_EQ(float(a + b), 1.75f);
  EXPECT_EQ(float(a * b), 0.375f);
  EXPECT_EQ(float(a - b), 1.25f);
  EXPECT_EQ(float(a / b), 6.0f);
  EXPECT_EQ(float(-a), -1.5f);
  EXPECT_TRUE(b < a);
  hip_bfloat16 c(1.0f);
  c += hip_bfloat16(1.0f / 512);  // 1 + 2^-9 rounds back to 1 in bfloat16
  EXPECT_EQ(float(c), 1.0f);
}

TEST(HipRuntimeApiOnHost, ReportsNoGpuWithoutOne) {
  if (hostHasNvidiaGpuNode()) GTEST_SKIP() << "this host has an NVIDIA GPU; the GPU tests cover it";
  int count = -1;
  hipError_t e = hipGetDeviceCount(&count);
  EXPECT_TRUE(e != hipSuccess || count == 0) << hipGetErrorString(e);
  if (e != hipSuccess) {
    EXPECT_GT(std::string(hipGetErrorString(e)).size(), 0u);
    EXPECT_EQ(hipGetLastError(), e);
  }
}

TEST(HipRuntimeApiOnHost, RejectsNullOutputs) {
  EXPECT_EQ(hipGetDeviceProperties(nullptr, 0), hipErrorInvalidValue);
  EXPECT_EQ(hipDeviceGetAttribute(nullptr, hipDeviceAttributeWarpSize, 0), hipErrorInvalidValue);
}

TEST(HipRuntimeApiOnHost, ErrorStringsComeFromCuda) {
  EXPECT_STREQ(hipGetErrorString(hipErrorOutOfMemory), cudaGetErrorString(cudaErrorMemoryAllocation));
  EXPECT_STREQ(hipGetErrorName(hipErrorInvalidDevice), "cudaErrorInvalidDevice");
}

TEST(Hipcc, DefaultsToSm90WithPtx) {
  CommandResult r = runHipcc("-O3 kernel.cpp -o kernel");
  ASSERT_EQ(r.exitCode, 0) << r.output;
  EXPECT_NE(r.output.find("-gencode arch=compute_90,code=[sm_90,compute_90]"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("-x cu kernel.cpp"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("-O3"), std::string::npos);
  EXPECT_NE(r.output.find("-o kernel"), std::string::npos);
  EXPECT_NE(r.output.find("/images/cuda-hip/include"), std::string::npos);
}

// The AKA compat layer's headers and hipBLAS-as-cuBLAS only where the wrap scorer turned the
// layer on for the task (docs/aka.md, "Compat layer").
TEST(Hipcc, AddsTheAkaCompatLayerOnlyWhenItIsOn) {
  CommandResult on = runHipcc("main.hip -o m -lhipblas", true, "AKAD_AKA_COMPAT=hipblas-on-cublas");
  ASSERT_EQ(on.exitCode, 0) << on.output;
  EXPECT_NE(on.output.find("/images/cuda-hip/aka-compat/include"), std::string::npos) << on.output;
  EXPECT_NE(on.output.find("-lcublas"), std::string::npos) << on.output;
  EXPECT_EQ(on.output.find("-lhipblas"), std::string::npos) << on.output;
  CommandResult off = runHipcc("main.hip -o m -lhipblas");
  ASSERT_EQ(off.exitCode, 0) << off.output;
  EXPECT_EQ(off.output.find("aka-compat"), std::string::npos) << off.output;
  EXPECT_NE(off.output.find("-lhipblas"), std::string::npos) << off.output;
}

TEST(Hipcc, TranslatesOffloadArchAndHostFlags) {
  CommandResult r = runHipcc("-c --offload-arch=sm_80,sm_90 -fPIC -Wall -std=c++20 -Wl,-rpath,/opt/x a.hip -o a.o");
  ASSERT_EQ(r.exitCode, 0) << r.output;
  EXPECT_NE(r.output.find("-gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code=sm_90"),
            std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("code=[sm_90"), std::string::npos) << "an explicit arch replaces the default";
  EXPECT_NE(r.output.find("-Xcompiler -fPIC"), std::string::npos);
  EXPECT_NE(r.output.find("-Xcompiler -Wall"), std::string::npos);
  EXPECT_NE(r.output.find("-std=c++20"), std::string::npos);
  EXPECT_NE(r.output.find("-Xlinker -rpath,/opt/x"), std::string::npos);
  EXPECT_NE(r.output.find("-x cu a.hip"), std::string::npos);
}

TEST(Hipcc, CompilesSourcesApartWhenLinkingWithObjects) {
  // nvcc's -x would also apply to the object: each source becomes an object first.
  CommandResult r = runHipcc("main.cpp helper.o -lm -o app");
  ASSERT_EQ(r.exitCode, 0) << r.output;
  size_t firstLine = r.output.find('\n');
  ASSERT_NE(firstLine, std::string::npos);
  std::string compile = r.output.substr(0, firstLine);
  std::string link = r.output.substr(firstLine + 1);
  EXPECT_NE(compile.find("-c -x cu main.cpp -o "), std::string::npos) << compile;
  EXPECT_EQ(link.find("-x cu"), std::string::npos) << link;
  EXPECT_NE(link.find("helper.o -lm -o app"), std::string::npos) << link;
}

TEST(Hipcc, RejectsAmdTargetsClearly) {
  CommandResult r = runHipcc("--offload-arch=gfx942 k.cpp", false);
  EXPECT_EQ(r.exitCode, 2);
  EXPECT_NE(r.output.find("gfx942 is an AMD target"), std::string::npos) << r.output;
}

TEST(Hipcc, FailsWithoutNvcc) {
  std::string cmd = std::string("CUDA_HOME=/nonexistent ") + AKAD_HIPCC + " k.cpp 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  char buf[512] = {};
  size_t n = fread(buf, 1, sizeof buf - 1, p);
  int status = pclose(p);
  EXPECT_EQ(WEXITSTATUS(status), 2);
  EXPECT_NE(std::string(buf, n).find("nvcc not found at /nonexistent/bin/nvcc"), std::string::npos);
}

}  // namespace
