#pragma once
// The Slurm executor (akad --executor slurm): instead of running an attempt's stages itself,
// a worker thread of the scheduler submits the attempt as one Slurm batch job (sbatch) that
// runs akad-node on whichever node Slurm picks, and follows it (squeue, then scontrol for
// finished jobs) until its result is in the shared area (shared_area.h). Slurm places the job;
// a GPU task asks for one GPU through gres. A job whose node fails is requeued by Slurm (the
// job is submitted with --requeue) and the front end keeps following it; only the newest
// incarnation's result counts. `akactl cancel` and a daemon stop end the job with scancel.
//
// Why sbatch and not slurmrestd: the command-line tools come with every Slurm installation and
// use the cluster's own munge authentication; slurmrestd needs its own daemon, a JWT or socket
// set-up and a version-specific OpenAPI plugin, which many sites do not run.

#include <filesystem>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/result.h"
#include "daemon/pipeline/sandbox_run.h"
#include "daemon/slurm/shared_area.h"
#include "daemon/snapshot/store.h"

namespace akad::slurm {

struct SlurmConfig {
  std::filesystem::path shared;        // the shared area (every node mounts it at this path)
  std::filesystem::path node_program;  // akad-node on the nodes
  std::string partition, account, qos;
  std::string gres = "gpu";            // a GPU task asks for --gres=<gres>:1
  int time_limit_min = 0;              // 0: the partition's default
  double poll_interval_s = 1.0;
};

struct SlurmHooks {
  std::function<void(const std::string& stage)> on_stage;
  std::function<void(const std::string& job, const std::string& node)> on_job;
  // Called with the snapshot's hash once it is in the front end's store, before the result.
  std::function<Status(const std::string& sha256)> on_snapshot;
  SandboxCanceller* canceller = nullptr;
};

struct SlurmJobInput {
  AttemptJobSpec spec;
  bool needs_gpu = false;
  std::string account;  // the submitter's (tenant policy `slurm_account`), over the config's
  std::filesystem::path task_def_root;  // the front end's tasks/<hash>/def
  std::map<std::string, std::string> credentials;
};

// Runs the attempt through Slurm; returns the attempt's result (as runAttempt would) or an
// Error (set-up failure, the job failed without a result, cancelled).
Result<nlohmann::json> runOnSlurm(const SlurmConfig& config, const SlurmJobInput& input,
                                  snapshot::SnapshotStore& snapshots, const SlurmHooks& hooks);

// The sbatch command line for a job (exposed for tests of the flag mapping).
std::vector<std::string> sbatchCommand(const SlurmConfig& config, const SlurmJobInput& input,
                                       const std::filesystem::path& jobDir);

// A job's state from squeue/scontrol: "PENDING", "RUNNING", "COMPLETED", ... ("" when Slurm
// no longer knows the job), its node list and restart count.
struct JobState {
  std::string state;
  std::string node;
  std::string reason;
  int restarts = 0;
};
Result<JobState> queryJob(const std::string& job);

}  // namespace akad::slurm
