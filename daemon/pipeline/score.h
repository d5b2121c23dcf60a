#pragma once
// Stage 4: the isolated scorer. From a candidate tree (an extracted snapshot) it builds a clean
// scoring workspace and runs the gates, each in its own akabox sandbox with no network:
// compile -> correctness (visible) -> performance (visible), then correctness and performance
// on the held-out configurations. Trusted programs (reference, checker) never share a process
// with candidate code; the candidate runner sees only inputs.

#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/result.h"
#include "daemon/pipeline/sandbox_run.h"
#include "daemon/pipeline/task.h"
#include "daemon/pipeline/timing_slots.h"

namespace akad {

// What a sandbox needs for a task's toolchain image (images/<name>/image.yaml).
struct ImageProfile {
  std::string name = "host";
  std::string requires_gpu_vendor = "none";  // nvidia | amd | none: which GPUs the toolchain drives
  std::vector<SandboxBind> binds;
  std::map<std::string, std::string> env;
};

struct ScoringEnvironment {
  std::filesystem::path tasks_root;     // holds common/<harness>/
  std::filesystem::path trusted_cache;  // <state>/tasks: trusted builds per task content hash
  std::filesystem::path akacheck;       // the project's checker binary
  // A wrapped candidate's builds across scorings (daemon/aka/build_cache.h), per scope (the
  // submitter). Empty: every scoring builds afresh.
  std::filesystem::path build_cache;
  std::string build_cache_scope;
  ImageProfile image;
  std::vector<std::string> gpus;        // the leased GPU, if the task needs one
  // Leases the GPU when the first gate that needs one starts (after the builds, which need
  // none, so other attempts can use the GPU meanwhile). Unset: `gpus` is used as it is.
  std::function<Result<std::vector<std::string>>()> acquire_gpus;
  // Host identities: trusted programs (trusted build, reference, baseline, driver, checker) run
  // as sandbox_uid, the candidate's code (compile, runner, worker) as candidate_uid, the
  // attempt's own (daemon/uid_pool.h). Each owns the directories its sandboxes write. 0: leave
  // ownership as it is / candidate_uid 0: the same as sandbox_uid.
  uid_t sandbox_uid = 0;
  gid_t sandbox_gid = 0;
  uid_t candidate_uid = 0;
  gid_t candidate_gid = 0;
  SandboxCanceller* canceller = nullptr;
  std::function<void(const std::string& gate)> on_gate;  // progress for run.watch
  // Seeds are fresh per scoring; a re-score of the same snapshot draws new ones.
  std::function<uint64_t()> draw_seed;
  // false: compile and correctness gates only (task validation of a baseline, which would only
  // be timed against itself); the result then has "performance_measured": false.
  bool measure_performance = true;
  // Other scorings may use the same GPU meanwhile (tasks validated side by side, or a run's
  // attempts under its gpu_share option): a failure may be theirs (the GPU's memory is shared),
  // so nothing decided from one is kept for later scorings (the held-out choice of an imported
  // AKA task), and a run's results say gpu_shared.
  bool gpu_shared = false;
  // The host's performance gates at once (timing_slots.h): each holds a slot for its rounds.
  // Unset: no limit (a Slurm node runs one attempt).
  TimingSlots* timing_slots = nullptr;
};

// A task version's trusted build, and the harness's shared objects it linked, which the
// candidate's compile gets as well.
struct TrustedBuild {
  std::filesystem::path dir;     // the trusted programs, bound read-only at /trusted
  std::filesystem::path common;  // ensureCommonHarnessBuild's directory; empty when none
};

// Builds (once per task content hash) the task's trusted programs: the reference and the
// baseline runner, from pristine files only, linked with the harness's shared objects, which it
// ensures first (ensureCommonHarnessBuild). Returns both directories.
Result<TrustedBuild> ensureTrustedBuild(const Task& task, const ScoringEnvironment& env);

// Builds (once per harness version and image) the harness's task-independent objects, when its
// Makefile offers a `common` target and the task shadows none of its files (docs/tasks.md).
// Returns their directory, which trusted builds and candidate compiles get read-only as
// $AKA_COMMON; empty when the harness has none.
Result<std::filesystem::path> ensureCommonHarnessBuild(const Task& task, const ScoringEnvironment& env);

// Gives a build sandbox that shared build (read-only, at $AKA_COMMON); nothing when `common` is
// empty.
void bindCommonHarness(SandboxRequest& request, const std::filesystem::path& common);

// Scores a candidate tree in workDir (created, must not exist). Gate failures are results,
// not errors; an Error means the scorer itself could not work (the attempt is marked failed).
Result<nlohmann::json> scoreCandidate(const Task& task, const std::filesystem::path& candidateTree,
                                      const std::filesystem::path& workDir,
                                      const ScoringEnvironment& env);

// The AgentKernelArena-compatible score: 0 not compiled, 20 compiled but incorrect,
// 120 + 100 x speedup when correct.
double arenaScore(bool compiled, bool correct, double speedup);

// A converted AgentKernelArena task's result (docs/aka.md, "Scoring (convert mode)"): "mode":
// "convert", and "aka": AKA's way of summing up beside akad's, the mean of the per-case
// speedups of the performance gate and AKA's score of it.
void addConvertFigures(nlohmann::json& result);

}  // namespace akad
