#pragma once
// HIP runtime API (host side) mapped onto the CUDA runtime, so HIP sources build with nvcc on
// NVIDIA hosts. Usable from nvcc and from a plain host compiler (add -I<cuda>/include, link
// -lcudart). Handles (streams, events) and error codes *are* the CUDA ones: hipError_t is
// cudaError_t, so a HIP error can be handed to CUDA code and back without conversion.
//
// Written for akad from the public HIP API documentation; it does not use ROCm's hipamd
// NVIDIA headers, which no longer build against CUDA 13.

#include "hip/hip_common.h"

#include <cuda.h>  // driver API types for the virtual memory calls (no -lcuda needed)
#include <cuda_runtime_api.h>
#include <driver_types.h>
#include <vector_types.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

// ---------------------------------------------------------------------------------------------
// Errors

typedef cudaError_t hipError_t;

inline constexpr hipError_t hipSuccess = cudaSuccess;
inline constexpr hipError_t hipErrorInvalidValue = cudaErrorInvalidValue;
inline constexpr hipError_t hipErrorOutOfMemory = cudaErrorMemoryAllocation;
inline constexpr hipError_t hipErrorMemoryAllocation = cudaErrorMemoryAllocation;
inline constexpr hipError_t hipErrorNotInitialized = cudaErrorInitializationError;
inline constexpr hipError_t hipErrorInitializationError = cudaErrorInitializationError;
inline constexpr hipError_t hipErrorDeinitialized = cudaErrorCudartUnloading;
inline constexpr hipError_t hipErrorInvalidConfiguration = cudaErrorInvalidConfiguration;
inline constexpr hipError_t hipErrorInvalidPitchValue = cudaErrorInvalidPitchValue;
inline constexpr hipError_t hipErrorInvalidSymbol = cudaErrorInvalidSymbol;
inline constexpr hipError_t hipErrorInvalidDevicePointer = cudaErrorInvalidDevicePointer;
inline constexpr hipError_t hipErrorInvalidMemcpyDirection = cudaErrorInvalidMemcpyDirection;
inline constexpr hipError_t hipErrorInsufficientDriver = cudaErrorInsufficientDriver;
inline constexpr hipError_t hipErrorMissingConfiguration = cudaErrorMissingConfiguration;
inline constexpr hipError_t hipErrorPriorLaunchFailure = cudaErrorPriorLaunchFailure;
inline constexpr hipError_t hipErrorInvalidDeviceFunction = cudaErrorInvalidDeviceFunction;
inline constexpr hipError_t hipErrorNoDevice = cudaErrorNoDevice;
inline constexpr hipError_t hipErrorInvalidDevice = cudaErrorInvalidDevice;
inline constexpr hipError_t hipErrorInvalidImage = cudaErrorInvalidKernelImage;
inline constexpr hipError_t hipErrorInvalidContext = cudaErrorDeviceUninitialized;
inline constexpr hipError_t hipErrorNoBinaryForGpu = cudaErrorNoKernelImageForDevice;
inline constexpr hipError_t hipErrorInvalidKernelFile = cudaErrorInvalidPtx;
inline constexpr hipError_t hipErrorInvalidHandle = cudaErrorInvalidResourceHandle;
inline constexpr hipError_t hipErrorInvalidResourceHandle = cudaErrorInvalidResourceHandle;
inline constexpr hipError_t hipErrorIllegalState = cudaErrorIllegalState;
inline constexpr hipError_t hipErrorNotFound = cudaErrorSymbolNotFound;
inline constexpr hipError_t hipErrorNotReady = cudaErrorNotReady;
inline constexpr hipError_t hipErrorIllegalAddress = cudaErrorIllegalAddress;
inline constexpr hipError_t hipErrorLaunchOutOfResources = cudaErrorLaunchOutOfResources;
inline constexpr hipError_t hipErrorLaunchTimeOut = cudaErrorLaunchTimeout;
inline constexpr hipError_t hipErrorLaunchFailure = cudaErrorLaunchFailure;
inline constexpr hipError_t hipErrorPeerAccessAlreadyEnabled = cudaErrorPeerAccessAlreadyEnabled;
inline constexpr hipError_t hipErrorPeerAccessNotEnabled = cudaErrorPeerAccessNotEnabled;
inline constexpr hipError_t hipErrorPeerAccessUnsupported = cudaErrorPeerAccessUnsupported;
inline constexpr hipError_t hipErrorSetOnActiveProcess = cudaErrorSetOnActiveProcess;
inline constexpr hipError_t hipErrorContextIsDestroyed = cudaErrorContextIsDestroyed;
inline constexpr hipError_t hipErrorAssert = cudaErrorAssert;
inline constexpr hipError_t hipErrorHostMemoryAlreadyRegistered = cudaErrorHostMemoryAlreadyRegistered;
inline constexpr hipError_t hipErrorHostMemoryNotRegistered = cudaErrorHostMemoryNotRegistered;
inline constexpr hipError_t hipErrorCooperativeLaunchTooLarge = cudaErrorCooperativeLaunchTooLarge;
inline constexpr hipError_t hipErrorNotSupported = cudaErrorNotSupported;
inline constexpr hipError_t hipErrorFileNotFound = cudaErrorFileNotFound;
inline constexpr hipError_t hipErrorSharedObjectInitFailed = cudaErrorSharedObjectInitFailed;
inline constexpr hipError_t hipErrorOperatingSystem = cudaErrorOperatingSystem;
inline constexpr hipError_t hipErrorUnknown = cudaErrorUnknown;

inline const char* hipGetErrorString(hipError_t e) { return cudaGetErrorString(e); }
inline const char* hipGetErrorName(hipError_t e) { return cudaGetErrorName(e); }
inline hipError_t hipGetLastError() { return cudaGetLastError(); }
inline hipError_t hipPeekAtLastError() { return cudaPeekAtLastError(); }

// ---------------------------------------------------------------------------------------------
// Devices

