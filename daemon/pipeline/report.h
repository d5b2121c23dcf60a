#pragma once
// Run-level report: the benchmark's figures over every attempt of a run. Failed or crashed
// attempts count as failures in every denominator.

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace akad {

struct AttemptOutcome {
  std::string attempt_id;
  std::string task_id;
  std::string state;       // scored | failed | cancelled | interrupted | queued | running
  nlohmann::json result;   // the scorer's result, null if the attempt never got one
  std::string error;
};

nlohmann::json runReport(const std::vector<AttemptOutcome>& attempts);
// One row per attempt: attempt,task,state,compiled,correct,speedup,held_out_correct,held_out_speedup,score,failure
std::string runReportCsv(const std::vector<AttemptOutcome>& attempts);

}  // namespace akad
