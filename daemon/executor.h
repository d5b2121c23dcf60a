#pragma once
// How a claimed attempt is carried out. The scheduler (daemon/scheduler.cc) owns the queue, fair
// share, the plan (agent, limits, credentials), the attempt's own uid and every write to the
// store; an executor owns only where and how the attempt's stages run:
//
//   LocalExecutor  (daemon/local_executor.cc)       the pipeline's sandboxes on this host, GPUs
//                                                    from this daemon's leases
//   SlurmExecutor  (daemon/slurm/slurm_executor.cc) one Slurm job per attempt, running the same
//                                                    pipeline on a node (daemon/slurm/node_main.cc)
//
// Both report through the same callbacks, so the store, the events and the result look the same
// whichever ran the attempt (the result's `executor` object says which).

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/result.h"
#include "daemon/pipeline/attempt.h"
#include "daemon/pipeline/attempt_setup.h"
#include "daemon/pipeline/sandbox_run.h"
#include "daemon/store.h"

namespace akad {

// One claimed (or resumed) attempt, planned, with what it reports back through.
struct AttemptExecution {
  const AttemptRecord& attempt;
  const RunRecord& run;
  const Task& task;
  const AttemptPlan& plan;
  const AttemptImages& images;
  std::optional<uid_t> candidate_uid;  // the attempt's own uid (daemon/uid_pool.h), if any
  SandboxCanceller* canceller = nullptr;
  std::function<void(const std::string& stage)> on_stage;
  // Must make the snapshot durable in the front end's store before scoring goes on.
  std::function<Status(const std::string& sha256)> on_snapshot;
  // Where a batch system placed it: its job id, then its node once known.
  std::function<void(const std::string& job, const std::string& node)> on_placed;
  // GPU time a stage held, when it is released (counts against the tenant's GPU hours).
  std::function<void(double seconds)> on_gpu_time;
};

class Executor {
 public:
  virtual ~Executor() = default;
  virtual std::string name() const = 0;
  // Whether a queued attempt may be claimed now (the claim asks for each candidate).
  virtual bool canStart(const AttemptRecord& attempt) const = 0;
  // Runs the attempt to its result; an Error when it could not be run (or was cancelled).
  virtual Result<nlohmann::json> execute(const AttemptExecution& e) = 0;
  // At start-up, given the attempts a previous daemon left running: those whose execution goes
  // on without the daemon (a Slurm job) and can be followed again by resume(), each with the
  // attempt uid it runs as (0: none), which stays taken. Whatever this executor left that
  // belongs to none of them is removed here. The rest are requeued.
  virtual std::map<std::int64_t, uid_t> resumable(const std::vector<AttemptRecord>& running) {
    (void)running;
    return {};
  }
  virtual Result<nlohmann::json> resume(const AttemptExecution& e) {
    (void)e;
    return Error{"the " + name() + " executor cannot follow an attempt after a restart"};
  }
  virtual nlohmann::json describe() const { return {{"kind", name()}}; }
  // Whether GPUs come from elsewhere (a batch system's nodes) rather than this daemon's leases:
  // then a GPU task is accepted at submit though this host has no GPU.
  virtual bool placesGpusElsewhere() const { return false; }
};

}  // namespace akad
