#pragma once
// A run's report (run.report's reply) as akactl prints it: one row per attempt, with AKA's own
// speedup and score beside akad's for imported AgentKernelArena tasks and a mark on speedups
// timed on a GPU the run shared (gpu_share), then the run's figures.

#include <string>

#include <nlohmann/json.hpp>

namespace akad::cli {

std::string reportText(const nlohmann::json& result);

}  // namespace akad::cli
