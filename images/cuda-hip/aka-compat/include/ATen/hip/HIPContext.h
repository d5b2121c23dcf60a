#pragma once
// akad compat layer: ROCm PyTorch's ATen/hip/HIPContext.h on a CUDA build of PyTorch: CUDA's
// context header plus the HIP names of its stream and device functions, in at::hip.

#include <ATen/cuda/CUDAContext.h>
#include <c10/hip/HIPStream.h>

namespace at::hip {

using c10::hip::HIPStream;
using c10::hip::getCurrentHIPStream;
using c10::hip::getDefaultHIPStream;
using c10::hip::getStreamFromPool;
using c10::hip::setCurrentHIPStream;
using at::cuda::getCurrentDeviceProperties;
using at::cuda::getDeviceProperties;

}  // namespace at::hip
