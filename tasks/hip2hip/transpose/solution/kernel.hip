// Tiled through shared memory: a block reads a 32x32 tile of x with coalesced row reads, then
// writes it transposed with coalesced row writes of y. The tile has 33 columns so the column
// reads from shared memory hit 32 different banks.
#include <hip/hip_runtime.h>

namespace {

constexpr int kTile = 32, kRowsPerPass = 8;

__global__ void __launch_bounds__(kTile * kRowsPerPass) transposeTiled(const float* __restrict__ x,
                                                                      float* __restrict__ y, int rows, int cols) {
  __shared__ float tile[kTile][kTile + 1];
  const int c0 = blockIdx.x * kTile, r0 = blockIdx.y * kTile;
  const int tx = threadIdx.x, ty = threadIdx.y;
  for (int i = ty; i < kTile; i += kRowsPerPass) {
    const int r = r0 + i, c = c0 + tx;
    if (r < rows && c < cols) tile[i][tx] = x[size_t(r) * cols + c];
  }
  __syncthreads();
  for (int i = ty; i < kTile; i += kRowsPerPass) {
    const int c = c0 + i, r = r0 + tx;  // y[c][r] = x[r][c]
    if (c < cols && r < rows) y[size_t(c) * rows + r] = tile[tx][i];
  }
}

}  // namespace

extern "C" void transpose_f32(const float* x, float* y, int rows, int cols) {
  const dim3 block(kTile, kRowsPerPass);
  const dim3 grid((cols + kTile - 1) / kTile, (rows + kTile - 1) / kTile);
  hipLaunchKernelGGL(transposeTiled, grid, block, 0, 0, x, y, rows, cols);
}
