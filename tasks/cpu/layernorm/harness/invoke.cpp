#include "akaharness.h"

extern "C" void layernorm(const float* x, const float* gamma, const float* beta, float* out, size_t rows,
                          size_t cols, float eps);

TensorSet akaAllocateOutputs(const Config& config, const TensorSet&) {
  TensorSet out;
  out.add(Tensor("out", DType::F32, {config.getSize("rows"), config.getSize("cols")}));
  return out;
}

void akaInvoke(const Config& config, const TensorSet& in, TensorSet& out) {
  const size_t rows = config.getSize("rows"), cols = config.getSize("cols");
  requireShape(in.at("x"), DType::F32, {rows, cols});
  requireShape(in.at("gamma"), DType::F32, {cols});
  requireShape(in.at("beta"), DType::F32, {cols});
  layernorm(in.at("x").data<float>(), in.at("gamma").data<float>(), in.at("beta").data<float>(),
            out.at("out").data<float>(), rows, cols, 1e-5f);
}
