// Baseline: one running double sum per row, one element at a time.
#include <cstddef>

extern "C" void row_scan(const float* x, float* out, size_t rows, size_t cols) {
  for (size_t r = 0; r < rows; ++r) {
    double sum = 0;
    for (size_t c = 0; c < cols; ++c) {
      sum += x[r * cols + c];
      out[r * cols + c] = static_cast<float>(sum);
    }
  }
}
