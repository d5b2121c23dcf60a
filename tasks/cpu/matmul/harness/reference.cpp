// C = A * B with inputs in [-1, 1]; the reference accumulates in double.
#include "akaharness.h"

#include <algorithm>

TensorSet akaGenerate(const Config& config, uint64_t seed) {
  const size_t m = config.getSize("m"), n = config.getSize("n"), k = config.getSize("k");
  Rng rng(seed);
  TensorSet in;
  float* a = in.add(Tensor("a", DType::F32, {m, k})).data<float>();
  float* b = in.add(Tensor("b", DType::F32, {k, n})).data<float>();
  for (size_t i = 0; i < m * k; ++i) a[i] = rng.uniform(-1.0f, 1.0f);
  for (size_t i = 0; i < k * n; ++i) b[i] = rng.uniform(-1.0f, 1.0f);
  return in;
}

TensorSet akaReference(const Config& config, const TensorSet& in) {
  const size_t m = config.getSize("m"), n = config.getSize("n"), k = config.getSize("k");
  const float* a = in.at("a").data<float>();
  const float* b = in.at("b").data<float>();
  TensorSet ref;
  float* c = ref.add(Tensor("c", DType::F32, {m, n})).data<float>();
  std::vector<double> row(n);
  for (size_t i = 0; i < m; ++i) {
    std::fill(row.begin(), row.end(), 0.0);
    for (size_t p = 0; p < k; ++p)
      for (size_t j = 0; j < n; ++j) row[j] += static_cast<double>(a[i * k + p]) * b[p * n + j];
    for (size_t j = 0; j < n; ++j) c[i * n + j] = static_cast<float>(row[j]);
  }
  return ref;
}
