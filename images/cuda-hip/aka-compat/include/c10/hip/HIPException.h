#pragma once
// akad compat layer: ROCm PyTorch's HIP error-check macros on a CUDA build of PyTorch (a HIP
// error is a CUDA error on the cuda-hip image). A task that defines its own fallback under
// #ifndef keeps it.

#include <c10/cuda/CUDAException.h>

#ifndef C10_HIP_CHECK
#define C10_HIP_CHECK(EXPR) C10_CUDA_CHECK(EXPR)
#endif
#ifndef C10_HIP_CHECK_WARN
#define C10_HIP_CHECK_WARN(EXPR) C10_CUDA_CHECK_WARN(EXPR)
#endif
#ifndef C10_HIP_KERNEL_LAUNCH_CHECK
#define C10_HIP_KERNEL_LAUNCH_CHECK() C10_CUDA_KERNEL_LAUNCH_CHECK()
#endif
