// Row-wise softmax. Each row gets a scale of 1, 10, 100 or 1000 so that an implementation that
// exponentiates raw inputs overflows; the reference is the stable formula in double.
#include "akaharness.h"

#include <algorithm>
#include <cmath>

TensorSet akaGenerate(const Config& config, uint64_t seed) {
  const size_t rows = config.getSize("rows"), cols = config.getSize("cols");
  Rng rng(seed);
  TensorSet in;
  float* x = in.add(Tensor("x", DType::F32, {rows, cols})).data<float>();
  static const float scales[] = {1.0f, 10.0f, 100.0f, 1000.0f};
  for (size_t r = 0; r < rows; ++r) {
    const float scale = scales[rng.range(0, 3)];
    for (size_t c = 0; c < cols; ++c) x[r * cols + c] = rng.uniform(-scale, scale);
  }
  return in;
}

TensorSet akaReference(const Config& config, const TensorSet& in) {
  const size_t rows = config.getSize("rows"), cols = config.getSize("cols");
  const float* x = in.at("x").data<float>();
  TensorSet ref;
  float* out = ref.add(Tensor("out", DType::F32, {rows, cols})).data<float>();
  for (size_t r = 0; r < rows; ++r) {
    const float* row = x + r * cols;
    double max = row[0], sum = 0;
    for (size_t c = 1; c < cols; ++c) max = std::max<double>(max, row[c]);
    for (size_t c = 0; c < cols; ++c) sum += std::exp(row[c] - max);
    for (size_t c = 0; c < cols; ++c) out[r * cols + c] = static_cast<float>(std::exp(row[c] - max) / sum);
  }
  return ref;
}
