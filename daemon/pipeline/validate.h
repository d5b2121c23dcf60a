#pragma once
// `akactl tasks validate`: proves a task can tell good from bad through the real scorer.
// The pristine baseline must pass (speedup about 1), the solution must pass and be faster than
// min_speedup, and the output of the `broken` agent must fail to compile.

#include <filesystem>

#include <nlohmann/json.hpp>

#include "common/result.h"
#include "daemon/pipeline/score.h"
#include "daemon/pipeline/task.h"

namespace akad {

Result<nlohmann::json> validateTask(const Task& task, const ScoringEnvironment& env,
                                    const std::filesystem::path& workDir, double minSpeedup);

}  // namespace akad
