#pragma once
// The gates (docs/scoring.md): correctness and performance of one phase, as a single runner
// process checked by akacheck (gates.cc), or as a trusted driver and the candidate's worker
// (driven_gates.cc); and the reference's generation of every case's inputs and expected
// outputs before them (gates.cc).

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/result.h"
#include "daemon/pipeline/gate_runner.h"

namespace akad {

// A gate's verdict: {"pass": ..., "reason": ...}.
nlohmann::json gate(bool pass, const std::string& reason);
// A performance gate failed by the trusted baseline's run, not the candidate's: "baseline
// failed (task problem): why", marked `baseline_failed`. A held-out phase so failed leaves the
// candidate's held-out correctness standing, without a held-out speedup (score.cc).
// What begins the reason of a gate that the pristine baseline failed.
inline constexpr std::string_view kBaselineFailedPrefix = "baseline failed (task problem): ";
nlohmann::json baselineFailed(const std::string& why);
// The first failed case of akacheck's verdict, "name: reason".
std::string firstFailure(const nlohmann::json& verdict);
// Folds akacheck's verdict on a correctness run into the gate's result: its cases, and a failed
// gate ("wrong output: ...") when any case is wrong.
void applyVerdict(nlohmann::json& result, const nlohmann::json& verdict);

// The phase's cases: per configuration, correctness seeds and timed input sets.
Phase makePhase(const std::string& name, const std::vector<nlohmann::json>& configs, const TaskTiming& timing,
                const std::function<uint64_t()>& seed);

// Runs the trusted reference once for every case of both phases, then splits its output:
// inputs per phase (what runners may see), expected outputs (what only the checker sees).
Status generateData(const GateRunner& g, const std::filesystem::path& trustedDir, const std::vector<Phase>& phases);

// Correctness on one phase: the candidate writes outputs, the checker judges them.
nlohmann::json correctnessGate(const GateRunner& g, const std::filesystem::path& candidateDir, const Phase& p);
// Performance on one phase against the trusted baseline (ABBA order).
nlohmann::json performanceGate(const GateRunner& g, const std::filesystem::path& baselineDir,
                               const std::filesystem::path& candidateDir, const Phase& p);

// The same as a trusted driver and the candidate's worker (usesDriver()); `who` "baseline"
// runs the pristine program of trustedDir instead, as the baseline's uid.
nlohmann::json drivenCorrectnessGate(const GateRunner& g, const std::filesystem::path& trustedDir,
                                     const std::filesystem::path& candidateDir, const Phase& p,
                                     const std::string& who = "candidate");
nlohmann::json drivenPerformanceGate(const GateRunner& g, const std::filesystem::path& trustedDir,
                                     const std::filesystem::path& candidateDir, const Phase& p);
// The driver's performance plan for the baseline's or the candidate's worker.
nlohmann::json drivenPerfPlan(const Phase& p, const TaskTiming& t, bool baseline);

}  // namespace akad
