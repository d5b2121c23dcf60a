#pragma once
// How wrap mode runs AKA's commands (wrap_score.h): each in an akad sandbox on one side's
// workspace (the candidate's, or the pristine baseline's), with the sitecustomize.py that
// re-maps the harness's seeds, the side's JIT caches and the leased GPU; a list of them is one
// gate, failed at the first command that fails (wrap_runner.cc); the performance gate times
// both sides by AKA's reports (wrap_performance.cc).

#include <sys/types.h>

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/result.h"
#include "daemon/aka/held_out.h"
#include "daemon/aka/wrap_compat.h"
#include "daemon/pipeline/sandbox_run.h"
#include "daemon/pipeline/score.h"
#include "daemon/pipeline/task.h"

namespace akad::aka {

struct Side {
  std::string who;      // "candidate" | "baseline"
  std::filesystem::path dir;         // its workspace
  std::filesystem::path jit;         // its JIT and extension-build caches
  // Python's bytecode folder under jit. Python trusts a .pyc whose source has the same size and
  // modification second, so a tree whose files were rewritten (held-out shapes injected) gets
  // a folder of its own, named after the injections: two trials written within one second
  // would otherwise read each other's bytecode.
  std::string pycache = "pycache";
  // The trusted baseline's cache folder whose built extensions are copied into this side's
  // before each of its commands (seedBuiltExtensions, build_cache.h); empty: none.
  std::filesystem::path seed_from;
  uid_t uid = 0;
  gid_t gid = 0;
};

struct CommandRun {
  SandboxOutcome outcome;
  std::string output;  // stdout + stderr, at most 8 MiB of each
  std::string log;     // the log name
};

class WrapRunner {
 public:
  WrapRunner(const Task& task, const ScoringEnvironment& env, std::filesystem::path workDir, uint64_t salt,
             std::vector<std::string> gpus)
      : task_(task), env_(env), work_(std::move(workDir)), salt_(salt), gpus_(std::move(gpus)) {}

  // <work>/site/sitecustomize.py, bound into every sandbox.
  Status prepareSite();
  // The compat layer every later command runs with (wrap_compat.h); none by default.
  void useCompat(CompatLayer layer) { compat_ = std::move(layer); }
  // What the layer recorded doing, over every command so far (each distinct action once).
  const nlohmann::json& compatRecord() const { return compatRecord_; }
  // One command in a sandbox on `side`, its output in <work>/logs/<logName>.{out,err}.
  Result<CommandRun> run(const Side& side, const std::string& command, double wallS, const std::string& logName) const;
  // The end of a run's logs, for a gate's reason.
  std::string tail(const std::string& logName) const;

 private:
  void noteCompatRecord(const std::vector<nlohmann::json>& lines) const;

  const Task& task_;
  const ScoringEnvironment& env_;
  std::filesystem::path work_;
  uint64_t salt_;
  std::vector<std::string> gpus_;
  CompatLayer compat_;
  mutable nlohmann::json compatRecord_ = nlohmann::json::array();
};

// A wrap gate's verdict: {"pass": ..., "reason": ...} (the reason always present).
nlohmann::json wrapGate(bool pass, const std::string& reason);

// `who` names the side in logs and messages; `candidate` says whose code it runs.
// Caches (Triton's, torch extensions', CUDA's, Python's): the candidate's live for one scoring,
// shared by its visible and held-out phases; the pristine baseline's are trusted and kept per
// task version across scorings (beside the native tasks' trusted JIT caches), so a re-score or a
// held-out phase does not build the baseline's extension again. `jit` is where they go.
// `injections` names the tree's bytecode folder (Side::pycache): empty for an unchanged tree.
Result<Side> makeSide(const std::string& who, bool candidateCode, const std::filesystem::path& dir,
                      const std::filesystem::path& jit, const ScoringEnvironment& env,
                      const std::vector<Injection>& injections = {});

// Runs a list of AKA commands one by one (as AKA's evaluator does); the gate fails at the first
// that fails.
Result<nlohmann::json> commandGate(const WrapRunner& w, const Side& side, const std::vector<std::string>& cmds, double wallS,
                         const std::string& name, bool akaFailRule);

struct WrapSpec;
// ABBA rounds of the pristine baseline and the candidate on the same GPU (wrap_performance.cc):
// per test case the median times' speedup, and their geometric mean in `speedup`; AKA's own
// (its mean of per-case speedups, against its baseline) in `akaSpeedup`. `base` null: the task
// has no pristine kernel, and the PyTorch original that each candidate run times is the baseline.
Result<nlohmann::json> performanceGate(const WrapRunner& w, const Side* base, const Side& cand, const WrapSpec& spec,
                                       const Task& task, double& speedup, double& akaSpeedup);

}  // namespace akad::aka
