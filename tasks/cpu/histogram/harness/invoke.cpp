#include "akaharness.h"

extern "C" void histogram(const int32_t* keys, size_t n, int32_t* counts, size_t bins);

TensorSet akaAllocateOutputs(const Config& config, const TensorSet&) {
  TensorSet out;
  out.add(Tensor("counts", DType::I32, {config.getSize("bins")}));
  return out;
}

void akaInvoke(const Config& config, const TensorSet& in, TensorSet& out) {
  const size_t n = config.getSize("n"), bins = config.getSize("bins");
  requireShape(in.at("keys"), DType::I32, {n});
  histogram(in.at("keys").data<int32_t>(), n, out.at("counts").data<int32_t>(), bins);
}
