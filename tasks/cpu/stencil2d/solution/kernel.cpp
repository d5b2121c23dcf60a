// Row by row in memory order. Each output row is built from three input rows with branch-free,
// vectorised passes: vertical neighbours first (a zero row stands in outside the grid), then the
// horizontal ones for the interior columns, the two edge columns by hand.
#include <cstddef>
#include <vector>

extern "C" void stencil5(const float* x, float* out, size_t rows, size_t cols) {
  std::vector<float> zero(cols, 0.0f);
  for (size_t i = 0; i < rows; ++i) {
    const float* up = i > 0 ? x + (i - 1) * cols : zero.data();
    const float* down = i + 1 < rows ? x + (i + 1) * cols : zero.data();
    const float* mid = x + i * cols;
    float* o = out + i * cols;
    if (cols == 1) {
      o[0] = 0.5f * mid[0] + 0.125f * (up[0] + down[0]);
      continue;
    }
    o[0] = 0.5f * mid[0] + 0.125f * (up[0] + down[0] + mid[1]);
#pragma omp simd
    for (size_t j = 1; j < cols - 1; ++j) o[j] = 0.5f * mid[j] + 0.125f * (up[j] + down[j] + mid[j - 1] + mid[j + 1]);
    o[cols - 1] = 0.5f * mid[cols - 1] + 0.125f * (up[cols - 1] + down[cols - 1] + mid[cols - 2]);
  }
}
