#include "akaharness.h"

extern "C" void softmax_rows(const float* x, float* out, size_t rows, size_t cols);

TensorSet akaAllocateOutputs(const Config& config, const TensorSet&) {
  TensorSet out;
  out.add(Tensor("out", DType::F32, {config.getSize("rows"), config.getSize("cols")}));
  return out;
}

void akaInvoke(const Config& config, const TensorSet& in, TensorSet& out) {
  const size_t rows = config.getSize("rows"), cols = config.getSize("cols");
  requireShape(in.at("x"), DType::F32, {rows, cols});
  softmax_rows(in.at("x").data<float>(), out.at("out").data<float>(), rows, cols);
}
