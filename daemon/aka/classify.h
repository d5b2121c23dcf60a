#pragma once
// Static classification of an AKA task for one platform (docs/aka.md, "Classes"): does it run
// unchanged, with akad's compat layer, only after an edit of the task, or not at all here? Only
// the task's files are read; nothing is run. Every decision carries a reason a user can check,
// and the rules follow what was measured with real AKA tasks (issue 25).

#include <string>
#include <vector>

#include "common/result.h"
#include "daemon/aka/config.h"
#include "daemon/aka/trust.h"

namespace akad::aka {

enum class Platform { Nvidia, Amd, Cpu };
Result<Platform> parsePlatform(const std::string& name);
std::string platformName(Platform p);

// In order of severity: a task takes the worst class any rule gives it. Unchanged and Compat
// are imported; the others are refused and listed with their reasons.
enum class TaskClass { Unchanged, Compat, NeedsEdit, Impossible, Invalid };
std::string className(TaskClass c);
bool isRunnable(TaskClass c);

// The compat features a task needs (docs/aka.md and docs/images.md name what each does).
namespace compat {
inline constexpr const char* kHipExtension = "hip-extension";        // .hip through cpp_extension on CUDA PyTorch
inline constexpr const char* kHipToolchain = "hip-on-cuda";          // other HIP sources, through akad's HIP-on-CUDA headers
inline constexpr const char* kRocmTorchHeaders = "rocm-torch-headers";  // c10/hip/..., ATen/hip/... names
inline constexpr const char* kHipblas = "hipblas-on-cublas";
inline constexpr const char* kHipRuntimeMacros = "hip-runtime-macros";  // hip_runtime.h before torch's headers
inline constexpr const char* kTritonAmdOptions = "triton-amd-options";  // waves_per_eu, kpack, matrix_instr_nonkdim
inline constexpr const char* kPerfHelpers = "perf-helpers";             // AKA-GENERATED helper materialisation
// Host code that reads a tensor's device data (x.data_ptr<float>()[0]), which ROCm's mapping of
// device memory allows and CUDA does not: tensors in managed memory.
inline constexpr const char* kHostReadsDeviceMemory = "host-reads-device-memory";
}  // namespace compat

// One file of the task folder as the importer saw it.
struct TaskFile {
  std::string path;           // relative to the task folder
  std::string text;           // the bytes, for source files the rules read (empty otherwise)
  bool scanned = false;       // whether `text` holds the file
  bool symlink = false;
  bool lfs_pointer = false;   // a Git LFS pointer instead of the data
  bool too_large = false;     // over the importer's per-file limit
};

struct Classification {
  TaskClass cls = TaskClass::Unchanged;
  std::vector<std::string> reasons;  // why, one fact per line
  std::vector<std::string> compat;   // compat features needed (sorted, unique)
  void raise(TaskClass c, const std::string& reason);
  void needCompat(const char* feature, const std::string& reason);
};

Classification classifyTask(const std::string& taskName, const AkaTaskConfig& config,
                            const std::vector<TaskFile>& files, Platform platform);

}  // namespace akad::aka
