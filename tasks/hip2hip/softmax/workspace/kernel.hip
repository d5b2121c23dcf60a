// Baseline: one thread per row, three passes (max, sum of exponentials, normalise). Neighbouring
// threads read addresses a whole row apart, so no load is coalesced.
#include <hip/hip_runtime.h>

namespace {

__global__ void softmaxRowPerThread(const float* x, float* y, int rows, int cols) {
  const int r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r >= rows) return;
  const float* in = x + size_t(r) * cols;
  float* out = y + size_t(r) * cols;
  float m = in[0];
  for (int c = 1; c < cols; ++c) m = fmaxf(m, in[c]);
  float sum = 0.0f;
  for (int c = 0; c < cols; ++c) sum += expf(in[c] - m);
  for (int c = 0; c < cols; ++c) out[c] = expf(in[c] - m) / sum;
}

}  // namespace

extern "C" void softmax_rows(const float* x, float* y, int rows, int cols) {
  const int block = 128;
  hipLaunchKernelGGL(softmaxRowPerThread, dim3((rows + block - 1) / block), dim3(block), 0, 0, x, y, rows, cols);
}