typedef cudaStream_t hipStream_t;
typedef cudaEvent_t hipEvent_t;
typedef void* hipDeviceptr_t;

inline hipError_t hipGetDeviceCount(int* count) { return cudaGetDeviceCount(count); }
inline hipError_t hipSetDevice(int device) { return cudaSetDevice(device); }
inline hipError_t hipGetDevice(int* device) { return cudaGetDevice(device); }
inline hipError_t hipDeviceSynchronize() { return cudaDeviceSynchronize(); }
inline hipError_t hipDeviceReset() { return cudaDeviceReset(); }
inline hipError_t hipDriverGetVersion(int* v) { return cudaDriverGetVersion(v); }
inline hipError_t hipRuntimeGetVersion(int* v) { return cudaRuntimeGetVersion(v); }
inline hipError_t hipDeviceGetPCIBusId(char* bus, int len, int device) {
  return cudaDeviceGetPCIBusId(bus, len, device);
}
inline hipError_t hipDeviceGetByPCIBusId(int* device, const char* bus) {
  return cudaDeviceGetByPCIBusId(device, bus);
}
inline hipError_t hipDeviceCanAccessPeer(int* can, int device, int peer) {
  return cudaDeviceCanAccessPeer(can, device, peer);
}
inline hipError_t hipDeviceEnablePeerAccess(int peer, unsigned int flags) {
  return cudaDeviceEnablePeerAccess(peer, flags);
}
inline hipError_t hipDeviceDisablePeerAccess(int peer) { return cudaDeviceDisablePeerAccess(peer); }
inline hipError_t hipDeviceGetStreamPriorityRange(int* least, int* greatest) {
  return cudaDeviceGetStreamPriorityRange(least, greatest);
}

// HIP's attribute numbering differs from CUDA's, so this is its own enum, translated per call.
typedef enum hipDeviceAttribute_t {
  hipDeviceAttributeMaxThreadsPerBlock,
  hipDeviceAttributeMaxBlockDimX,
  hipDeviceAttributeMaxBlockDimY,
  hipDeviceAttributeMaxBlockDimZ,
  hipDeviceAttributeMaxGridDimX,
  hipDeviceAttributeMaxGridDimY,
  hipDeviceAttributeMaxGridDimZ,
  hipDeviceAttributeMaxSharedMemoryPerBlock,
  hipDeviceAttributeSharedMemPerBlockOptin,
  hipDeviceAttributeTotalConstantMemory,
  hipDeviceAttributeWarpSize,
  hipDeviceAttributeMaxRegistersPerBlock,
  hipDeviceAttributeMaxRegistersPerMultiprocessor,
  hipDeviceAttributeClockRate,
  hipDeviceAttributeMemoryClockRate,
  hipDeviceAttributeMemoryBusWidth,
  hipDeviceAttributeMultiprocessorCount,
  hipDeviceAttributeComputeCapabilityMajor,
  hipDeviceAttributeComputeCapabilityMinor,
  hipDeviceAttributeL2CacheSize,
  hipDeviceAttributeMaxThreadsPerMultiProcessor,
  hipDeviceAttributeMaxBlocksPerMultiProcessor,
  hipDeviceAttributeMaxSharedMemoryPerMultiprocessor,
  hipDeviceAttributeComputeMode,
  hipDeviceAttributeConcurrentKernels,
  hipDeviceAttributePciBusId,
  hipDeviceAttributePciDeviceId,
  hipDeviceAttributePciDomainID,
  hipDeviceAttributeIntegrated,
  hipDeviceAttributeCanMapHostMemory,
  hipDeviceAttributeCooperativeLaunch,
  hipDeviceAttributeManagedMemory,
  hipDeviceAttributeConcurrentManagedAccess,
  hipDeviceAttributePageableMemoryAccess,
  hipDeviceAttributeUnifiedAddressing,
  hipDeviceAttributeEccEnabled,
  hipDeviceAttributeAsyncEngineCount,
  hipDeviceAttributeStreamPrioritiesSupported,
  hipDeviceAttributeIsMultiGpuBoard,
  hipDeviceAttributeMaxPitch,
  hipDeviceAttributeWallClockRate,  // kHz of wall_clock64(); %globaltimer counts nanoseconds
} hipDeviceAttribute_t;

