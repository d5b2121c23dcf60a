// Layer normalisation over rows. Each row has its own offset and spread, which punishes the
// one-pass E[x^2] - E[x]^2 variance in float; the reference is two-pass in double.
#include "akaharness.h"

#include <cmath>

TensorSet akaGenerate(const Config& config, uint64_t seed) {
  const size_t rows = config.getSize("rows"), cols = config.getSize("cols");
  Rng rng(seed);
  TensorSet in;
  float* x = in.add(Tensor("x", DType::F32, {rows, cols})).data<float>();
  float* gamma = in.add(Tensor("gamma", DType::F32, {cols})).data<float>();
  float* beta = in.add(Tensor("beta", DType::F32, {cols})).data<float>();
  for (size_t r = 0; r < rows; ++r) {
    const float offset = rng.uniform(-10.0f, 10.0f), spread = rng.uniform(0.5f, 5.0f);
    for (size_t c = 0; c < cols; ++c) x[r * cols + c] = offset + spread * rng.uniform(-1.0f, 1.0f);
  }
  for (size_t c = 0; c < cols; ++c) gamma[c] = rng.uniform(0.5f, 1.5f);
  for (size_t c = 0; c < cols; ++c) beta[c] = rng.uniform(-0.5f, 0.5f);
  return in;
}

TensorSet akaReference(const Config& config, const TensorSet& in) {
  const size_t rows = config.getSize("rows"), cols = config.getSize("cols");
  const float* x = in.at("x").data<float>();
  const float* gamma = in.at("gamma").data<float>();
  const float* beta = in.at("beta").data<float>();
  TensorSet ref;
  float* out = ref.add(Tensor("out", DType::F32, {rows, cols})).data<float>();
  for (size_t r = 0; r < rows; ++r) {
    const float* row = x + r * cols;
    double mean = 0, var = 0;
    for (size_t c = 0; c < cols; ++c) mean += row[c];
    mean /= cols;
    for (size_t c = 0; c < cols; ++c) var += (row[c] - mean) * (row[c] - mean);
    var /= cols;
    const double rstd = 1.0 / std::sqrt(var + 1e-5);
    for (size_t c = 0; c < cols; ++c) out[r * cols + c] = static_cast<float>((row[c] - mean) * rstd * gamma[c] + beta[c]);
  }
  return ref;
}
