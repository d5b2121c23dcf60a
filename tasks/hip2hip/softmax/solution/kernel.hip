// One block per row. Pass 1: every thread keeps an online (max, sum of exp) pair over a strided,
// coalesced slice of the row; pairs are merged across the warp with shuffles (__shfl_xor with
// warpSize) and across warps through shared memory. Pass 2 re-reads the row (now in L2) and
// writes exp(x - max) / sum. Rows are not 16-byte aligned in general (cols can be odd), so
// loads stay scalar; consecutive threads still read consecutive floats.
#include <hip/hip_runtime.h>

namespace {

constexpr int kBlock = 256;

struct MaxSum {
  float m, s;
};

__device__ __forceinline__ MaxSum merge(MaxSum a, MaxSum b) {
  const float m = fmaxf(a.m, b.m);
  // -INFINITY only for empty slices; exp(-inf - m) = 0 keeps them neutral.
  const float s = (a.m == -INFINITY ? 0.0f : a.s * __expf(a.m - m)) + (b.m == -INFINITY ? 0.0f : b.s * __expf(b.m - m));
  return {m, s};
}

__global__ void __launch_bounds__(kBlock) softmaxRowPerBlock(const float* __restrict__ x, float* __restrict__ y, int cols) {
  const float* in = x + size_t(blockIdx.x) * cols;
  float* out = y + size_t(blockIdx.x) * cols;
  MaxSum acc{-INFINITY, 0.0f};
  for (int c = threadIdx.x; c < cols; c += kBlock) {
    const float v = in[c];
    if (v > acc.m) {
      acc.s = acc.s * __expf(acc.m - v) + 1.0f;
      acc.m = v;
    } else {
      acc.s += __expf(v - acc.m);
    }
  }
  for (int off = warpSize / 2; off > 0; off /= 2) {
    MaxSum o{__shfl_xor(acc.m, off), __shfl_xor(acc.s, off)};
    acc = merge(acc, o);
  }
  __shared__ MaxSum partial[kBlock / 16];  // room for warps of 16 lanes or more
  __shared__ MaxSum total;
  const int warps = kBlock / warpSize;
  const int lane = threadIdx.x % warpSize, warp = threadIdx.x / warpSize;
  if (lane == 0) partial[warp] = acc;
  __syncthreads();
  if (threadIdx.x == 0) {
    MaxSum t = partial[0];
    for (int w = 1; w < warps; ++w) t = merge(t, partial[w]);
    total = t;
  }
  __syncthreads();
  const float m = total.m, inv = 1.0f / total.s;
  for (int c = threadIdx.x; c < cols; c += kBlock) out[c] = __expf(in[c] - m) * inv;
}

}  // namespace

extern "C" void softmax_rows(const float* x, float* y, int rows, int cols) {
  hipLaunchKernelGGL(softmaxRowPerBlock, dim3(rows), dim3(kBlock), 0, 0, x, y, cols);
}
