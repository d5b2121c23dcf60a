// Fused scale + mask + softmax. Rows of up to 2048 columns: one warp per row, merged with
// shuffles only. Wider rows: one block per row. Pass 1 keeps an online (max, sum of exp) pair
// per thread over a coalesced strided slice of the row, merged across the warp with __shfl_xor
// (warpSize lanes) and across warps in shared memory; pass 2 re-reads the row (from L2) and
// writes the normalised values. One kernel instead of six.
#include <hip/hip_fp16.h>
#include <hip/hip_runtime.h>

namespace {

constexpr int kBlock = 256;

struct MaxSum {
  float m, s;
};

__device__ __forceinline__ MaxSum merge(MaxSum a, MaxSum b) {
  const float m = fmaxf(a.m, b.m);
  const float s = (a.m == -INFINITY ? 0.0f : a.s * __expf(a.m - m)) + (b.m == -INFINITY ? 0.0f : b.s * __expf(b.m - m));
  return {m, s};
}

__global__ void __launch_bounds__(kBlock) maskedSoftmax(const __half* __restrict__ x, const __half* __restrict__ mask,
                                                        __half* __restrict__ y, int cols, float scale) {
  const __half* in = x + size_t(blockIdx.x) * cols;
  __half* out = y + size_t(blockIdx.x) * cols;
  MaxSum acc{-INFINITY, 0.0f};
  for (int c = threadIdx.x; c < cols; c += kBlock) {
    const float v = __half2float(in[c]) * scale + __half2float(mask[c]);
    if (v > acc.m) {
      acc.s = acc.s * __expf(acc.m - v) + 1.0f;
      acc.m = v;
    } else {
      acc.s += __expf(v - acc.m);
    }
  }
  for (int off = warpSize / 2; off > 0; off /= 2) acc = merge(acc, MaxSum{__shfl_xor(acc.m, off), __shfl_xor(acc.s, off)});
  __shared__ MaxSum partial[kBlock / 16];
  __shared__ MaxSum total;
  const int lane = threadIdx.x % warpSize, warp = threadIdx.x / warpSize;
  if (lane == 0) partial[warp] = acc;
  __syncthreads();
  if (threadIdx.x == 0) {
    MaxSum t = partial[0];
    for (int i = 1; i < kBlock / warpSize; ++i) t = merge(t, partial[i]);
    total = t;
  }
  __syncthreads();
  const float m = total.m, inv = 1.0f / total.s;
  for (int c = threadIdx.x; c < cols; c += kBlock)
    out[c] = __float2half(__expf(__half2float(in[c]) * scale + __half2float(mask[c]) - m) * inv);
}

__global__ void __launch_bounds__(kBlock) maskedSoftmaxWarp(const __half* __restrict__ x,
                                                             const __half* __restrict__ mask, __half* __restrict__ y,
                                                             int rows, int cols, float scale) {
  const int row = blockIdx.x * (kBlock / warpSize) + threadIdx.x / warpSize;
  const int lane = threadIdx.x % warpSize;
  if (row >= rows) return;  // uniform per warp: the shuffles below see full warps
  const __half* in = x + size_t(row) * cols;
  __half* out = y + size_t(row) * cols;
  MaxSum acc{-INFINITY, 0.0f};
  for (int c = lane; c < cols; c += warpSize) {
    const float v = __half2float(in[c]) * scale + __half2float(mask[c]);
    if (v > acc.m) {
      acc.s = acc.s * __expf(acc.m - v) + 1.0f;
      acc.m = v;
    } else {
      acc.s += __expf(v - acc.m);
    }
  }
  for (int off = warpSize / 2; off > 0; off /= 2) acc = merge(acc, MaxSum{__shfl_xor(acc.m, off), __shfl_xor(acc.s, off)});
  const float m = acc.m, inv = 1.0f / acc.s;
  for (int c = lane; c < cols; c += warpSize)
    out[c] = __float2half(__expf(__half2float(in[c]) * scale + __half2float(mask[c]) - m) * inv);
}

int deviceWarpSize() {
  static int size = 0;
  if (size == 0) {
    int dev = 0;
    if (hipGetDevice(&dev) != hipSuccess || hipDeviceGetAttribute(&size, hipDeviceAttributeWarpSize, dev) != hipSuccess)
      size = 64;  // the larger warp: fewer rows per block, so every row is still covered
  }
  return size;
}

}  // namespace

extern "C" int masked_softmax_f16(const void* x, const void* mask, void* y, int rows, int cols, float scale,
                                  void* stream) {
  const hipStream_t s = static_cast<hipStream_t>(stream);
  if (cols <= 2048) {
    const int rowsPerBlock = kBlock / deviceWarpSize();
    hipLaunchKernelGGL(maskedSoftmaxWarp, dim3((rows + rowsPerBlock - 1) / rowsPerBlock), dim3(kBlock), 0, s,
                       static_cast<const __half*>(x), static_cast<const __half*>(mask), static_cast<__half*>(y), rows,
                       cols, scale);
  } else {
    hipLaunchKernelGGL(maskedSoftmax, dim3(rows), dim3(kBlock), 0, s, static_cast<const __half*>(x),
                       static_cast<const __half*>(mask), static_cast<__half*>(y), cols, scale);
  }
  return static_cast<int>(hipGetLastError());
}
