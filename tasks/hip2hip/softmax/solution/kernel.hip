// Rows of up to 2048 columns: one warp per row, merged with shuffles only (no shared memory, no
// block barriers, 8 rows per 256-thread block). Wider rows: one block per row. Pass 1: every thread keeps an online (max, sum of exp) pair over a strided,
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

__global__ void __launch_bounds__(kBlock) softmaxRowPerWarp(const float* __restrict__ x, float* __restrict__ y,
                                                             int rows, int cols) {
  const int row = blockIdx.x * (kBlock / warpSize) + threadIdx.x / warpSize;
  const int lane = threadIdx.x % warpSize;
  if (row >= rows) return;  // uniform per warp: the shuffles below see full warps
  const float* in = x + size_t(row) * cols;
  float* out = y + size_t(row) * cols;
  MaxSum acc{-INFINITY, 0.0f};
  for (int c = lane; c < cols; c += warpSize) {
    const float v = in[c];
    if (v > acc.m) {
      acc.s = acc.s * __expf(acc.m - v) + 1.0f;
      acc.m = v;
    } else {
      acc.s += __expf(v - acc.m);
    }
  }
  for (int off = warpSize / 2; off > 0; off /= 2) acc = merge(acc, MaxSum{__shfl_xor(acc.m, off), __shfl_xor(acc.s, off)});
  const float m = acc.m, inv = 1.0f / acc.s;
  for (int c = lane; c < cols; c += warpSize) out[c] = __expf(in[c] - m) * inv;
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

extern "C" void softmax_rows(const float* x, float* y, int rows, int cols) {
  if (cols <= 2048) {
    const int rowsPerBlock = kBlock / deviceWarpSize();
    hipLaunchKernelGGL(softmaxRowPerWarp, dim3((rows + rowsPerBlock - 1) / rowsPerBlock), dim3(kBlock), 0, 0, x, y,
                       rows, cols);
  } else {
    hipLaunchKernelGGL(softmaxRowPerBlock, dim3(rows), dim3(kBlock), 0, 0, x, y, cols);
  }
}
