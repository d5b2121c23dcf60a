// i-p-j order: the inner loop streams a row of B into a row of C, contiguous and vectorised.
// Four rows of C are built together so every loaded row of B is used four times, and the
// columns are processed in blocks of 256 so those four C rows stay in L1.
#include <cstddef>

extern "C" void matmul(const float* a, const float* b, float* c, size_t m, size_t n, size_t k) {
  constexpr size_t kBlock = 256;
  for (size_t j0 = 0; j0 < n; j0 += kBlock) {
    const size_t w = n - j0 < kBlock ? n - j0 : kBlock;
    size_t i = 0;
    for (; i + 4 <= m; i += 4) {
      float* c0 = c + i * n + j0;
      float* c1 = c0 + n;
      float* c2 = c1 + n;
      float* c3 = c2 + n;
      for (size_t j = 0; j < w; ++j) c0[j] = c1[j] = c2[j] = c3[j] = 0;
      for (size_t p = 0; p < k; ++p) {
        const float a0 = a[i * k + p], a1 = a[(i + 1) * k + p], a2 = a[(i + 2) * k + p], a3 = a[(i + 3) * k + p];
        const float* bp = b + p * n + j0;
#pragma omp simd
        for (size_t j = 0; j < w; ++j) {
          c0[j] += a0 * bp[j];
          c1[j] += a1 * bp[j];
          c2[j] += a2 * bp[j];
          c3[j] += a3 * bp[j];
        }
      }
    }
    for (; i < m; ++i) {
      float* ci = c + i * n + j0;
      for (size_t j = 0; j < w; ++j) ci[j] = 0;
      for (size_t p = 0; p < k; ++p) {
        const float ap = a[i * k + p];
        const float* bp = b + p * n + j0;
#pragma omp simd
        for (size_t j = 0; j < w; ++j) ci[j] += ap * bp[j];
      }
    }
  }
}
