#pragma once
// One AKA task's config.yaml, validated at the border: every problem names the task, the field
// and what is wrong, and a task with problems is refused alone (the rest of an import goes on).
// The fields and their defaults follow AKA's own evaluator (src/evaluator.py, main.py).

#include <string>
#include <vector>

#include "common/result.h"

namespace akad::aka {

struct PlatformSupport {
  bool present = false;
  std::string status = "active";  // "skip" refuses the task everywhere (AKA's preflight)
  std::string skip_reason;
  std::string required_arch;      // an AMD gfx architecture, e.g. "gfx942"
};

struct AkaTaskConfig {
  std::string task_type;                     // hip2hip | torch2hip | triton2triton | ...
  std::vector<std::string> source_files;     // source_file_path
  std::string target_file;                   // target_file_path; empty when absent
  std::vector<std::string> target_kernel_functions;  // one name each ("a,b" entries are split)
  std::vector<std::string> compile, correctness, performance;  // shell lines run in the task folder
  // AKA's defaults when absent: an hour each (src/evaluator.py, src/performance.py).
  double compile_timeout_s = 3600;
  double correctness_timeout_s = 3600;
  double performance_timeout_s = 3600;
  std::string instructions;                  // prompt.instructions
  std::string harness_path;                  // geak_eval's harness file, empty when absent
  PlatformSupport platform_support;
  std::vector<std::string> notes;            // tolerated oddities AKA also tolerates
};

// `text` is the config.yaml's bytes, `task` its task name for messages.
Result<AkaTaskConfig> parseTaskConfig(const std::string& text, const std::string& task);

}  // namespace akad::aka
