// Baseline: one thread per element, threadIdx.x running down a column of x: the writes to y are
// contiguous, but every read of a warp touches 32 different rows of x (uncoalesced).
#include <hip/hip_runtime.h>

namespace {

__global__ void transposeNaive(const float* x, float* y, int rows, int cols) {
  const int r = blockIdx.x * blockDim.x + threadIdx.x;
  const int c = blockIdx.y * blockDim.y + threadIdx.y;
  if (r < rows && c < cols) y[size_t(c) * rows + r] = x[size_t(r) * cols + c];
}

}  // namespace

extern "C" void transpose_f32(const float* x, float* y, int rows, int cols) {
  const dim3 block(64, 4);
  const dim3 grid((rows + block.x - 1) / block.x, (cols + block.y - 1) / block.y);
  hipLaunchKernelGGL(transposeNaive, grid, block, 0, 0, x, y, rows, cols);
}
