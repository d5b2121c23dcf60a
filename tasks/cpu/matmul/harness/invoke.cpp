#include "akaharness.h"

extern "C" void matmul(const float* a, const float* b, float* c, size_t m, size_t n, size_t k);

TensorSet akaAllocateOutputs(const Config& config, const TensorSet&) {
  TensorSet out;
  out.add(Tensor("c", DType::F32, {config.getSize("m"), config.getSize("n")}));
  return out;
}

void akaInvoke(const Config& config, const TensorSet& in, TensorSet& out) {
  const size_t m = config.getSize("m"), n = config.getSize("n"), k = config.getSize("k");
  requireShape(in.at("a"), DType::F32, {m, k});
  requireShape(in.at("b"), DType::F32, {k, n});
  matmul(in.at("a").data<float>(), in.at("b").data<float>(), out.at("c").data<float>(), m, n, k);
}
