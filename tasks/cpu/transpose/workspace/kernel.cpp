// Baseline: reads rows in order, so every write lands on a different row of out (stride rows).
#include <cstddef>

extern "C" void transpose(const float* x, float* out, size_t rows, size_t cols) {
  for (size_t r = 0; r < rows; ++r)
    for (size_t c = 0; c < cols; ++c) out[c * rows + r] = x[r * cols + c];
}