namespace akad_hip {
// Returns false for attributes CUDA has no counterpart for.
inline bool toCudaAttribute(hipDeviceAttribute_t a, cudaDeviceAttr* out) {
  switch (a) {
    case hipDeviceAttributeMaxThreadsPerBlock: *out = cudaDevAttrMaxThreadsPerBlock; return true;
    case hipDeviceAttributeMaxBlockDimX: *out = cudaDevAttrMaxBlockDimX; return true;
    case hipDeviceAttributeMaxBlockDimY: *out = cudaDevAttrMaxBlockDimY; return true;
    case hipDeviceAttributeMaxBlockDimZ: *out = cudaDevAttrMaxBlockDimZ; return true;
    case hipDeviceAttributeMaxGridDimX: *out = cudaDevAttrMaxGridDimX; return true;
    case hipDeviceAttributeMaxGridDimY: *out = cudaDevAttrMaxGridDimY; return true;
    case hipDeviceAttributeMaxGridDimZ: *out = cudaDevAttrMaxGridDimZ; return true;
    case hipDeviceAttributeMaxSharedMemoryPerBlock: *out = cudaDevAttrMaxSharedMemoryPerBlock; return true;
    case hipDeviceAttributeSharedMemPerBlockOptin: *out = cudaDevAttrMaxSharedMemoryPerBlockOptin; return true;
    case hipDeviceAttributeTotalConstantMemory: *out = cudaDevAttrTotalConstantMemory; return true;
    case hipDeviceAttributeWarpSize: *out = cudaDevAttrWarpSize; return true;
    case hipDeviceAttributeMaxRegistersPerBlock: *out = cudaDevAttrMaxRegistersPerBlock; return true;
    case hipDeviceAttributeMaxRegistersPerMultiprocessor: *out = cudaDevAttrMaxRegistersPerMultiprocessor; return true;
    case hipDeviceAttributeClockRate: *out = cudaDevAttrClockRate; return true;
    case hipDeviceAttributeMemoryClockRate: *out = cudaDevAttrMemoryClockRate; return true;
    case hipDeviceAttributeMemoryBusWidth: *out = cudaDevAttrGlobalMemoryBusWidth; return true;
    case hipDeviceAttributeMultiprocessorCount: *out = cudaDevAttrMultiProcessorCount; return true;
    case hipDeviceAttributeComputeCapabilityMajor: *out = cudaDevAttrComputeCapabilityMajor; return true;
    case hipDeviceAttributeComputeCapabilityMinor: *out = cudaDevAttrComputeCapabilityMinor; return true;
    case hipDeviceAttributeL2CacheSize: *out = cudaDevAttrL2CacheSize; return true;
    case hipDeviceAttributeMaxThreadsPerMultiProcessor: *out = cudaDevAttrMaxThreadsPerMultiProcessor; return true;
    case hipDeviceAttributeMaxBlocksPerMultiProcessor: *out = cudaDevAttrMaxBlocksPerMultiprocessor; return true;
    case hipDeviceAttributeMaxSharedMemoryPerMultiprocessor: *out = cudaDevAttrMaxSharedMemoryPerMultiprocessor; return true;
    case hipDeviceAttributeComputeMode: *out = cudaDevAttrComputeMode; return true;
    case hipDeviceAttributeConcurrentKernels: *out = cudaDevAttrConcurrentKernels; return true;
    case hipDeviceAttributePciBusId: *out = cudaDevAttrPciBusId; return true;
    case hipDeviceAttributePciDeviceId: *out = cudaDevAttrPciDeviceId; return true;
    case hipDeviceAttributePciDomainID: *out = cudaDevAttrPciDomainId; return true;
    case hipDeviceAttributeIntegrated: *out = cudaDevAttrIntegrated; return true;
    case hipDeviceAttributeCanMapHostMemory: *out = cudaDevAttrCanMapHostMemory; return true;
    case hipDeviceAttributeCooperativeLaunch: *out = cudaDevAttrCooperativeLaunch; return true;
    case hipDeviceAttributeManagedMemory: *out = cudaDevAttrManagedMemory; return true;
    case hipDeviceAttributeConcurrentManagedAccess: *out = cudaDevAttrConcurrentManagedAccess; return true;
    case hipDeviceAttributePageableMemoryAccess: *out = cudaDevAttrPageableMemoryAccess; return true;
    case hipDeviceAttributeUnifiedAddressing: *out = cudaDevAttrUnifiedAddressing; return true;
    case hipDeviceAttributeEccEnabled: *out = cudaDevAttrEccEnabled; return true;
    case hipDeviceAttributeAsyncEngineCount: *out = cudaDevAttrAsyncEngineCount; return true;
    case hipDeviceAttributeStreamPrioritiesSupported: *out = cudaDevAttrStreamPrioritiesSupported; return true;
    case hipDeviceAttributeIsMultiGpuBoard: *out = cudaDevAttrIsMultiGpuBoard; return true;
    case hipDeviceAttributeMaxPitch: *out = cudaDevAttrMaxPitch; return true;
    default: return false;
  }
}
}  // namespace akad_hip

inline hipError_t hipDeviceGetAttribute(int* value, hipDeviceAttribute_t attr, int device) {
  if (value == nullptr) return hipErrorInvalidValue;
  if (attr == hipDeviceAttributeWallClockRate) {
    int count = 0;
    hipError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess) return e;
    if (device < 0 || device >= count) return hipErrorInvalidDevice;
    *value = 1000000;  // %globaltimer ticks in nanoseconds: 1e6 kHz
    return hipSuccess;
  }
  cudaDeviceAttr cudaAttr;
  if (!akad_hip::toCudaAttribute(attr, &cudaAttr)) return hipErrorInvalidValue;
  return cudaDeviceGetAttribute(value, cudaAttr, device);
}

inline hipError_t hipDeviceComputeCapability(int* major, int* minor, int device) {
  hipError_t e = cudaDeviceGetAttribute(major, cudaDevAttrComputeCapabilityMajor, device);
  if (e != cudaSuccess) return e;
  return cudaDeviceGetAttribute(minor, cudaDevAttrComputeCapabilityMinor, device);
}

inline hipError_t hipDeviceTotalMem(size_t* bytes, int device) {
  cudaDeviceProp p;
  hipError_t e = cudaGetDeviceProperties(&p, device);
  if (e == cudaSuccess) *bytes = p.totalGlobalMem;
  return e;
}

// The fields HIP code commonly reads, with HIP's names. CUDA 13 dropped clockRate,
// memoryClockRate and computeMode from cudaDeviceProp; they are read as device attributes.
typedef struct hipDeviceProp_t {
  char name[256];
  cudaUUID_t uuid;
  size_t totalGlobalMem;
  size_t sharedMemPerBlock;
  int regsPerBlock;
  int warpSize;
  size_t memPitch;
  int maxThreadsPerBlock;
  int maxThreadsDim[3];
  int maxGridSize[3];
  int clockRate;  // kHz
  size_t totalConstMem;
  int major;
  int minor;
  int multiProcessorCount;
  int l2CacheSize;
  int persistingL2CacheMaxSize;
  int maxThreadsPerMultiProcessor;
  int maxBlocksPerMultiProcessor;
  int computeMode;
  int concurrentKernels;
  int pciDomainID;
  int pciBusID;
  int pciDeviceID;
  int memoryClockRate;  // kHz
  int memoryBusWidth;   // bits
  size_t sharedMemPerMultiprocessor;
  size_t maxSharedMemoryPerMultiProcessor;  // HIP's name for the same value
  size_t sharedMemPerBlockOptin;
  int regsPerMultiprocessor;
  int integrated;
  int canMapHostMemory;
  int managedMemory;
  int concurrentManagedAccess;
  int pageableMemoryAccess;
  int unifiedAddressing;
  int cooperativeLaunch;
  int cooperativeMultiDeviceLaunch;  // always 0: CUDA 13 removed multi-device launch
  int ECCEnabled;
  int asyncEngineCount;
  int isMultiGpuBoard;
  int clockInstructionRate;  // kHz; NVIDIA has no separate instruction clock, so = clockRate
  int isLargeBar;
  int asicRevision;
  char gcnArchName[256];  // "sm_<major><minor>", the NVIDIA counterpart of "gfx942"
} hipDeviceProp_t;

