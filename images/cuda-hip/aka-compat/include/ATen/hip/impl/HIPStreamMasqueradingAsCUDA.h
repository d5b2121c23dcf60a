#pragma once
// akad compat layer: on ROCm, PyTorch hands HIP streams to code that believes it talks to CUDA
// through HIPStreamMasqueradingAsCUDA. On a CUDA build no masquerade is needed: the stream is a
// CUDAStream, which has the same members (stream(), device_index(), unwrap()...).

#include <c10/hip/HIPStream.h>

namespace at::hip {

using HIPStreamMasqueradingAsCUDA = c10::cuda::CUDAStream;

inline HIPStreamMasqueradingAsCUDA getCurrentHIPStreamMasqueradingAsCUDA(c10::DeviceIndex device = -1) {
  return c10::cuda::getCurrentCUDAStream(device);
}
inline HIPStreamMasqueradingAsCUDA getDefaultHIPStreamMasqueradingAsCUDA(c10::DeviceIndex device = -1) {
  return c10::cuda::getDefaultCUDAStream(device);
}
inline HIPStreamMasqueradingAsCUDA getStreamFromPoolMasqueradingAsCUDA(bool highPriority = false,
                                                                       c10::DeviceIndex device = -1) {
  return c10::cuda::getStreamFromPool(highPriority, device);
}
inline void setCurrentHIPStreamMasqueradingAsCUDA(HIPStreamMasqueradingAsCUDA stream) {
  c10::cuda::setCurrentCUDAStream(stream);
}

}  // namespace at::hip
