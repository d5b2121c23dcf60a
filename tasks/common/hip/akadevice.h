// akadevice.h - the device side of the hip harness: tensors in GPU memory, as the runner hands
// them to a task's harness/invoke.hip (in `runner serve`, views into the memory the driver
// shares with it; see akavmm.h).
//
//   TensorSet akaAllocateOutputs(const Config&, const TensorSet& in);
//       the output tensors (names, dtypes, shapes) for these inputs; the driver allocates them
//       on the device, fills them with 0xff bytes (NaN) and copies them out after the call
//   void akaInvoke(const Config&, const DeviceSet& in, DeviceSet& out);
//       launches the candidate's kernel(s); may return before they finish (the runner
//       synchronises the whole device after every call, before it tells the driver it is done)
#pragma once

#include "akaharness.h"

#include <hip/hip_runtime.h>

#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

// Throws with the call's text and HIP's error string; used for every runtime call.
#define AKA_HIP_CHECK(call)                                                                       \
  do {                                                                                            \
    hipError_t akaErr_ = (call);                                                                  \
    if (akaErr_ != hipSuccess)                                                                    \
      throw std::runtime_error(std::string(#call) + " failed: " + hipGetErrorString(akaErr_) +   \
                               " (" + __FILE__ + ":" + std::to_string(__LINE__) + ")");          \
  } while (0)

// One tensor in device memory; owned by the DeviceSet that holds it.
struct DeviceTensor {
  std::string name;
  DType dtype = DType::F32;
  std::vector<uint64_t> dims;
  void* ptr = nullptr;
  size_t bytes = 0;

  uint64_t elements() const {
    uint64_t n = 1;
    for (uint64_t d : dims) n *= d;
    return n;
  }
  // Typed device pointer; T must have the dtype's element size (uint16_t/__half for f16/bf16).
  template <class T> T* data() const {
    if (sizeof(T) != akt::dtypeSize(dtype))
      throw akt::Error("tensor '" + name + "' has dtype " + akt::dtypeName(dtype) + ", accessed with a " +
                       std::to_string(sizeof(T)) + "-byte type");
    return static_cast<T*>(ptr);
  }
  void require(DType wantDtype, const std::vector<uint64_t>& wantDims) const {
    requireShape(name, dtype, dims, wantDtype, wantDims);
  }
};

// Device tensors with the names, dtypes and shapes of a host TensorSet; frees them on
// destruction, unless they are views of memory that another owner frees (the worker's view of
// the driver's shared allocation). Move-only: a copy would double-free.
class DeviceSet {
 public:
  DeviceSet() = default;
  // Views at `ptrs` (one per tensor of `like`) into memory this set does not own.
  static DeviceSet views(const TensorSet& like, const std::vector<void*>& ptrs) {
    if (ptrs.size() != like.tensors.size()) throw akt::Error("views: one pointer per tensor is needed");
    DeviceSet s;
    s.owned_ = false;
    for (size_t i = 0; i < ptrs.size(); ++i) {
      const Tensor& t = like.tensors[i];
      s.tensors_.push_back(DeviceTensor{t.name, t.dtype, t.dims, ptrs[i], t.bytes.size()});
    }
    return s;
  }
  explicit DeviceSet(const TensorSet& like) {
    for (const Tensor& t : like.tensors) {
      DeviceTensor d{t.name, t.dtype, t.dims, nullptr, t.bytes.size()};
      // 256-byte aligned (hipMalloc's guarantee), at least one byte so every pointer is valid.
      AKA_HIP_CHECK(hipMalloc(&d.ptr, d.bytes ? d.bytes : 1));
      tensors_.push_back(d);
    }
  }
  DeviceSet(DeviceSet&& o) noexcept : tensors_(std::exchange(o.tensors_, {})), owned_(o.owned_) {}
  DeviceSet& operator=(DeviceSet&& o) noexcept {
    std::swap(tensors_, o.tensors_);
    std::swap(owned_, o.owned_);
    return *this;
  }
  DeviceSet(const DeviceSet&) = delete;
  DeviceSet& operator=(const DeviceSet&) = delete;
  ~DeviceSet() {
    if (owned_)
      for (DeviceTensor& t : tensors_) (void)hipFree(t.ptr);
  }

  const DeviceTensor& at(const std::string& name) const {
    for (const DeviceTensor& t : tensors_) if (t.name == name) return t;
    throw akt::Error("no device tensor named '" + name + "'");
  }
  const std::vector<DeviceTensor>& tensors() const { return tensors_; }
  size_t size() const { return tensors_.size(); }

 private:
  std::vector<DeviceTensor> tensors_;
  bool owned_ = true;
};

TensorSet akaAllocateOutputs(const Config& config, const TensorSet& in);
void akaInvoke(const Config& config, const DeviceSet& in, DeviceSet& out);
