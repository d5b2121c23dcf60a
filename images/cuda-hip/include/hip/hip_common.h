#pragma once
// Platform macros shared by every header of akad's HIP-on-CUDA layer (the cuda-hip image).
// HIP sources test these to pick code paths; this layer only ever targets NVIDIA.

#if defined(__HIP_PLATFORM_AMD__) || defined(__HIP_PLATFORM_HCC__)
#error "akad cuda-hip headers target NVIDIA (nvcc); use the rocm image for AMD GPUs"
#endif

#ifndef __HIP_PLATFORM_NVIDIA__
#define __HIP_PLATFORM_NVIDIA__ 1
#endif
#ifndef __HIP_PLATFORM_NVCC__
#define __HIP_PLATFORM_NVCC__ 1
#endif

// Marks this implementation so code (and tests) can tell it from ROCm's own headers.
#define AKAD_HIP_ON_CUDA 1

// The HIP API level these headers follow. Only what CUDA can honour is provided.
#ifndef HIP_VERSION_MAJOR
#define HIP_VERSION_MAJOR 6
#define HIP_VERSION_MINOR 2
#define HIP_VERSION_PATCH 0
#define HIP_VERSION (HIP_VERSION_MAJOR * 10000000 + HIP_VERSION_MINOR * 100000 + HIP_VERSION_PATCH)
#endif

#if defined(__CUDACC__)
#ifndef __HIPCC__
#define __HIPCC__ 1
#endif
#if defined(__CUDA_ARCH__) && !defined(__HIP_DEVICE_COMPILE__)
#define __HIP_DEVICE_COMPILE__ 1
#endif
#define AKAD_HIP_HOST_DEVICE __host__ __device__
#else
#define AKAD_HIP_HOST_DEVICE
#endif
