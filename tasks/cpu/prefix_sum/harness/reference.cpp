// Row-wise inclusive scan: inputs in [0, 1) keep every prefix well conditioned; the reference
// accumulates in double.
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
  float* out = ref.add(Tensor("out", DType::F32, {rows, cols})).data<float>();
  for (size_t r = 0; r < rows; ++r) {
    double sum = 0;
    for (size_t c = 0; c < cols; ++c) out[r * cols + c] = static_cast<float>(sum += x[r * cols + c]);
  }
  return ref;
}
