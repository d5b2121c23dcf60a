// Baseline: the stable three-pass formula, exp evaluated twice per element, one division each.
#include <cmath>
#include <cstddef>

extern "C" void softmax_rows(const float* x, float* out, size_t rows, size_t cols) {
  for (size_t r = 0; r < rows; ++r) {
    const float* row = x + r * cols;
    float max = row[0];
    for (size_t c = 1; c < cols; ++c)
      if (row[c] > max) max = row[c];
    double sum = 0;
    for (size_t c = 0; c < cols; ++c) sum += std::exp(row[c] - max);
    for (size_t c = 0; c < cols; ++c) out[r * cols + c] = static_cast<float>(std::exp(row[c] - max) / sum);
  }
}
