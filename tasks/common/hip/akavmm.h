// akavmm.h - device memory that the trusted driver owns and lends to the worker, shared by file
// descriptor (docs/scoring.md, "Driver and worker").
//
// The driver and the worker run in separate sandboxes with separate pid namespaces, where HIP's
// and CUDA's legacy IPC (hipIpcGetMemHandle) does not work: it names the owner by pid. The
// virtual memory calls do: the driver creates a physical allocation that can be exported as a
// POSIX file descriptor (hipMemCreate, hipMemExportToShareableHandle), passes the descriptor
// over the channel's Unix socket (SCM_RIGHTS), and each side maps the same physical memory into
// an address range of its own (hipMemImportFromShareableHandle, hipMemAddressReserve, hipMemMap,
// hipMemSetAccess). Sizes and the mapping's alignment are multiples of the device's allocation
// granularity. On NVIDIA the hipMem* calls are the cuda-hip image's wrappers of the CUDA
// driver's cuMem*; on AMD they are HIP's own.
//
// What the worker gets is only this allocation: the driver's staging copies of the inputs and
// its copies of the outputs live in ordinary allocations of its own process.
#pragma once

#include "akadevice.h"

#include <cstdint>
#include <unistd.h>

class SharedDeviceMemory {
 public:
  // The driver's side: at least `bytes` of new memory on `device`, exportable as a descriptor.
  static SharedDeviceMemory create(int device, size_t bytes) {
    SharedDeviceMemory m;
    const hipMemAllocationProp prop = properties(device);
    m.size_ = roundUp(bytes ? bytes : 1, granularity(device));
    AKA_HIP_CHECK(hipMemCreate(&m.handle_, m.size_, &prop, 0));
    m.haveHandle_ = true;
    m.map(device);
    return m;
  }

  // The worker's side: the driver's allocation behind `fd` (received over the channel; the
  // caller still owns and closes it), `bytes` long as the driver said.
  static SharedDeviceMemory import(int device, int fd, size_t bytes) {
    SharedDeviceMemory m;
    if (bytes == 0 || bytes % granularity(device) != 0)
      throw std::runtime_error("shared device memory of " + std::to_string(bytes) +
                               " bytes is not a multiple of the allocation granularity");
    m.size_ = bytes;
    AKA_HIP_CHECK(hipMemImportFromShareableHandle(&m.handle_, reinterpret_cast<void*>(static_cast<uintptr_t>(fd)),
                                                  hipMemHandleTypePosixFileDescriptor));
    m.haveHandle_ = true;
    m.map(device);
    return m;
  }

  // A new descriptor for the allocation; the caller sends and closes it.
  int exportFd() const {
    // CUDA writes an int, ROCm may write a pointer-sized value: a zeroed 64-bit word takes both.
    uint64_t raw = 0;
    AKA_HIP_CHECK(hipMemExportToShareableHandle(&raw, handle_, hipMemHandleTypePosixFileDescriptor, 0));
    return static_cast<int>(raw & 0xffffffffu);
  }

  unsigned char* base() const { return static_cast<unsigned char*>(base_); }
  size_t size() const { return size_; }

  SharedDeviceMemory(SharedDeviceMemory&& o) noexcept { swap(o); }
  SharedDeviceMemory& operator=(SharedDeviceMemory&& o) noexcept {
    swap(o);
    return *this;
  }
  SharedDeviceMemory(const SharedDeviceMemory&) = delete;
  SharedDeviceMemory& operator=(const SharedDeviceMemory&) = delete;
  ~SharedDeviceMemory() {
    // Work queued on the memory must finish before it is unmapped.
    if (mapped_) {
      (void)hipDeviceSynchronize();
      (void)hipMemUnmap(base_, size_);
    }
    if (base_) (void)hipMemAddressFree(base_, size_);
    if (haveHandle_) (void)hipMemRelease(handle_);
  }

 private:
  SharedDeviceMemory() = default;

  static hipMemAllocationProp properties(int device) {
    hipMemAllocationProp prop = {};
    prop.type = hipMemAllocationTypePinned;
    prop.requestedHandleType = hipMemHandleTypePosixFileDescriptor;
    prop.location.type = hipMemLocationTypeDevice;
    prop.location.id = device;
    return prop;
  }
  static size_t granularity(int device) {
    const hipMemAllocationProp prop = properties(device);
    size_t g = 0;
    AKA_HIP_CHECK(hipMemGetAllocationGranularity(&g, &prop, hipMemAllocationGranularityRecommended));
    if (g == 0) throw std::runtime_error("the device reports an allocation granularity of 0");
    return g;
  }
  static size_t roundUp(size_t n, size_t a) { return (n + a - 1) / a * a; }

  void map(int device) {
    AKA_HIP_CHECK(hipMemAddressReserve(&base_, size_, granularity(device), nullptr, 0));
    AKA_HIP_CHECK(hipMemMap(base_, size_, 0, handle_, 0));
    mapped_ = true;
    hipMemAccessDesc access = {};
    access.location.type = hipMemLocationTypeDevice;
    access.location.id = device;
    access.flags = hipMemAccessFlagsProtReadWrite;
    AKA_HIP_CHECK(hipMemSetAccess(base_, size_, &access, 1));
  }
  void swap(SharedDeviceMemory& o) noexcept {
    std::swap(handle_, o.handle_);
    std::swap(haveHandle_, o.haveHandle_);
    std::swap(base_, o.base_);
    std::swap(size_, o.size_);
    std::swap(mapped_, o.mapped_);
  }

  hipMemGenericAllocationHandle_t handle_{};
  bool haveHandle_ = false;
  void* base_ = nullptr;
  size_t size_ = 0;
  bool mapped_ = false;
};
