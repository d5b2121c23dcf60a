// Baseline: column by column (strided in a row-major grid), a bounds test for every neighbour.
#include <cstddef>

extern "C" void stencil5(const float* x, float* out, size_t rows, size_t cols) {
  for (size_t j = 0; j < cols; ++j)
    for (size_t i = 0; i < rows; ++i) {
      float up = i > 0 ? x[(i - 1) * cols + j] : 0.0f;
      float down = i + 1 < rows ? x[(i + 1) * cols + j] : 0.0f;
      float left = j > 0 ? x[i * cols + j - 1] : 0.0f;
      float right = j + 1 < cols ? x[i * cols + j + 1] : 0.0f;
      out[i * cols + j] = 0.5f * x[i * cols + j] + 0.125f * (up + down + left + right);
    }
}
