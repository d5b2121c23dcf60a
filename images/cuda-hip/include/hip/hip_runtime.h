#pragma once
// HIP kernel language and runtime on top of CUDA (akad's cuda-hip image). Include this from HIP
// sources compiled with the image's hipcc (nvcc underneath).
//
// Most of HIP's kernel language is CUDA's already: __global__/__device__/__shared__, dim3,
// threadIdx/blockIdx/blockDim/gridDim, __syncthreads, atomics, math functions and <<<>>>. This
// header adds the names HIP has and CUDA lacks. One difference code must respect: warpSize is
// 32 here and 64 on most AMD GPUs (CDNA), so kernels must use warpSize, never a literal 64 or 32.

#include "hip/hip_runtime_api.h"

#include <cuda_runtime.h>
// Before the shuffles below: these headers declare their own maskless overloads (below sm_70).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

// hipOccupancyMaxPotentialBlockSize uses CUDA's C++ template, which lives in cuda_runtime.h.
template <class F>
inline hipError_t hipOccupancyMaxPotentialBlockSize(int* gridSize, int* blockSize, F func,
                                                    size_t dynSharedBytes = 0, int blockSizeLimit = 0) {
  return cudaOccupancyMaxPotentialBlockSize(gridSize, blockSize, func, dynSharedBytes, blockSizeLimit);
}

#if defined(__CUDACC__)

// Launch: HIP's macro form. Wrap template kernels in HIP_KERNEL_NAME(...) or parentheses.
#define HIP_KERNEL_NAME(...) __VA_ARGS__
#define hipLaunchKernelGGL(kernel, grid, block, sharedBytes, stream, ...) \
  do {                                                                    \
    kernel<<<(grid), (block), (sharedBytes), (stream)>>>(__VA_ARGS__);    \
  } while (0)

#define HIP_DYNAMIC_SHARED(type, var) extern __shared__ type var[]
#define HIP_DYNAMIC_SHARED_ATTRIBUTE

// HIP's older index spellings.
#define hipThreadIdx_x (threadIdx.x)
#define hipThreadIdx_y (threadIdx.y)
#define hipThreadIdx_z (threadIdx.z)
#define hipBlockIdx_x (blockIdx.x)
#define hipBlockIdx_y (blockIdx.y)
#define hipBlockIdx_z (blockIdx.z)
#define hipBlockDim_x (blockDim.x)
#define hipBlockDim_y (blockDim.y)
#define hipBlockDim_z (blockDim.z)
#define hipGridDim_x (gridDim.x)
#define hipGridDim_y (gridDim.y)
#define hipGridDim_z (gridDim.z)

namespace akad_hip {

// A full 32-lane mask. HIP's 64-bit masks are accepted by the *_sync calls below and truncate
// to the 32 lanes an NVIDIA warp has.
inline constexpr unsigned kFullWarpMask = 0xffffffffu;

// HIP's ballot returns 64 bits (wave64); the upper half is always 0 here.
__device__ __forceinline__ unsigned long long ballot(int predicate) {
  return static_cast<unsigned long long>(__ballot_sync(kFullWarpMask, predicate));
}
__device__ __forceinline__ int any(int predicate) { return __any_sync(kFullWarpMask, predicate); }
__device__ __forceinline__ int all(int predicate) { return __all_sync(kFullWarpMask, predicate); }

}  // namespace akad_hip

// HIP's maskless shuffles, as functions: every lane of the warp must take part (full mask),
// which matches how HIP code uses them (after the warp reconverged). Code that shuffles inside
// divergent branches must use the *_sync forms with the right mask. For sm_70 and newer CUDA
// declares no maskless shuffles in device code, so these templates are what a call finds there;
// the host pass still sees CUDA's deprecated declarations, which never generate code.
template <class T>
__device__ __forceinline__ T __shfl(T var, int srcLane, int width = warpSize) {
  return __shfl_sync(akad_hip::kFullWarpMask, var, srcLane, width);
}
template <class T>
__device__ __forceinline__ T __shfl_up(T var, unsigned int delta, int width = warpSize) {
  return __shfl_up_sync(akad_hip::kFullWarpMask, var, delta, width);
}
template <class T>
__device__ __forceinline__ T __shfl_down(T var, unsigned int delta, int width = warpSize) {
  return __shfl_down_sync(akad_hip::kFullWarpMask, var, delta, width);
}
template <class T>
__device__ __forceinline__ T __shfl_xor(T var, int laneMask, int width = warpSize) {
  return __shfl_xor_sync(akad_hip::kFullWarpMask, var, laneMask, width);
}

// The votes cannot be functions: CUDA 13 still declares __any, __all (extern "C") and __ballot
// as builtins that compile only below sm_70, and a call with an int argument would pick them
// over any overload. So they stay function-like macros, which rewrite only `name(`; the one CUDA
// C++ library entity spelled that way is libcu++'s `struct __any { __any(...); }`, so its header
// is read first (its include guard then keeps the macro away from it wherever thrust, CUB or
// torch include it later). libcu++'s `__all<...>` is not followed by `(` and is left alone.
#if defined(__cplusplus) && __cplusplus >= 201703L && defined(__has_include)
#if __has_include(<cuda/std/__functional/invoke.h>)
#include <cuda/std/__functional/invoke.h>
#endif
#endif
#define __ballot(p) ::akad_hip::ballot(p)
#define __any(p) ::akad_hip::any(p)
#define __all(p) ::akad_hip::all(p)

__device__ __forceinline__ unsigned int __lane_id() {
  unsigned int lane;
  asm volatile("mov.u32 %0, %%laneid;" : "=r"(lane));
  return lane;
}

// HIP's wall clock; ticks at hipDeviceAttributeWallClockRate kHz (nanoseconds here).
__device__ __forceinline__ long long wall_clock64() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return static_cast<long long>(t);
}

// AMD spellings of plain atomics: on NVIDIA there is one hardware path.
template <class T>
__device__ __forceinline__ T unsafeAtomicAdd(T* address, T value) { return atomicAdd(address, value); }
template <class T>
__device__ __forceinline__ T safeAtomicAdd(T* address, T value) { return atomicAdd(address, value); }

// HIP has float min/max atomics, CUDA does not: compare-and-swap on the bit pattern.
__device__ inline float atomicMax(float* address, float value) {
  int* bits = reinterpret_cast<int*>(address);
  int old = *bits;
  while (__int_as_float(old) < value) {
    int seen = atomicCAS(bits, old, __float_as_int(value));
    if (seen == old) break;
    old = seen;
  }
  return __int_as_float(old);
}
__device__ inline float atomicMin(float* address, float value) {
  int* bits = reinterpret_cast<int*>(address);
  int old = *bits;
  while (__int_as_float(old) > value) {
    int seen = atomicCAS(bits, old, __float_as_int(value));
    if (seen == old) break;
    old = seen;
  }
  return __int_as_float(old);
}

#endif  // __CUDACC__
