// Transpose: x uniform in [-1, 1); the reference is exact.
#include "akaharness.h"

#include <algorithm>

TensorSet akaGenerate(const Config& config, uint64_t seed) {
  const size_t rows = config.getSize("rows"), cols = config.getSize("cols");
  TensorSet in;
  fillUniform(in.add(Tensor("x", DType::F32, {rows, cols})), seed, 0, -1.0f, 1.0f);
  return in;
}

TensorSet akaReference(const Config& config, const TensorSet& in) {
  const size_t rows = config.getSize("rows"), cols = config.getSize("cols");
  const float* x = in.at("x").data<float>();
  TensorSet ref;
  float* y = ref.add(Tensor("y", DType::F32, {cols, rows})).data<float>();
  // Blocked so the reference stays fast on large matrices.
  const size_t b = 64;
  for (size_t r0 = 0; r0 < rows; r0 += b)
    for (size_t c0 = 0; c0 < cols; c0 += b)
      for (size_t r = r0; r < std::min(rows, r0 + b); ++r)
        for (size_t c = c0; c < std::min(cols, c0 + b); ++c) y[c * rows + r] = x[r * cols + c];
  return ref;
}
