// GELU (erf form) on f16: inputs uniform in [-6, 6) rounded to f16; the reference computes in
// double from the f16 input and rounds once to f16.
#include "akaharness.h"

#include <cmath>

TensorSet akaGenerate(const Config& config, uint64_t seed) {
  const size_t n = config.getSize("n");
  TensorSet in;
  fillUniform(in.add(Tensor("x", DType::F16, {n})), seed, 0, -6.0f, 6.0f);
  return in;
}

TensorSet akaReference(const Config& config, const TensorSet& in) {
  const size_t n = config.getSize("n");
  const uint16_t* x = in.at("x").data<uint16_t>();
  TensorSet ref;
  uint16_t* y = ref.add(Tensor("y", DType::F16, {n})).data<uint16_t>();
  for (size_t i = 0; i < n; ++i) {
    double v = akt::halfToFloat(x[i]);
    y[i] = akt::floatToHalf(static_cast<float>(0.5 * v * (1.0 + std::erf(v / std::sqrt(2.0)))));
  }
  return ref;
}
