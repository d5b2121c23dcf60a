#include "daemon/aka/classify.h"

#include "daemon/aka/helpers.h"

#include <algorithm>
#include <map>
#include <regex>
#include <set>

namespace akad::aka {
namespace {

bool isPython(const TaskFile& f) { return f.path.ends_with(".py"); }
bool isNativeSource(const TaskFile& f) {
  for (const char* ext : {".hip", ".cpp", ".cc", ".cu", ".cuh", ".h", ".hpp", ".c", ".inc"})
    if (f.path.ends_with(ext)) return true;
  return false;
}

// The ROCm-PyTorch header names the compat layer maps onto CUDA PyTorch's (issue 25 measured
// the first three in the gpumode tasks; hip2hip/others/assign_score_withk's build on the H200
// stopped at the fourth, a hipified name under ATen/cuda/).
const std::set<std::string>& shimmedHeaders() {
  static const std::set<std::string> s = {"c10/hip/HIPStream.h", "ATen/hip/HIPContext.h",
                                          "ATen/hip/impl/HIPStreamMasqueradingAsCUDA.h", "ATen/cuda/HIPContext.h"};
  return s;
}

// The script a command line runs: the first operand of python/python3/pytest/bash/sh, if it is
// a file path (not -c/-m code, not an option).
std::string scriptOf(const std::string& command) {
  std::vector<std::string> words;
  std::string w;
  for (char c : command) {
    if (c == ' ' || c == '\t' || c == '\n') {
      if (!w.empty()) words.push_back(w);
      w.clear();
    } else {
      w += c;
    }
  }
  if (!w.empty()) words.push_back(w);
  static const std::regex runner(R"((python3?(\.\d+)?|pytest|bash|sh))");
  for (std::size_t i = 0; i < words.size(); ++i) {
    if (!std::regex_match(words[i], runner)) continue;
    for (std::size_t j = i + 1; j < words.size(); ++j) {
      const std::string& a = words[j];
      if (a == "-c" || a == "-m") return {};
      if (a.empty() || a[0] == '-') continue;
      if (a.ends_with(".py") || a.ends_with(".sh")) return a;
      return {};
    }
    return {};
  }
  return {};
}

std::string firstLineWith(const std::string& text, const std::string& needle) {
  const std::size_t at = text.find(needle);
  if (at == std::string::npos) return {};
  return std::to_string(std::count(text.begin(), text.begin() + static_cast<long>(at), '\n') + 1);
}

}  // namespace

Result<Platform> parsePlatform(const std::string& name) {
  if (name == "nvidia") return Platform::Nvidia;
  if (name == "amd") return Platform::Amd;
  if (name == "cpu") return Platform::Cpu;
  return Error{"unknown platform '" + name + "' (nvidia, amd or cpu)"};
}

std::string platformName(Platform p) {
  switch (p) {
    case Platform::Nvidia: return "nvidia";
    case Platform::Amd: return "amd";
    case Platform::Cpu: return "cpu";
  }
  return "cpu";
}

std::string className(TaskClass c) {
  switch (c) {
    case TaskClass::Unchanged: return "unchanged";
    case TaskClass::Compat: return "compat";
    case TaskClass::NeedsEdit: return "needs-edit";
    case TaskClass::Impossible: return "impossible";
    case TaskClass::Invalid: return "invalid";
  }
  return "invalid";
}

bool isRunnable(TaskClass c) { return c == TaskClass::Unchanged || c == TaskClass::Compat; }

void Classification::raise(TaskClass c, const std::string& reason) {
  if (static_cast<int>(c) > static_cast<int>(cls)) cls = c;
  if (std::find(reasons.begin(), reasons.end(), reason) == reasons.end()) reasons.push_back(reason);
}

void Classification::needCompat(const char* feature, const std::string& reason) {
  raise(TaskClass::Compat, reason);
  if (std::find(compat.begin(), compat.end(), feature) == compat.end()) {
    compat.push_back(feature);
    std::sort(compat.begin(), compat.end());
  }
}

namespace {

using FilesByPath = std::map<std::string, const TaskFile*>;

// What the config names must be there: these are config errors, not platform facts. Then the
// trust mapping, whose spliced functions must each have one top-level definition.
void checkConfigAgainstFiles(Classification& k, const AkaTaskConfig& c, Family family, const FilesByPath& byPath) {
  for (const auto& f : c.source_files)
    if (!byPath.count(f)) k.raise(TaskClass::Invalid, "source_file_path '" + f + "' is not a file of the task folder");
  if (!c.target_file.empty() && !byPath.count(c.target_file))
    k.raise(TaskClass::Invalid, "target_file_path '" + c.target_file + "' is not a file of the task folder");
  if (!c.harness_path.empty() && !byPath.count(c.harness_path))
    k.raise(TaskClass::Invalid, "harness_path '" + c.harness_path + "' is not a file of the task folder");
  auto mapping = trustMappingFor(family, c);
  if (family == Family::Other) {
    k.raise(TaskClass::Impossible, "task_type '" + c.task_type +
                                       "' is not one akad imports (hip2hip, torch2hip, triton2triton)");
  } else if (!mapping) {
    k.raise(TaskClass::Invalid, mapping.error().message);
  } else if (!mapping->splice_functions.empty()) {
    for (const auto& file : mapping->editable) {
      auto it = byPath.find(file);
      if (it == byPath.end() || !it->second->scanned) continue;
      for (const auto& fn : mapping->splice_functions) {
        auto span = findTopLevelDef(it->second->text, fn);
        if (!span) k.raise(TaskClass::NeedsEdit, file + ": " + span.error().message + "; the scorer could not tell which to take");
        else if (!*span)
          k.raise(TaskClass::NeedsEdit, file + " has no top-level definition of target kernel function '" + fn + "'");
      }
    }
  }
}

// No GPU at all; then AKA's own preflight (main.py should_run_task_for_platform) and the
// config's notes.
void checkPlatform(Classification& k, const AkaTaskConfig& c, Platform platform) {
  if (platform == Platform::Cpu) k.raise(TaskClass::Impossible, "every AKA task needs a GPU, and this platform has none");
  const PlatformSupport& ps = c.platform_support;
  if (ps.present && ps.status == "skip")
    k.raise(TaskClass::Impossible, "platform_support.status is skip" + (ps.skip_reason.empty() ? "" : ": " + ps.skip_reason));
  if (!ps.required_arch.empty()) {
    if (platform == Platform::Nvidia)
      k.raise(TaskClass::Impossible, "platform_support.required_arch is " + ps.required_arch + ", an AMD GPU architecture");
    else if (platform == Platform::Amd)
      k.reasons.push_back("runs only on " + ps.required_arch + " (platform_support.required_arch, checked when it runs)");
  }
  for (const auto& note : c.notes) k.reasons.push_back(note);
}

// Sandboxes have no network: a command that fetches something fails in them; and a script a
// command runs must be in the task folder.
void checkCommands(Classification& k, const AkaTaskConfig& c, const FilesByPath& byPath) {
  static const std::regex fetches(R"(\b(pip3?\s+install|git\s+clone|wget|curl|conda\s+install|apt(-get)?\s+install)\b)");
  for (const auto* list : {&c.compile, &c.correctness, &c.performance})
    for (const auto& cmd : *list) {
      std::smatch m;
      if (std::regex_search(cmd, m, fetches))
        k.raise(TaskClass::NeedsEdit, "a command runs '" + m.str() + "', and sandboxes have no network: " + cmd);
      const std::string script = scriptOf(cmd);
      if (!script.empty() && !byPath.count(script))
        k.raise(TaskClass::NeedsEdit, "a command runs " + script + ", which is not a file of the task folder: " + cmd);
    }
}

// AKA's timing helpers: AKA fills them before a task runs (src/perf_helper_materialization.py);
// the importer does the same in its copy, from the checkout's src/tools/perf/. And aiter, AMD's
// kernel library for ROCm (geak_eval's mla_decode imports it in its harness and failed its
// baseline on the H200 with "No module named 'aiter'").
void checkHelpersAndLibraries(Classification& k, const TaskFile& f, bool nvidia) {
  static const std::regex aiter(R"((^|\n)[ \t]*(import|from)[ \t]+aiter\b)");
  if (f.path == kRunnerWithHelpers) {
    const bool start = f.text.find(kMarkStart) != std::string::npos;
    const bool end = f.text.find(kMarkEnd) != std::string::npos;
    if (start && end)
      k.needCompat(compat::kPerfHelpers, f.path + " has an AKA-GENERATED helper region, filled at import from the checkout's src/tools/perf/");
    else if (start || end)
      k.raise(TaskClass::NeedsEdit, f.path + " has an AKA-GENERATED start or end marker without the other");
    else if (f.text.find("def _benchmark_cuda_graph_or_events") != std::string::npos)
      k.raise(TaskClass::NeedsEdit, f.path + " defines AKA's timing helpers without the AKA-GENERATED markers around them");
  }
  if (isPython(f) && f.path.find('/') == std::string::npos &&
      (f.path == kRocmbenchHelper || f.text.find("performance_utils_pytest") != std::string::npos))
    k.needCompat(compat::kPerfHelpers, "uses AKA's pytest timing helper, written at import from the checkout's src/tools/perf/" +
                                           std::string(kRocmbenchHelper));
  if (isPython(f) && std::regex_search(f.text, aiter)) {
    if (nvidia) k.raise(TaskClass::Impossible, f.path + " imports aiter, AMD's ROCm kernel library, which NVIDIA hosts lack");
    else k.reasons.push_back(f.path + " imports aiter (AMD's ROCm kernel library; the image must provide it)");
  }
}

// A Triton source: AMD's FP8 types and AMD-only options.
void checkTritonSource(Classification& k, const TaskFile& f, bool nvidia) {
  static const std::regex amdOption(R"(\b(waves_per_eu|kpack|matrix_instr_nonkdim)\b)");
  static const std::regex fnuz(R"(\bfloat8_e[45]m[23]fnuz\b)");
  std::smatch m;
  if (std::regex_search(f.text, m, fnuz)) {
    if (nvidia)
      k.raise(TaskClass::Impossible, f.path + ":" + firstLineWith(f.text, m.str()) + " uses " + m.str() +
                                         ", an MI300 FP8 type that Triton's CUDA backend cannot convert");
    else
      k.reasons.push_back(f.path + " uses " + m.str() + " (an AMD FP8 type)");
  }
  // A harness that exits unless the GPU is an AMD architecture it names (geak_eval's MXFP4
  // tasks: "MXFP4 not supported on this architecture", seen on the H200).
  static const std::regex archGate(R"(\barch\s*(==|in)\s*[\(\[]?\s*["'](gfx[0-9a-f]+))");
  static const std::regex refusal(R"(not supported on this architecture[^\n]*\n\s*sys\.exit\(\s*[1-9])");
  if (nvidia && f.text.find("get_current_target().arch") != std::string::npos && std::regex_search(f.text, m, archGate)) {
    const std::string arch = m.str(2);
    if (std::regex_search(f.text, refusal))
      k.raise(TaskClass::Impossible, f.path + " exits unless the GPU is the AMD architecture " + arch +
                                         " (get_current_target().arch)");
  }
  if (nvidia && std::regex_search(f.text, m, amdOption))
    k.needCompat(compat::kTritonAmdOptions, f.path + ":" + firstLineWith(f.text, m.str()) + " passes the AMD-only Triton option " +
                                                m.str() + ", which akad drops on NVIDIA (recorded in the result)");
}

// A HIP or C++ source on an NVIDIA host: ROCm-PyTorch headers, hipBLAS, the include order of
// hip_runtime.h and AMD GPU builtins.
void checkHipSourceOnNvidia(Classification& k, const TaskFile& f) {
  static const std::regex rocmHeader(R"(#\s*include\s*[<"]((?:c10|ATen)/hip/[^>"]+|ATen/cuda/HIP[^>"]+)[>"])");
  static const std::regex hipblas(R"((#\s*include\s*[<"]hipblas|\bhipblas[A-Z]\w*\s*\())");
  static const std::regex hipRuntime(R"(#\s*include\s*[<"]hip/hip_runtime\.h[>"])");
  static const std::regex torchHeader(R"(#\s*include\s*[<"](torch/|ATen/)[^>"]*[>"])");
  for (std::sregex_iterator it(f.text.begin(), f.text.end(), rocmHeader), e; it != e; ++it) {
    const std::string header = (*it)[1];
    if (shimmedHeaders().count(header))
      k.needCompat(compat::kRocmTorchHeaders, f.path + " includes the ROCm-PyTorch header " + header + ", shimmed onto CUDA PyTorch's");
    else
      k.raise(TaskClass::NeedsEdit, f.path + " includes the ROCm-PyTorch header " + header + ", for which akad has no shim");
  }
  std::smatch m;
  if (std::regex_search(f.text, m, hipblas))
    k.needCompat(compat::kHipblas, f.path + " calls hipBLAS, mapped onto cuBLAS");
  std::smatch hr, th;
  if (std::regex_search(f.text, hr, hipRuntime) && std::regex_search(f.text, th, torchHeader) &&
      hr.position(0) < th.position(0))
    k.needCompat(compat::kHipRuntimeMacros, f.path + " includes hip/hip_runtime.h before torch's headers");
  // A subscript or dereference of data_ptr<T>() reads the tensor's memory on the host: AKA's
  // tensors are on the GPU, whose memory ROCm maps for the host and CUDA does not.
  static const std::regex hostRead(R"(data_ptr\s*<[^<>;]*>\s*\(\s*\)\s*\[|\*\s*[A-Za-z_][\w.]*\.data_ptr\s*<)");
  if (std::regex_search(f.text, m, hostRead))
    k.needCompat(compat::kHostReadsDeviceMemory, f.path + ":" + firstLineWith(f.text, m.str()) +
                                                     " reads a tensor's data on the host (" + m.str() +
                                                     "), which CUDA allows only for managed memory");
  if (f.text.find("__builtin_amdgcn_") != std::string::npos)
    k.raise(TaskClass::NeedsEdit, f.path + " calls AMD GPU builtins (__builtin_amdgcn_*), which have no CUDA counterpart");
}

// Every file of the task: what akad does not import, then each scanned file's contents by its
// family; finally how .hip sources are built on NVIDIA.
void checkFiles(Classification& k, const std::vector<TaskFile>& files, Family family, bool nvidia) {
  bool hasHip = false, usesCppExtension = false;
  for (const auto& f : files) {
    if (f.symlink) k.raise(TaskClass::NeedsEdit, f.path + " is a symlink; akad imports regular files only");
    if (f.lfs_pointer) k.raise(TaskClass::NeedsEdit, f.path + " is a Git LFS pointer, not its data (run git lfs pull in the checkout)");
    if (f.too_large) k.raise(TaskClass::NeedsEdit, f.path + " is larger than akad imports");
    if (f.path.ends_with(".hip")) hasHip = true;
    if (!f.scanned) continue;
    if (isPython(f) && f.text.find("cpp_extension") != std::string::npos) usesCppExtension = true;
    checkHelpersAndLibraries(k, f, nvidia);
    if (family == Family::Triton || family == Family::TritonRocmbench) {
      if (isPython(f)) checkTritonSource(k, f, nvidia);
      continue;
    }
    if ((family == Family::Hip2Hip || family == Family::Torch2Hip) && isNativeSource(f) && nvidia)
      checkHipSourceOnNvidia(k, f);
  }
  if (hasHip && nvidia && (family == Family::Hip2Hip || family == Family::Torch2Hip)) {
    if (usesCppExtension)
      k.needCompat(compat::kHipExtension, ".hip sources built by torch.utils.cpp_extension, which a CUDA build of PyTorch "
                                          "does not treat as device code");
    else
      k.needCompat(compat::kHipToolchain, ".hip sources, built with akad's HIP-on-CUDA headers and hipcc");
  }
}

}  // namespace

Classification classifyTask(const std::string& name, const AkaTaskConfig& c, const std::vector<TaskFile>& files,
                            Platform platform) {
  Classification k;
  const Family family = familyOf(name, c);
  FilesByPath byPath;
  for (const auto& f : files) byPath[f.path] = &f;
  checkConfigAgainstFiles(k, c, family, byPath);
  checkPlatform(k, c, platform);
  checkCommands(k, c, byPath);
  checkFiles(k, files, family, platform == Platform::Nvidia);
  if (k.reasons.empty() || k.cls == TaskClass::Unchanged)
    k.reasons.insert(k.reasons.begin(), "no rule found anything this platform lacks");
  return k;
}

}  // namespace akad::aka
