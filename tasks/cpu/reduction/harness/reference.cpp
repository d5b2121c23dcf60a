// Row sums: inputs in [0, 1) so every sum is well conditioned; the reference sums in double.
#include "akaharness.h"

TensorSet akaGenerate(const Config& config, uint64_t seed) {
  const size_t rows = config.getSize("rows"), cols = config.getSize("cols");
  Rng rng(seed);
  TensorSet in;
  float* x = in.add(Tensor("x", DType::F32, {rows, cols})).data<float>();
  for (size_t i = 0; i < rows * cols; ++i) x[i] = rng.uniform(0.0f, 1.0f);
  return in;
}

TensorSet akaReference(const Config& config, const TensorSet& in) {
  const size_t rows = config.getSize("rows"), cols = config.getSize("cols");
  const float* x = in.at("x").data<float>();
  TensorSet ref;
  float* out = ref.add(Tensor("out", DType::F32, {rows})).data<float>();
  for (size_t r = 0; r < rows; ++r) {
    double sum = 0;
    for (size_t c = 0; c < cols; ++c) sum += x[r * cols + c];
    out[r] = static_cast<float>(sum);
  }
  return ref;
}
