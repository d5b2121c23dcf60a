// Baseline: textbook i-j-p loops; the inner loop walks a column of B (stride n).
#include <cstddef>

extern "C" void matmul(const float* a, const float* b, float* c, size_t m, size_t n, size_t k) {
  for (size_t i = 0; i < m; ++i)
    for (size_t j = 0; j < n; ++j) {
      float sum = 0;
      for (size_t p = 0; p < k; ++p) sum += a[i * k + p] * b[p * n + j];
      c[i * n + j] = sum;
    }
}
