#pragma once
// The scoring's result (docs/scoring.md, "Result"): the gates' verdicts, the headline fields
// (compiled, correct, speedups, score), the first failure's reason, and where the scoring's
// wall time went.

#include <chrono>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace akad {

// What the gates decided, for the headline fields.
struct GateOutcome {
  bool compiled = false;
  bool correct = false, heldOutCorrect = false;
  // Only when the phase was timed against a baseline that could be timed (score.cc, scorePhase).
  std::optional<double> speedup, heldOutSpeedup;
};

// The wall time of every stage of one scoring, from its start to finish().
class StageClock {
 public:
  explicit StageClock(const std::string& first) { stages_.emplace_back(first, Clock::now()); }
  void next(const std::string& stage) { stages_.emplace_back(stage, Clock::now()); }
  // The seconds per stage, as JSON and as a log text (" name=1.2s ...").
  std::pair<nlohmann::json, std::string> finish();

 private:
  using Clock = std::chrono::steady_clock;
  std::vector<std::pair<std::string, Clock::time_point>> stages_;
};

// Adds the gates and the headline fields to `result`; without measured performance the
// speedups and the score are null.
void assembleResult(nlohmann::json& result, const nlohmann::json& gates, const GateOutcome& o, bool measuredPerformance);

// The visible performance gate's speedup interval (stats.h) beside the result's speedup, when
// there is one: how far the speedup stands out from the rounds' noise.
void addSpeedupInterval(nlohmann::json& result, const nlohmann::json& gates);

// The first line of a failed gate's reason that says a GPU ran out of memory (CUDA's, HIP's
// or PyTorch's words for it), as "gate: line"; empty when none does. A run that shares its GPU
// among its attempts scores such an attempt again alone (attempt.cc): the memory may have been
// its neighbours'.
std::string gpuOutOfMemoryLine(const nlohmann::json& result);

// Why a scoring on a shared GPU is made again alone, as "gate: line"; empty when it stands: the
// GPU ran out of memory (gpuOutOfMemoryLine), or the trusted driver crashed (killed by a signal
// nobody sent it, driven_gates.cc). Neither is the candidate's verdict, and both may be its
// neighbours' doing.
std::string sharedGpuRetryReason(const nlohmann::json& result);

}  // namespace akad
