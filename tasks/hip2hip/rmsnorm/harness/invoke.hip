#include "akadevice.h"

#include <hip/hip_bf16.h>

extern "C" void rmsnorm_bf16(const __hip_bfloat16* x, const __hip_bfloat16* w, __hip_bfloat16* y, int rows,
                             int cols, float eps);

TensorSet akaAllocateOutputs(const Config& config, const TensorSet&) {
  TensorSet out;
  out.add(Tensor("y", DType::BF16, {config.getSize("rows"), config.getSize("cols")}));
  return out;
}

void akaInvoke(const Config& config, const DeviceSet& in, DeviceSet& out) {
  const size_t rows = config.getSize("rows"), cols = config.getSize("cols");
  const float eps = static_cast<float>(config.has("eps") ? config.getDouble("eps") : 1e-6);
  in.at("x").require(DType::BF16, {rows, cols});
  in.at("w").require(DType::BF16, {cols});
  rmsnorm_bf16(in.at("x").data<__hip_bfloat16>(), in.at("w").data<__hip_bfloat16>(),
               out.at("y").data<__hip_bfloat16>(), static_cast<int>(rows), static_cast<int>(cols), eps);
}
