#include "akadevice.h"

#include <hip/hip_fp16.h>

extern "C" void gelu_f16(const __half* x, __half* y, size_t n);

TensorSet akaAllocateOutputs(const Config& config, const TensorSet&) {
  TensorSet out;
  out.add(Tensor("y", DType::F16, {config.getSize("n")}));
  return out;
}

void akaInvoke(const Config& config, const DeviceSet& in, DeviceSet& out) {
  const size_t n = config.getSize("n");
  in.at("x").require(DType::F16, {n});
  gelu_f16(in.at("x").data<__half>(), out.at("y").data<__half>(), n);
}
