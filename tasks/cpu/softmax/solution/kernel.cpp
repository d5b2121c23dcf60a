// Stable softmax with a vectorisable exp: e^t = 2^n * e^f with n = round(t / ln 2) and
// |f| <= ln2/2, e^f by a degree-6 polynomial (relative error ~2e-7), 2^n built in the exponent
// bits. exp is evaluated once per element and stored; the row is then scaled by 1/sum.
// Single-threaded on purpose: threads lose badly on a loaded 2-core host.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace {

inline float fastExp(float t) {  // t <= 0 here (inputs minus the row maximum)
  t = t < -87.0f ? -87.0f : t;   // e^-87 ~ 1.6e-38: still a normal float, far below tolerance
  const float n = std::nearbyint(t * 1.44269504088896341f);
  const float f = (t - n * 0.693145751953125f) - n * 1.42860682030941723e-06f;
  float p = 1.0f / 720;
  p = p * f + 1.0f / 120;
  p = p * f + 1.0f / 24;
  p = p * f + 1.0f / 6;
  p = p * f + 0.5f;
  p = p * f + 1.0f;
  p = p * f + 1.0f;
  const int32_t bits = (static_cast<int32_t>(n) + 127) << 23;
  float scale;
  std::memcpy(&scale, &bits, 4);
  return p * scale;
}

}  // namespace

extern "C" void softmax_rows(const float* x, float* out, size_t rows, size_t cols) {
  for (size_t r = 0; r < rows; ++r) {
    const float* row = x + r * cols;
    float* o = out + r * cols;
    float max = row[0];
#pragma omp simd reduction(max : max)
    for (size_t c = 0; c < cols; ++c) max = row[c] > max ? row[c] : max;
    // Float partial sums per block of 4096, folded into a double: long rows stay accurate.
    double sum = 0;
    for (size_t c0 = 0; c0 < cols; c0 += 4096) {
      const size_t c1 = c0 + 4096 < cols ? c0 + 4096 : cols;
      float part = 0;
#pragma omp simd reduction(+ : part)
      for (size_t c = c0; c < c1; ++c) {
        o[c] = fastExp(row[c] - max);
        part += o[c];
      }
      sum += part;
    }
    const float inv = static_cast<float>(1.0 / sum);
#pragma omp simd
    for (size_t c = 0; c < cols; ++c) o[c] *= inv;
  }
}
