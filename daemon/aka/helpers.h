#pragma once
// AKA's timing helpers (docs/aka.md, "Helper materialisation"). AKA keeps them once in
// src/tools/perf/ and fills them into a copy of the task before it runs: the region between the
// AKA-GENERATED markers of a vLLM runner, and the pytest helper module beside a rocmbench test.
// akad does the same in its imported copy, from the user's checkout, at import.

#include <string>

#include "common/result.h"

namespace akad::aka {

inline constexpr const char* kMarkStart = "# >>> AKA-GENERATED:";
inline constexpr const char* kMarkEnd = "# <<< AKA-GENERATED <<<";
inline constexpr const char* kRunnerWithHelpers = "scripts/task_runner.py";
inline constexpr const char* kRocmbenchHelper = "performance_utils_pytest.py";
// In the checkout, relative to its root.
inline constexpr const char* kVllmHelperSource = "src/tools/perf/vllm_cuda_graph_block.py";
inline constexpr const char* kRocmbenchHelperSource = "src/tools/perf/performance_utils_pytest.py";

// The runner with its marked region replaced by the helper source's functions (from its first
// `def _measure_cuda_event_fallback(` on, as AKA takes them). The marker lines stay.
Result<std::string> fillHelperRegion(const std::string& runner, const std::string& helperSource);

}  // namespace akad::aka