inline hipError_t hipGetDeviceProperties(hipDeviceProp_t* prop, int device) {
  if (prop == nullptr) return hipErrorInvalidValue;
  cudaDeviceProp c;
  hipError_t e = cudaGetDeviceProperties(&c, device);
  if (e != cudaSuccess) return e;
  std::memset(prop, 0, sizeof(*prop));
  std::memcpy(prop->name, c.name, sizeof(prop->name));
  prop->name[sizeof(prop->name) - 1] = '\0';
  prop->uuid = c.uuid;
  prop->totalGlobalMem = c.totalGlobalMem;
  prop->sharedMemPerBlock = c.sharedMemPerBlock;
  prop->regsPerBlock = c.regsPerBlock;
  prop->warpSize = c.warpSize;
  prop->memPitch = c.memPitch;
  prop->maxThreadsPerBlock = c.maxThreadsPerBlock;
  for (int i = 0; i < 3; ++i) {
    prop->maxThreadsDim[i] = c.maxThreadsDim[i];
    prop->maxGridSize[i] = c.maxGridSize[i];
  }
  prop->totalConstMem = c.totalConstMem;
  prop->major = c.major;
  prop->minor = c.minor;
  prop->multiProcessorCount = c.multiProcessorCount;
  prop->l2CacheSize = c.l2CacheSize;
  prop->persistingL2CacheMaxSize = c.persistingL2CacheMaxSize;
  prop->maxThreadsPerMultiProcessor = c.maxThreadsPerMultiProcessor;
  prop->maxBlocksPerMultiProcessor = c.maxBlocksPerMultiProcessor;
  prop->concurrentKernels = c.concurrentKernels;
  prop->pciDomainID = c.pciDomainID;
  prop->pciBusID = c.pciBusID;
  prop->pciDeviceID = c.pciDeviceID;
  prop->memoryBusWidth = c.memoryBusWidth;
  prop->sharedMemPerMultiprocessor = c.sharedMemPerMultiprocessor;
  prop->maxSharedMemoryPerMultiProcessor = c.sharedMemPerMultiprocessor;
  prop->sharedMemPerBlockOptin = c.sharedMemPerBlockOptin;
  prop->regsPerMultiprocessor = c.regsPerMultiprocessor;
  prop->integrated = c.integrated;
  prop->canMapHostMemory = c.canMapHostMemory;
  prop->managedMemory = c.managedMemory;
  prop->concurrentManagedAccess = c.concurrentManagedAccess;
  prop->pageableMemoryAccess = c.pageableMemoryAccess;
  prop->unifiedAddressing = c.unifiedAddressing;
  prop->cooperativeLaunch = c.cooperativeLaunch;
  prop->ECCEnabled = c.ECCEnabled;
  prop->asyncEngineCount = c.asyncEngineCount;
  prop->isMultiGpuBoard = c.isMultiGpuBoard;
  if ((e = cudaDeviceGetAttribute(&prop->clockRate, cudaDevAttrClockRate, device)) != cudaSuccess) return e;
  if ((e = cudaDeviceGetAttribute(&prop->memoryClockRate, cudaDevAttrMemoryClockRate, device)) != cudaSuccess) return e;
  if ((e = cudaDeviceGetAttribute(&prop->computeMode, cudaDevAttrComputeMode, device)) != cudaSuccess) return e;
  prop->clockInstructionRate = prop->clockRate;
  std::snprintf(prop->gcnArchName, sizeof(prop->gcnArchName), "sm_%d%d", c.major, c.minor);
  return hipSuccess;
}

// ---------------------------------------------------------------------------------------------
// Memory

typedef cudaMemcpyKind hipMemcpyKind;
inline constexpr hipMemcpyKind hipMemcpyHostToHost = cudaMemcpyHostToHost;
inline constexpr hipMemcpyKind hipMemcpyHostToDevice = cudaMemcpyHostToDevice;
inline constexpr hipMemcpyKind hipMemcpyDeviceToHost = cudaMemcpyDeviceToHost;
inline constexpr hipMemcpyKind hipMemcpyDeviceToDevice = cudaMemcpyDeviceToDevice;
inline constexpr hipMemcpyKind hipMemcpyDefault = cudaMemcpyDefault;

// hipHostMalloc flags. The first four share CUDA's cudaHostAlloc values; AMD's coherence and
// NUMA hints have no CUDA meaning and are dropped.
#define hipHostMallocDefault 0x0u
#define hipHostMallocPortable 0x1u
#define hipHostMallocMapped 0x2u
#define hipHostMallocWriteCombined 0x4u
#define hipHostMallocNumaUser 0x20000000u
#define hipHostMallocCoherent 0x40000000u
#define hipHostMallocNonCoherent 0x80000000u
#define hipHostRegisterDefault 0x0u
#define hipHostRegisterPortable 0x1u
#define hipHostRegisterMapped 0x2u
#define hipMemAttachGlobal 0x1u
#define hipMemAttachHost 0x2u

namespace akad_hip {
inline unsigned int hostAllocFlags(unsigned int hipFlags) {
  return hipFlags & (hipHostMallocPortable | hipHostMallocMapped | hipHostMallocWriteCombined);
}
}  // namespace akad_hip

