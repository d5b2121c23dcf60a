#pragma once
// The Slurm executor (akad --executor slurm): instead of running an attempt's stages itself,
// a worker thread of the scheduler submits the attempt as one Slurm batch job (sbatch) that
// runs akad-node on whichever node Slurm picks, and follows it (one squeue for all jobs in
// flight, job_tracker.h) until its result is in the shared area (shared_area.h). Slurm places the job;
// a GPU task asks for one GPU through gres. A job whose node fails is requeued by Slurm (the
// job is submitted with --requeue) and the front end keeps following it; only the newest
// incarnation's result counts. `akactl cancel` and a daemon stop end the job with scancel. A
// daemon that died (no stop) leaves its jobs running: the next one follows them again
// (resumable/resume) and cancels whatever job of the shared area no attempt owns any more.
//
// Why sbatch and not slurmrestd: the command-line tools come with every Slurm installation and
// use the cluster's own munge authentication; slurmrestd needs its own daemon, a JWT or socket
// set-up and a version-specific OpenAPI plugin, which many sites do not run.

#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/result.h"
#include "daemon/executor.h"
#include "daemon/slurm/job_tracker.h"
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
  // Where each node keeps trusted builds across jobs (akad --slurm-node-cache); empty: every job
  // builds its task version afresh in its own work folder.
  std::filesystem::path node_cache;
};

struct SlurmJobInput {
  AttemptJobSpec spec;
  bool needs_gpu = false;
  std::uint64_t memory_bytes = 0;  // the task's sandbox memory limit; the job asks for it and some
  std::string account;  // the submitter's (tenant policy `slurm_account`), over the config's
  std::filesystem::path task_def_root;  // the front end's tasks/<hash>/def
  std::map<std::string, std::string> credentials;
};

// The job name of one submission: unique per attempt and submission, so a restarted front end
// can find (and cancel) a job whose id it never recorded.
std::string jobName(const SlurmJobInput& input, const std::string& nonce);

// The sbatch command line for a job (exposed for tests of the flag mapping).
std::vector<std::string> sbatchCommand(const SlurmConfig& config, const SlurmJobInput& input,
                                       const std::filesystem::path& jobDir);

class SlurmExecutor : public Executor {
 public:
  // `setup` gives the nodes' installation paths and the sandbox ids; `accountOf` maps a
  // submitter's uid to its Slurm account ("" for the config's).
  SlurmExecutor(SlurmConfig config, AttemptSetup setup, std::filesystem::path tasksDir,
                snapshot::SnapshotStore& snapshots, std::function<std::string(uid_t)> accountOf);
  std::string name() const override { return "slurm"; }
  // Slurm places attempts, GPU ones included: every queued attempt may be submitted.
  bool canStart(const AttemptRecord&) const override { return true; }
  Result<nlohmann::json> execute(const AttemptExecution& e) override;
  std::map<std::int64_t, uid_t> resumable(const std::vector<AttemptRecord>& running) override;
  Result<nlohmann::json> resume(const AttemptExecution& e) override;
  nlohmann::json describe() const override;
  bool placesGpusElsewhere() const override { return true; }

 private:
  SlurmJobInput inputFor(const AttemptExecution& e) const;
  // Follows the job until it ends; its result (and snapshot) taken in from `dir`.
  Result<nlohmann::json> follow(const AttemptExecution& e, const std::string& job,
                                const std::filesystem::path& dir);
  // Ends a job and waits until Slurm says it is over, so nothing writes into its folder after.
  void cancelJob(const std::string& job);
  // Job folders of attempts that are not followed again: their jobs cancelled, folders removed.
  void removeOrphan(const std::filesystem::path& dir);

  SlurmConfig config_;
  AttemptSetup setup_;
  std::filesystem::path tasks_dir_;
  snapshot::SnapshotStore& snapshots_;
  std::function<std::string(uid_t)> account_of_;
  std::unique_ptr<JobTracker> tracker_;
  // Attempts found running at start-up with a job to follow: their job folders.
  std::mutex mutex_;
  std::map<std::int64_t, std::filesystem::path> resumed_dirs_;
};

}  // namespace akad::slurm
