// Row softmax: inputs uniform in [-8, 8); the reference works in double.
#include "akaharness.h"

#include <cmath>

TensorSet akaGenerate(const Config& config, uint64_t seed) {
  const size_t rows = config.getSize("rows"), cols = config.getSize("cols");
  TensorSet in;
  fillUniform(in.add(Tensor("x", DType::F32, {rows, cols})), seed, 0, -8.0f, 8.0f);
  return in;
}

TensorSet akaReference(const Config& config, const TensorSet& in) {
  const size_t rows = config.getSize("rows"), cols = config.getSize("cols");
  const float* x = in.at("x").data<float>();
  TensorSet ref;
  float* y = ref.add(Tensor("y", DType::F32, {rows, cols})).data<float>();
  for (size_t r = 0; r < rows; ++r) {
    const float* row = x + r * cols;
    double m = row[0];
    for (size_t c = 1; c < cols; ++c) m = std::max(m, static_cast<double>(row[c]));
    double sum = 0;
    for (size_t c = 0; c < cols; ++c) sum += std::exp(row[c] - m);
    for (size_t c = 0; c < cols; ++c) y[r * cols + c] = static_cast<float>(std::exp(row[c] - m) / sum);
  }
  return ref;
}
