#include "daemon/gpu_memory.h"

#include <dlfcn.h>

#include <algorithm>

namespace akad {
namespace {

// The few NVML entry points used, with the types of NVML's stable C ABI (nvml.h): status 0 is
// success; handles are opaque pointers; nvmlMemory_t is {total, free, used} in bytes.
using NvmlReturn = int;
using NvmlDevice = void*;
struct NvmlMemory {
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;
};
using InitFn = NvmlReturn (*)();
using ShutdownFn = NvmlReturn (*)();
using ByUuidFn = NvmlReturn (*)(const char*, NvmlDevice*);
using MemoryFn = NvmlReturn (*)(NvmlDevice, NvmlMemory*);
using ErrorStringFn = const char* (*)(NvmlReturn);

const std::vector<std::string> kDefaultLibraries = {
    "libnvidia-ml.so.1",
    "/usr/local/nvidia/lib64/libnvidia-ml.so.1",
    "/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1",
    "/usr/lib64/libnvidia-ml.so.1",
};

class Library {
 public:
  explicit Library(void* handle) : handle_(handle) {}
  ~Library() {
    if (handle_) ::dlclose(handle_);
  }
  Library(const Library&) = delete;
  Library& operator=(const Library&) = delete;
  template <class Fn>
  Fn symbol(const char* name) const {
    return reinterpret_cast<Fn>(::dlsym(handle_, name));
  }
  explicit operator bool() const { return handle_ != nullptr; }

 private:
  void* handle_;
};

}  // namespace

NvmlMemoryReport fillNvidiaMemory(std::vector<gpu::GpuDevice>& gpus, const std::vector<std::string>& libraries) {
  NvmlMemoryReport report;
  auto askable = [](const gpu::GpuDevice& g) { return g.vendor == "nvidia" && !g.uuid.empty(); };
  if (std::none_of(gpus.begin(), gpus.end(), askable)) return report;

  std::string tried;
  void* handle = nullptr;
  for (const std::string& lib : libraries.empty() ? kDefaultLibraries : libraries) {
    handle = ::dlopen(lib.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle) break;
    const char* why = ::dlerror();
    tried += (tried.empty() ? "" : "; ") + std::string(why ? why : lib.c_str());
  }
  Library nvml(handle);
  if (!nvml) {
    report.problem = "NVML not found (" + tried + ")";
    return report;
  }
  auto init = nvml.symbol<InitFn>("nvmlInit_v2");
  auto shutdown = nvml.symbol<ShutdownFn>("nvmlShutdown");
  auto byUuid = nvml.symbol<ByUuidFn>("nvmlDeviceGetHandleByUUID");
  auto memory = nvml.symbol<MemoryFn>("nvmlDeviceGetMemoryInfo");
  auto errorString = nvml.symbol<ErrorStringFn>("nvmlErrorString");
  if (!init || !shutdown || !byUuid || !memory) {
    report.problem = "the NVML library lacks nvmlInit_v2, nvmlShutdown, nvmlDeviceGetHandleByUUID or nvmlDeviceGetMemoryInfo";
    return report;
  }
  auto describe = [&](NvmlReturn r) {
    const char* s = errorString ? errorString(r) : nullptr;
    return (s ? std::string(s) : std::string("error")) + " (" + std::to_string(r) + ")";
  };
  if (NvmlReturn r = init(); r != 0) {
    report.problem = "nvmlInit_v2: " + describe(r);
    return report;
  }
  for (auto& g : gpus) {
    if (!askable(g)) continue;
    NvmlDevice device = nullptr;
    NvmlMemory m{};
    NvmlReturn r = byUuid(g.uuid.c_str(), &device);
    if (r == 0) r = memory(device, &m);
    if (r != 0) {
      report.problem += (report.problem.empty() ? "" : "; ") + g.id + ": " + describe(r);
      continue;
    }
    g.memory_bytes = m.total;
    ++report.filled;
  }
  shutdown();
  return report;
}

}  // namespace akad
