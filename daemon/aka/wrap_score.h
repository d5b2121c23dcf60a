#pragma once
// Wrap mode (docs/aka.md, "Scoring"): an imported AKA task is scored by AKA's own compile,
// correctness and performance commands, run in akad's sandboxes on a scoring workspace rebuilt
// from the pristine import plus only the agent's editable files (trust.h). Performance runs the
// pristine baseline and the candidate in alternating (ABBA) rounds on the same leased GPU, and
// every harness process gets fresh seeds: its torch.manual_seed(s) is re-mapped with a secret
// salt drawn per scoring. Results carry "mode": "wrap", akad's speedup and AKA's own beside it.
//
// What wrap mode cannot close: the candidate still runs in AKA's evaluator process, so it can
// patch the timer or read the salt there; the times are AKA's harness's, with the outside wall
// clock of each run recorded as a second opinion. convert mode (not built) closes that.

#include <filesystem>
#include <optional>

#include <nlohmann/json.hpp>

#include "common/result.h"
#include "daemon/aka/held_out.h"
#include "daemon/aka/trust.h"
#include "daemon/pipeline/score.h"
#include "daemon/pipeline/task.h"

namespace akad::aka {

// What the wrap scorer reads of an imported task (its aka.json).
struct WrapSpec {
  std::string name;
  std::string family;
  std::string task_type;
  TrustMapping mapping;
  std::vector<std::string> compile, correctness, performance;
  std::string platform;  // the platform it was imported for ("nvidia", "amd")
  std::string cls;       // its class there ("unchanged", "compat")
  std::vector<std::string> compat;
  std::vector<std::string> materialised;
  std::vector<Injection> held_out;  // AKA's held-out shapes, applied to the scorer's copies only
  // Without them: shapes from akad's rules for the runner's TEST_SHAPES or a pytest parametrize
  // list (held_out_rules.h), candidates until the pristine baseline has passed them.
  struct Generated {
    std::string file;
    bool scalars = false;
    std::string old_code, prefix;  // a parametrize list: the decorator, and its text up to `[`
    std::vector<std::vector<std::int64_t>> shapes;
    std::vector<std::string> rules;
  } generated;
};
Result<WrapSpec> loadWrapSpec(const Task& task);
// The injection that writes `shapes` where the generated shapes' visible list is.
Injection generatedInjection(const WrapSpec& spec, const std::vector<std::vector<std::int64_t>>& shapes);

// One test case's time from AKA's report formats (src/testcases.py): `side` "baseline" reads
// torch2hip's ori_time first, "candidate" its opt_time; then device-time keys, then AKA's
// ambiguous ones (seconds above 1000 are taken as ms), then timing_ms.{mean,median,min}.
// Host/wall-time keys are not kernel times and are refused, as AKA does. Keyed by test_case_id.
using CaseTimes = std::map<std::string, double>;
Result<CaseTimes> parsePerformanceReport(const std::string& json, const std::string& taskType, bool torchOriginal);
// The latency AKA's GEAK harnesses print (GEAK_RESULT_LATENCY_MS=<ms>), the first such line of
// the output, which the candidate's code shares: nothing unless it is one finite positive number.
std::optional<double> geakLatencyMs(const std::string& output);
// The sitecustomize.py every wrapped harness process imports: it re-maps torch.manual_seed(s)
// with the salt in AKAD_SEED_SALT (and removes the variable from os.environ).
const char* seedRemapSiteCustomize();

// The performance report AKA would read in a workspace (the first that exists of its paths).
std::filesystem::path findPerformanceReport(const std::filesystem::path& workspace);
// AKA's rule for a correctness command that exits 0: output saying "fail" and never "pass"
// (nor "correctness: pass") is a failure.
bool akaOutputSaysFail(const std::string& output);

Result<nlohmann::json> scoreWrappedCandidate(const Task& task, const std::filesystem::path& candidateTree,
                                             const std::filesystem::path& workDir, const ScoringEnvironment& env);

// `akactl tasks validate` for a wrapped task: the pristine baseline must compile and pass AKA's
// correctness check, and a broken candidate must not. There is no reference solution to time.
Result<nlohmann::json> validateWrappedTask(const Task& task, const ScoringEnvironment& env,
                                           const std::filesystem::path& workDir);

}  // namespace akad::aka
