#pragma once
// Minimal checking for the HIP programs of tests/images: they are compiled by the cuda-hip
// image's hipcc (nvcc), so they stay free of GoogleTest. Each program prints one line per failed
// check and ends with "N passed, N failed"; it exits 77 (ctest SKIP_RETURN_CODE) without a GPU.

#include <hip/hip_runtime.h>

#include <glob.h>

#include <cmath>
#include <cstdio>
#include <string>

namespace hipcheck {

inline int passed = 0;
inline int failed = 0;

inline void record(bool ok, const char* what, const char* file, int line) {
  if (ok) {
    ++passed;
  } else {
    ++failed;
    std::printf("FAILED %s:%d: %s\n", file, line, what);
  }
}

inline bool near(double got, double want, double relTol, double absTol = 0) {
  return std::fabs(got - want) <= std::fmax(absTol, relTol * std::fabs(want));
}

// Returns 0 when a GPU is usable, else prints why and returns the skip code.
inline int gpuOrSkip(const char* program) {
  glob_t g{};
  bool node = glob("/dev/nvidia[0-9]*", 0, nullptr, &g) == 0 && g.gl_pathc > 0;
  globfree(&g);
  if (!node) {
    std::printf("SKIP %s: no NVIDIA GPU on this host (no /dev/nvidia<N>); run on a GPU machine\n", program);
    return 77;
  }
  int count = 0;
  hipError_t e = hipGetDeviceCount(&count);
  if (e != hipSuccess || count == 0) {
    std::printf("SKIP %s: hipGetDeviceCount found no usable GPU: %s\n", program,
                e != hipSuccess ? hipGetErrorString(e) : "0 devices");
    return 77;
  }
  return 0;
}

inline int finish(const char* program) {
  std::printf("%s: %d passed, %d failed\n", program, passed, failed);
  return failed == 0 ? 0 : 1;
}

}  // namespace hipcheck

#define CHECK(cond) ::hipcheck::record(static_cast<bool>(cond), #cond, __FILE__, __LINE__)
#define CHECK_NEAR(got, want, rel) \
  ::hipcheck::record(::hipcheck::near((got), (want), (rel)), #got " ~= " #want, __FILE__, __LINE__)
#define CHECK_HIP(expr)                                                                    \
  do {                                                                                     \
    hipError_t e_ = (expr);                                                                \
    if (e_ != hipSuccess) std::printf("  %s -> %s\n", #expr, hipGetErrorString(e_));       \
    ::hipcheck::record(e_ == hipSuccess, #expr " == hipSuccess", __FILE__, __LINE__);      \
  } while (0)
