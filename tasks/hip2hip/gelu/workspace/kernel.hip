// Baseline: every thread walks its own contiguous chunk of 64 elements, so at each step the
// threads of a warp touch 32 different cache lines (uncoalesced), one scalar half at a time.
#include <hip/hip_fp16.h>
#include <hip/hip_runtime.h>

namespace {

constexpr size_t kChunk = 64;

__global__ void geluChunks(const __half* x, __half* y, size_t n) {
  size_t begin = (blockIdx.x * size_t(blockDim.x) + threadIdx.x) * kChunk;
  for (size_t i = begin; i < begin + kChunk && i < n; ++i) {
    float v = __half2float(x[i]);
    y[i] = __float2half(0.5f * v * (1.0f + erff(v * 0.70710678118654752f)));
  }
}

}  // namespace

extern "C" void gelu_f16(const __half* x, __half* y, size_t n) {
  const size_t threads = (n + kChunk - 1) / kChunk;
  const unsigned block = 256;
  const unsigned grid = static_cast<unsigned>((threads + block - 1) / block);
  hipLaunchKernelGGL(geluChunks, dim3(grid), dim3(block), 0, 0, x, y, n);
}