inline hipError_t hipMalloc(void** ptr, size_t bytes) { return cudaMalloc(ptr, bytes); }
template <class T>
inline hipError_t hipMalloc(T** ptr, size_t bytes) {
  return cudaMalloc(reinterpret_cast<void**>(ptr), bytes);
}
inline hipError_t hipFree(void* ptr) { return cudaFree(ptr); }
inline hipError_t hipMallocPitch(void** ptr, size_t* pitch, size_t width, size_t height) {
  return cudaMallocPitch(ptr, pitch, width, height);
}
inline hipError_t hipMallocManaged(void** ptr, size_t bytes, unsigned int flags = hipMemAttachGlobal) {
  return cudaMallocManaged(ptr, bytes, flags);
}
template <class T>
inline hipError_t hipMallocManaged(T** ptr, size_t bytes, unsigned int flags = hipMemAttachGlobal) {
  return cudaMallocManaged(reinterpret_cast<void**>(ptr), bytes, flags);
}
inline hipError_t hipMallocAsync(void** ptr, size_t bytes, hipStream_t stream) {
  return cudaMallocAsync(ptr, bytes, stream);
}
template <class T>
inline hipError_t hipMallocAsync(T** ptr, size_t bytes, hipStream_t stream) {
  return cudaMallocAsync(reinterpret_cast<void**>(ptr), bytes, stream);
}
inline hipError_t hipFreeAsync(void* ptr, hipStream_t stream) { return cudaFreeAsync(ptr, stream); }

inline hipError_t hipHostMalloc(void** ptr, size_t bytes, unsigned int flags = hipHostMallocDefault) {
  return cudaHostAlloc(ptr, bytes, akad_hip::hostAllocFlags(flags));
}
template <class T>
inline hipError_t hipHostMalloc(T** ptr, size_t bytes, unsigned int flags = hipHostMallocDefault) {
  return cudaHostAlloc(reinterpret_cast<void**>(ptr), bytes, akad_hip::hostAllocFlags(flags));
}
inline hipError_t hipHostAlloc(void** ptr, size_t bytes, unsigned int flags = hipHostMallocDefault) {
  return cudaHostAlloc(ptr, bytes, akad_hip::hostAllocFlags(flags));
}
inline hipError_t hipExtHostAlloc(void** ptr, size_t bytes, unsigned int flags = hipHostMallocDefault) {
  return cudaHostAlloc(ptr, bytes, akad_hip::hostAllocFlags(flags));
}
inline hipError_t hipMallocHost(void** ptr, size_t bytes) { return cudaMallocHost(ptr, bytes); }
inline hipError_t hipHostFree(void* ptr) { return cudaFreeHost(ptr); }
inline hipError_t hipFreeHost(void* ptr) { return cudaFreeHost(ptr); }
inline hipError_t hipHostRegister(void* ptr, size_t bytes, unsigned int flags) {
  return cudaHostRegister(ptr, bytes, flags);
}
inline hipError_t hipHostUnregister(void* ptr) { return cudaHostUnregister(ptr); }
inline hipError_t hipHostGetDevicePointer(void** devPtr, void* hostPtr, unsigned int flags) {
  return cudaHostGetDevicePointer(devPtr, hostPtr, flags);
}
inline hipError_t hipMemGetInfo(size_t* freeBytes, size_t* totalBytes) {
  return cudaMemGetInfo(freeBytes, totalBytes);
}

inline hipError_t hipMemcpy(void* dst, const void* src, size_t bytes, hipMemcpyKind kind) {
  return cudaMemcpy(dst, src, bytes, kind);
}
inline hipError_t hipMemcpyAsync(void* dst, const void* src, size_t bytes, hipMemcpyKind kind,
                                 hipStream_t stream = nullptr) {
  return cudaMemcpyAsync(dst, src, bytes, kind, stream);
}
inline hipError_t hipMemcpyHtoD(hipDeviceptr_t dst, const void* src, size_t bytes) {
  return cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice);
}
inline hipError_t hipMemcpyDtoH(void* dst, hipDeviceptr_t src, size_t bytes) {
  return cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost);
}
inline hipError_t hipMemcpyDtoD(hipDeviceptr_t dst, hipDeviceptr_t src, size_t bytes) {
  return cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToDevice);
}
inline hipError_t hipMemcpyHtoDAsync(hipDeviceptr_t dst, const void* src, size_t bytes, hipStream_t s) {
  return cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, s);
}
inline hipError_t hipMemcpyDtoHAsync(void* dst, hipDeviceptr_t src, size_t bytes, hipStream_t s) {
  return cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, s);
}
inline hipError_t hipMemcpyDtoDAsync(hipDeviceptr_t dst, hipDeviceptr_t src, size_t bytes, hipStream_t s) {
  return cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, s);
}
inline hipError_t hipMemcpy2D(void* dst, size_t dpitch, const void* src, size_t spitch, size_t width,
                              size_t height, hipMemcpyKind kind) {
  return cudaMemcpy2D(dst, dpitch, src, spitch, width, height, kind);
}
inline hipError_t hipMemcpy2DAsync(void* dst, size_t dpitch, const void* src, size_t spitch,
                                   size_t width, size_t height, hipMemcpyKind kind,
                                   hipStream_t stream = nullptr) {
  return cudaMemcpy2DAsync(dst, dpitch, src, spitch, width, height, kind, stream);
}
inline hipError_t hipMemcpyPeer(void* dst, int dstDevice, const void* src, int srcDevice, size_t bytes) {
  return cudaMemcpyPeer(dst, dstDevice, src, srcDevice, bytes);
}

