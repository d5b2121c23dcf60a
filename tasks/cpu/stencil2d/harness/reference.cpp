// One 5-point stencil step with zero boundary, computed in double.
#include "akaharness.h"

TensorSet akaGenerate(const Config& config, uint64_t seed) {
  const size_t rows = config.getSize("rows"), cols = config.getSize("cols");
  Rng rng(seed);
  TensorSet in;
  float* x = in.add(Tensor("x", DType::F32, {rows, cols})).data<float>();
  for (size_t i = 0; i < rows * cols; ++i) x[i] = rng.uniform(-1.0f, 1.0f);
  return in;
}

TensorSet akaReference(const Config& config, const TensorSet& in) {
  const size_t rows = config.getSize("rows"), cols = config.getSize("cols");
  const float* x = in.at("x").data<float>();
  auto at = [&](size_t i, size_t j, int di, int dj) -> double {
    if ((di < 0 && i == 0) || (di > 0 && i + 1 == rows) || (dj < 0 && j == 0) || (dj > 0 && j + 1 == cols)) return 0;
    return x[(i + di) * cols + (j + dj)];
  };
  TensorSet ref;
  float* out = ref.add(Tensor("out", DType::F32, {rows, cols})).data<float>();
  for (size_t i = 0; i < rows; ++i)
    for (size_t j = 0; j < cols; ++j)
      out[i * cols + j] = static_cast<float>(
          0.5 * at(i, j, 0, 0) + 0.125 * (at(i, j, -1, 0) + at(i, j, 1, 0) + at(i, j, 0, -1) + at(i, j, 0, 1)));
  return ref;
}
