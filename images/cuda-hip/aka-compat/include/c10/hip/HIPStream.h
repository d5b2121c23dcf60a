#pragma once
// akad compat layer (docs/images.md, "AKA compat layer"): ROCm PyTorch's HIP stream names on a
// CUDA build of PyTorch. ROCm PyTorch is CUDA PyTorch hipified, so c10::hip::HIPStream is
// c10::cuda::CUDAStream under another name: the same current-stream bookkeeping, the same
// implicit conversion to the raw stream (hipStream_t is cudaStream_t on the cuda-hip image).
// Nothing here owns a stream; every name forwards to PyTorch's own.

#include <c10/cuda/CUDAStream.h>
#include <c10/hip/HIPException.h>

namespace c10::hip {

using HIPStream = c10::cuda::CUDAStream;

inline HIPStream getCurrentHIPStream(c10::DeviceIndex device = -1) { return c10::cuda::getCurrentCUDAStream(device); }
inline HIPStream getDefaultHIPStream(c10::DeviceIndex device = -1) { return c10::cuda::getDefaultCUDAStream(device); }
inline HIPStream getStreamFromPool(bool highPriority = false, c10::DeviceIndex device = -1) {
  return c10::cuda::getStreamFromPool(highPriority, device);
}
inline void setCurrentHIPStream(HIPStream stream) { c10::cuda::setCurrentCUDAStream(stream); }

}  // namespace c10::hip