// Symbols: pass HIP_SYMBOL(var) (the variable's address, as on AMD) or an array's name.
#define HIP_SYMBOL(X) (reinterpret_cast<const void*>(&(X)))
inline hipError_t hipMemcpyToSymbol(const void* symbol, const void* src, size_t bytes,
                                    size_t offset = 0, hipMemcpyKind kind = hipMemcpyHostToDevice) {
  return cudaMemcpyToSymbol(symbol, src, bytes, offset, kind);
}
inline hipError_t hipMemcpyFromSymbol(void* dst, const void* symbol, size_t bytes,
                                      size_t offset = 0, hipMemcpyKind kind = hipMemcpyDeviceToHost) {
  return cudaMemcpyFromSymbol(dst, symbol, bytes, offset, kind);
}
inline hipError_t hipMemcpyToSymbolAsync(const void* symbol, const void* src, size_t bytes,
                                         size_t offset, hipMemcpyKind kind, hipStream_t stream = nullptr) {
  return cudaMemcpyToSymbolAsync(symbol, src, bytes, offset, kind, stream);
}
inline hipError_t hipMemcpyFromSymbolAsync(void* dst, const void* symbol, size_t bytes, size_t offset,
                                           hipMemcpyKind kind, hipStream_t stream = nullptr) {
  return cudaMemcpyFromSymbolAsync(dst, symbol, bytes, offset, kind, stream);
}
inline hipError_t hipGetSymbolAddress(void** devPtr, const void* symbol) {
  return cudaGetSymbolAddress(devPtr, symbol);
}
inline hipError_t hipGetSymbolSize(size_t* bytes, const void* symbol) {
  return cudaGetSymbolSize(bytes, symbol);
}

inline hipError_t hipMemset(void* dst, int value, size_t bytes) { return cudaMemset(dst, value, bytes); }
inline hipError_t hipMemsetAsync(void* dst, int value, size_t bytes, hipStream_t stream = nullptr) {
  return cudaMemsetAsync(dst, value, bytes, stream);
}
inline hipError_t hipMemset2D(void* dst, size_t pitch, int value, size_t width, size_t height) {
  return cudaMemset2D(dst, pitch, value, width, height);
}

// ---------------------------------------------------------------------------------------------
// Virtual memory management: physical allocations mapped into reserved address ranges, and
// shared between processes as POSIX file descriptors (hipMemCreate, hipMemExportToShareableHandle,
// hipMemImportFromShareableHandle, hipMemMap...). Unlike hipIpcGetMemHandle, a descriptor passed
// over a Unix socket works across pid namespaces.
//
// CUDA has these only in its driver API (cuMem*). They are looked up at run time through the
// runtime's entry-point query, so programs still link with the CUDA runtime alone (no -lcuda),
// as every other call here. The driver's CUresult codes share their numbers with the runtime's
// cudaError_t for every error these calls return (invalid value, out of memory, not supported,
// not permitted, invalid handle, operating system...), so they are passed through unchanged.

typedef CUmemGenericAllocationHandle hipMemGenericAllocationHandle_t;  // AMD: an opaque pointer
typedef enum hipMemAllocationType {
  hipMemAllocationTypeInvalid = 0,
  hipMemAllocationTypePinned = 1,
} hipMemAllocationType;
typedef enum hipMemAllocationHandleType {
  hipMemHandleTypeNone = 0,
  hipMemHandleTypePosixFileDescriptor = 1,
  hipMemHandleTypeWin32 = 2,
  hipMemHandleTypeWin32Kmt = 4,
  hipMemHandleTypeFabric = 8,
} hipMemAllocationHandleType;
typedef enum hipMemLocationType {
  hipMemLocationTypeInvalid = 0,
  hipMemLocationTypeDevice = 1,
} hipMemLocationType;
typedef enum hipMemAccessFlags {
  hipMemAccessFlagsProtNone = 0,
  hipMemAccessFlagsProtRead = 1,
  hipMemAccessFlagsProtReadWrite = 3,
} hipMemAccessFlags;
typedef enum hipMemAllocationGranularity_flags {
  hipMemAllocationGranularityMinimum = 0,
  hipMemAllocationGranularityRecommended = 1,
} hipMemAllocationGranularity_flags;
typedef struct hipMemLocation {
  hipMemLocationType type;
  int id;
} hipMemLocation;
typedef struct hipMemAllocationProp {
  hipMemAllocationType type;
  union {  // ROCm 6 spells it without the s, ROCm 7 and CUDA with it
    hipMemAllocationHandleType requestedHandleType;
    hipMemAllocationHandleType requestedHandleTypes;
  };
  hipMemLocation location;
  void* win32HandleMetaData;
  struct {
    unsigned char compressionType;
    unsigned char gpuDirectRDMACapable;
    unsigned short usage;
  } allocFlags;
} hipMemAllocationProp;
typedef struct hipMemAccessDesc {
  hipMemLocation location;
  hipMemAccessFlags flags;
} hipMemAccessDesc;

namespace akad_hip {
// The driver's function `symbol` (its CUDA 12.0 form) into *fn; the runtime's error when there is
// no usable driver, hipErrorNotSupported when the driver lacks the function.
template <class F>
inline hipError_t driverEntry(const char* symbol, F* fn) {
  void* p = nullptr;
  cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
  const cudaError_t e = cudaGetDriverEntryPointByVersion(symbol, &p, 12000, cudaEnableDefault, &found);
  if (e != cudaSuccess) return e;
  if (found != cudaDriverEntryPointSuccess || p == nullptr) return hipErrorNotSupported;
  *fn = reinterpret_cast<F>(p);
  return hipSuccess;
}
inline CUmemLocation toCu(const hipMemLocation& l) {
  CUmemLocation c;
  std::memset(&c, 0, sizeof c);
  c.type = static_cast<CUmemLocationType>(l.type);
  c.id = l.id;
  return c;
}
inline CUmemAllocationProp toCu(const hipMemAllocationProp& p) {
  CUmemAllocationProp c;
  std::memset(&c, 0, sizeof c);
  c.type = static_cast<CUmemAllocationType>(p.type);
  c.requestedHandleTypes = static_cast<CUmemAllocationHandleType>(p.requestedHandleTypes);
  c.location = toCu(p.location);
  c.win32HandleMetaData = p.win32HandleMetaData;
  c.allocFlags.compressionType = p.allocFlags.compressionType;
  c.allocFlags.gpuDirectRDMACapable = p.allocFlags.gpuDirectRDMACapable;
  c.allocFlags.usage = p.allocFlags.usage;
  return c;
}
inline CUdeviceptr devicePtr(const void* p) { return static_cast<CUdeviceptr>(reinterpret_cast<uintptr_t>(p)); }
}  // namespace akad_hip

