// RMSNorm on bf16: x uniform in [-3, 3), w uniform in [0.5, 1.5), both rounded to bf16, eps from
// the configuration (default 1e-6). The reference works in double and rounds once to bf16.
#include "akaharness.h"

#include <cmath>

TensorSet akaGenerate(const Config& config, uint64_t seed) {
  const size_t rows = config.getSize("rows"), cols = config.getSize("cols");
  TensorSet in;
  fillUniform(in.add(Tensor("x", DType::BF16, {rows, cols})), seed, 0, -3.0f, 3.0f);
  fillUniform(in.add(Tensor("w", DType::BF16, {cols})), seed, 1, 0.5f, 1.5f);
  return in;
}

TensorSet akaReference(const Config& config, const TensorSet& in) {
  const size_t rows = config.getSize("rows"), cols = config.getSize("cols");
  const double eps = config.has("eps") ? config.getDouble("eps") : 1e-6;
  const uint16_t* x = in.at("x").data<uint16_t>();
  const uint16_t* w = in.at("w").data<uint16_t>();
  TensorSet ref;
  uint16_t* y = ref.add(Tensor("y", DType::BF16, {rows, cols})).data<uint16_t>();
  for (size_t r = 0; r < rows; ++r) {
    const uint16_t* row = x + r * cols;
    double ss = 0;
    for (size_t c = 0; c < cols; ++c) {
      double v = akt::bf16ToFloat(row[c]);
      ss += v * v;
    }
    const double scale = 1.0 / std::sqrt(ss / static_cast<double>(cols) + eps);
    for (size_t c = 0; c < cols; ++c)
      y[r * cols + c] = akt::floatToBf16(static_cast<float>(akt::bf16ToFloat(row[c]) * scale * akt::bf16ToFloat(w[c])));
  }
  return ref;
}
