// Fused RMSNorm: one block per row; the sum of squares is reduced with warp shuffles
// (__shfl_xor over warpSize lanes) and shared memory. When cols is a multiple of 8 every row
// starts 16-byte aligned and each thread moves 8 halves per load/store; otherwise scalar loads.
#include <hip/hip_fp16.h>
#include <hip/hip_runtime.h>

namespace {

constexpr int kBlock = 256;

__device__ __forceinline__ float blockSum(float v) {
  for (int off = warpSize / 2; off > 0; off /= 2) v += __shfl_xor(v, off);
  __shared__ float partial[kBlock / 16];
  __shared__ float total;
  const int lane = threadIdx.x % warpSize, warp = threadIdx.x / warpSize;
  if (lane == 0) partial[warp] = v;
  __syncthreads();
  if (threadIdx.x == 0) {
    float t = 0.0f;
    for (int i = 0; i < kBlock / warpSize; ++i) t += partial[i];
    total = t;
  }
  __syncthreads();
  return total;
}

__global__ void __launch_bounds__(kBlock) rmsnormVec8(const uint4* __restrict__ x, const uint4* __restrict__ w,
                                                      uint4* __restrict__ y, int vecsPerRow, int cols, float eps) {
  const uint4* in = x + size_t(blockIdx.x) * vecsPerRow;
  uint4* out = y + size_t(blockIdx.x) * vecsPerRow;
  float ss = 0.0f;
  for (int i = threadIdx.x; i < vecsPerRow; i += kBlock) {
    uint4 v = in[i];
    const __half2* h = reinterpret_cast<const __half2*>(&v);
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      const float2 f = __half22float2(h[k]);
      ss += f.x * f.x + f.y * f.y;
    }
  }
  const float scale = rsqrtf(blockSum(ss) / cols + eps);
  for (int i = threadIdx.x; i < vecsPerRow; i += kBlock) {
    uint4 v = in[i], g = w[i];
    __half2* h = reinterpret_cast<__half2*>(&v);
    const __half2* gw = reinterpret_cast<const __half2*>(&g);
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      const float2 f = __half22float2(h[k]), gf = __half22float2(gw[k]);
      h[k] = __floats2half2_rn(f.x * scale * gf.x, f.y * scale * gf.y);
    }
    out[i] = v;
  }
}

__global__ void __launch_bounds__(kBlock) rmsnormScalar(const __half* __restrict__ x, const __half* __restrict__ w,
                                                        __half* __restrict__ y, int cols, float eps) {
  const __half* in = x + size_t(blockIdx.x) * cols;
  __half* out = y + size_t(blockIdx.x) * cols;
  float ss = 0.0f;
  for (int c = threadIdx.x; c < cols; c += kBlock) {
    const float v = __half2float(in[c]);
    ss += v * v;
  }
  const float scale = rsqrtf(blockSum(ss) / cols + eps);
  for (int c = threadIdx.x; c < cols; c += kBlock)
    out[c] = __float2half(__half2float(in[c]) * scale * __half2float(w[c]));
}

}  // namespace

extern "C" int rmsnorm_f16(const void* x, const void* w, void* y, int rows, int cols, float eps, void* stream) {
  const hipStream_t s = static_cast<hipStream_t>(stream);
  if (cols % 8 == 0) {
    hipLaunchKernelGGL(rmsnormVec8, dim3(rows), dim3(kBlock), 0, s, static_cast<const uint4*>(x),
                       static_cast<const uint4*>(w), static_cast<uint4*>(y), cols / 8, cols, eps);
  } else {
    hipLaunchKernelGGL(rmsnormScalar, dim3(rows), dim3(kBlock), 0, s, static_cast<const __half*>(x),
                       static_cast<const __half*>(w), static_cast<__half*>(y), cols, eps);
  }
  return static_cast<int>(hipGetLastError());
}