// Calls the driver's `name`, looked up once per call site.
#define AKAD_HIP_DRIVER_CALL(name, ...)                                                       \
  do {                                                                                        \
    static decltype(&::name) akadFn_ = nullptr;                                               \
    static const hipError_t akadLookup_ = akad_hip::driverEntry(#name, &akadFn_);             \
    if (akadLookup_ != hipSuccess) return akadLookup_;                                        \
    return static_cast<hipError_t>(akadFn_(__VA_ARGS__));                                     \
  } while (0)

inline hipError_t hipMemGetAllocationGranularity(size_t* granularity, const hipMemAllocationProp* prop,
                                                 hipMemAllocationGranularity_flags option) {
  if (prop == nullptr) return hipErrorInvalidValue;
  const CUmemAllocationProp c = akad_hip::toCu(*prop);
  AKAD_HIP_DRIVER_CALL(cuMemGetAllocationGranularity, granularity, &c,
                       static_cast<CUmemAllocationGranularity_flags>(option));
}
inline hipError_t hipMemCreate(hipMemGenericAllocationHandle_t* handle, size_t size,
                               const hipMemAllocationProp* prop, unsigned long long flags) {
  if (prop == nullptr) return hipErrorInvalidValue;
  const CUmemAllocationProp c = akad_hip::toCu(*prop);
  AKAD_HIP_DRIVER_CALL(cuMemCreate, handle, size, &c, flags);
}
inline hipError_t hipMemRelease(hipMemGenericAllocationHandle_t handle) {
  AKAD_HIP_DRIVER_CALL(cuMemRelease, handle);
}
// For hipMemHandleTypePosixFileDescriptor, *shareableHandle receives an int.
inline hipError_t hipMemExportToShareableHandle(void* shareableHandle, hipMemGenericAllocationHandle_t handle,
                                                hipMemAllocationHandleType handleType, unsigned long long flags) {
  AKAD_HIP_DRIVER_CALL(cuMemExportToShareableHandle, shareableHandle, handle,
                       static_cast<CUmemAllocationHandleType>(handleType), flags);
}
// For hipMemHandleTypePosixFileDescriptor, osHandle is the descriptor itself:
// reinterpret_cast<void*>(static_cast<uintptr_t>(fd)), as on AMD.
inline hipError_t hipMemImportFromShareableHandle(hipMemGenericAllocationHandle_t* handle, void* osHandle,
                                                  hipMemAllocationHandleType handleType) {
  AKAD_HIP_DRIVER_CALL(cuMemImportFromShareableHandle, handle, osHandle,
                       static_cast<CUmemAllocationHandleType>(handleType));
}
inline hipError_t hipMemAddressReserve(void** ptr, size_t size, size_t alignment, void* addr,
                                       unsigned long long flags) {
  if (ptr == nullptr) return hipErrorInvalidValue;
  static decltype(&::cuMemAddressReserve) fn = nullptr;
  static const hipError_t lookup = akad_hip::driverEntry("cuMemAddressReserve", &fn);
  if (lookup != hipSuccess) return lookup;
  CUdeviceptr p = 0;
  const CUresult r = fn(&p, size, alignment, akad_hip::devicePtr(addr), flags);
  *ptr = reinterpret_cast<void*>(static_cast<uintptr_t>(p));
  return static_cast<hipError_t>(r);
}
inline hipError_t hipMemAddressFree(void* ptr, size_t size) {
  AKAD_HIP_DRIVER_CALL(cuMemAddressFree, akad_hip::devicePtr(ptr), size);
}
inline hipError_t hipMemMap(void* ptr, size_t size, size_t offset, hipMemGenericAllocationHandle_t handle,
                            unsigned long long flags) {
  AKAD_HIP_DRIVER_CALL(cuMemMap, akad_hip::devicePtr(ptr), size, offset, handle, flags);
}
inline hipError_t hipMemUnmap(void* ptr, size_t size) {
  AKAD_HIP_DRIVER_CALL(cuMemUnmap, akad_hip::devicePtr(ptr), size);
}
inline hipError_t hipMemSetAccess(void* ptr, size_t size, const hipMemAccessDesc* desc, size_t count) {
  if (desc == nullptr && count > 0) return hipErrorInvalidValue;
  std::vector<CUmemAccessDesc> c(count);
  for (size_t i = 0; i < count; ++i) {
    c[i].location = akad_hip::toCu(desc[i].location);
    c[i].flags = static_cast<CUmemAccess_flags>(desc[i].flags);
  }
  AKAD_HIP_DRIVER_CALL(cuMemSetAccess, akad_hip::devicePtr(ptr), size, c.data(), count);
}

// ---------------------------------------------------------------------------------------------
// Streams and events

#define hipStreamDefault cudaStreamDefault
#define hipStreamNonBlocking cudaStreamNonBlocking
#define hipStreamPerThread cudaStreamPerThread
#define hipEventDefault cudaEventDefault
#define hipEventBlockingSync cudaEventBlockingSync
#define hipEventDisableTiming cudaEventDisableTiming
#define hipEventInterprocess cudaEventInterprocess

inline hipError_t hipStreamCreate(hipStream_t* stream) { return cudaStreamCreate(stream); }
inline hipError_t hipStreamCreateWithFlags(hipStream_t* stream, unsigned int flags) {
  return cudaStreamCreateWithFlags(stream, flags);
}
inline hipError_t hipStreamCreateWithPriority(hipStream_t* stream, unsigned int flags, int priority) {
  return cudaStreamCreateWithPriority(stream, flags, priority);
}
inline hipError_t hipStreamDestroy(hipStream_t stream) { return cudaStreamDestroy(stream); }
inline hipError_t hipStreamSynchronize(hipStream_t stream) { return cudaStreamSynchronize(stream); }
inline hipError_t hipStreamQuery(hipStream_t stream) { return cudaStreamQuery(stream); }
inline hipError_t hipStreamWaitEvent(hipStream_t stream, hipEvent_t event, unsigned int flags = 0) {
  return cudaStreamWaitEvent(stream, event, flags);
}
inline hipError_t hipStreamGetFlags(hipStream_t stream, unsigned int* flags) {
  return cudaStreamGetFlags(stream, flags);
}
inline hipError_t hipStreamGetPriority(hipStream_t stream, int* priority) {
  return cudaStreamGetPriority(stream, priority);
}
typedef cudaHostFn_t hipHostFn_t;
inline hipError_t hipLaunchHostFunc(hipStream_t stream, hipHostFn_t fn, void* userData) {
  return cudaLaunchHostFunc(stream, fn, userData);
}

inline hipError_t hipEventCreate(hipEvent_t* event) { return cudaEventCreate(event); }
inline hipError_t hipEventCreateWithFlags(hipEvent_t* event, unsigned int flags) {
  return cudaEventCreateWithFlags(event, flags);
}
inline hipError_t hipEventRecord(hipEvent_t event, hipStream_t stream = nullptr) {
  return cudaEventRecord(event, stream);
}
inline hipError_t hipEventSynchronize(hipEvent_t event) { return cudaEventSynchronize(event); }
inline hipError_t hipEventQuery(hipEvent_t event) { return cudaEventQuery(event); }
inline hipError_t hipEventElapsedTime(float* ms, hipEvent_t start, hipEvent_t stop) {
  return cudaEventElapsedTime(ms, start, stop);
}
inline hipError_t hipEventDestroy(hipEvent_t event) { return cudaEventDestroy(event); }

// ---------------------------------------------------------------------------------------------
// Kernels (launch by pointer, attributes, occupancy)

typedef struct cudaFuncAttributes hipFuncAttributes;
typedef cudaFuncAttribute hipFuncAttribute;
inline constexpr hipFuncAttribute hipFuncAttributeMaxDynamicSharedMemorySize =
    cudaFuncAttributeMaxDynamicSharedMemorySize;
inline constexpr hipFuncAttribute hipFuncAttributePreferredSharedMemoryCarveout =
    cudaFuncAttributePreferredSharedMemoryCarveout;
typedef cudaFuncCache hipFuncCache_t;
inline constexpr hipFuncCache_t hipFuncCachePreferNone = cudaFuncCachePreferNone;
inline constexpr hipFuncCache_t hipFuncCachePreferShared = cudaFuncCachePreferShared;
inline constexpr hipFuncCache_t hipFuncCachePreferL1 = cudaFuncCachePreferL1;
inline constexpr hipFuncCache_t hipFuncCachePreferEqual = cudaFuncCachePreferEqual;

inline hipError_t hipLaunchKernel(const void* func, dim3 grid, dim3 block, void** args,
                                  size_t sharedBytes = 0, hipStream_t stream = nullptr) {
  return cudaLaunchKernel(func, grid, block, args, sharedBytes, stream);
}
inline hipError_t hipLaunchCooperativeKernel(const void* func, dim3 grid, dim3 block, void** args,
                                             unsigned int sharedBytes, hipStream_t stream) {
  return cudaLaunchCooperativeKernel(func, grid, block, args, sharedBytes, stream);
}
inline hipError_t hipFuncGetAttributes(hipFuncAttributes* attr, const void* func) {
  return cudaFuncGetAttributes(attr, func);
}
inline hipError_t hipFuncSetAttribute(const void* func, hipFuncAttribute attr, int value) {
  return cudaFuncSetAttribute(func, attr, value);
}
inline hipError_t hipFuncSetCacheConfig(const void* func, hipFuncCache_t config) {
  return cudaFuncSetCacheConfig(func, config);
}
inline hipError_t hipOccupancyMaxActiveBlocksPerMultiprocessor(int* blocks, const void* func,
                                                               int blockSize, size_t dynSharedBytes) {
  return cudaOccupancyMaxActiveBlocksPerMultiprocessor(blocks, func, blockSize, dynSharedBytes);
}
// Kernel pointers of any signature, as HIP accepts them.
template <class R, class... A>
inline hipError_t hipLaunchKernel(R (*func)(A...), dim3 grid, dim3 block, void** args,
                                  size_t sharedBytes = 0, hipStream_t stream = nullptr) {
  return cudaLaunchKernel(reinterpret_cast<const void*>(func), grid, block, args, sharedBytes, stream);
}
template <class R, class... A>
inline hipError_t hipFuncGetAttributes(hipFuncAttributes* attr, R (*func)(A...)) {
  return cudaFuncGetAttributes(attr, reinterpret_cast<const void*>(func));
}
template <class R, class... A>
inline hipError_t hipFuncSetAttribute(R (*func)(A...), hipFuncAttribute attr, int value) {
  return cudaFuncSetAttribute(reinterpret_cast<const void*>(func), attr, value);
}
template <class R, class... A>
inline hipError_t hipOccupancyMaxActiveBlocksPerMultiprocessor(int* blocks, R (*func)(A...),
                                                               int blockSize, size_t dynSharedBytes) {
  return cudaOccupancyMaxActiveBlocksPerMultiprocessor(blocks, reinterpret_cast<const void*>(func),
                                                       blockSize, dynSharedBytes);
}
