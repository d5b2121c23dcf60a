#pragma once
// The scheduler: worker threads take queued attempts from the store by fair share, one at a
// time each, plan them (agent, limits, the attempt's uid) and hand them to the executor
// (daemon/executor.h: this host's sandboxes, or Slurm jobs). Every stage change is committed
// before the stage runs, so after a crash the store says where each attempt stood.

#include <sys/types.h>

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/result.h"
#include "daemon/events.h"
#include "daemon/executor.h"
#include "daemon/gpu_leases.h"
#include "daemon/pipeline/attempt_setup.h"
#include "daemon/pipeline/sandbox_run.h"
#include "daemon/pipeline/task.h"
#include "daemon/pipeline/workspace_fs.h"
#include "daemon/slurm/slurm_executor.h"
#include "daemon/snapshot/store.h"
#include "daemon/store.h"
#include "daemon/tenants.h"
#include "daemon/uid_pool.h"

namespace akad {

struct SchedulerConfig {
  int workers = 1;
  std::filesystem::path state_dir;
  std::filesystem::path trusted_cache;  // trusted builds (akad --trusted-cache; default <state>/tasks)
  std::filesystem::path tasks_root;
  std::filesystem::path agents_dir;
  std::filesystem::path images_dir;
  std::filesystem::path akacheck;
  bool requeue_interrupted = true;
  bool allow_agent_network = true;
  uid_t sandbox_uid = 0;
  gid_t sandbox_gid = 0;
  // Who may run how much (quotas and fair share, daemon/fair_share.h).
  TenantPolicy tenants;
  // Each running attempt's own host uid for its untrusted sandboxes (daemon/uid_pool.h); an
  // empty range runs them as sandbox_uid too.
  UidRange attempt_uids;
  // The agent's workspace file system (daemon/pipeline/workspace_fs.h).
  WorkspaceLimits workspace_limits;
  // Performance gates timed at once on this host (akad --timing-slots; daemon/pipeline/timing_slots.h).
  int timing_slots = 1;
  // Set: attempts run as Slurm jobs (daemon/slurm/slurm_executor.h), not in this process.
  std::optional<slurm::SlurmConfig> slurm;
};

// Usage counts over this window (GPU hours per day; fair share's "time used recently").
inline constexpr double kUsageWindowS = 24 * 3600;

class Scheduler {
 public:
  Scheduler(Store& store, EventBus& bus, snapshot::SnapshotStore& snapshots, GpuLeases& gpus,
            SchedulerConfig config);
  ~Scheduler();

  // Recovers what a previous daemon left (sandboxes, attempts mid-stage), then starts workers.
  Status start();
  // Stops taking attempts, cancels the sandboxes in flight and puts their attempts back in the
  // queue (they are run again by the next daemon), then joins the workers.
  void stop();
  void wake();
  void cancelRun(const std::string& runId);
  nlohmann::json describe() const;
  // The executor's kind and counters (no attempt or run ids: daemon.info answers everyone).
  nlohmann::json executorState() const { return executor_->describe(); }
  // The host's performance gates at once, for attempts and task validations alike.
  TimingSlots* timingSlots() { return &timingSlots_; }
  bool placesGpusElsewhere() const { return executor_->placesGpusElsewhere(); }
  const SchedulerConfig& config() const { return config_; }
  // Credentials an agent needs (API keys): kept in memory only, never in the store.
  void setCredentials(const std::string& runId, std::map<std::string, std::string> values);
  std::map<std::string, std::string> credentialsOf(const std::string& runId) const;

 private:
  void workerLoop(int worker);
  // At start-up: workspaces (unmounted) and scoring data a killed daemon left under attempts/.
  void removeAttemptLeftovers();
  // The next attempt by fair share (daemon/fair_share.h), marked running.
  Result<std::pair<std::optional<AttemptRecord>, std::vector<EventRecord>>> claimNext(
      const std::function<bool(const AttemptRecord&)>& startable);
  // Runs a claimed attempt (or follows one a previous daemon left to its executor) and
  // records its end.
  void execute(const AttemptRecord& attempt, std::optional<uid_t> resumedUid = std::nullopt);
  // The plan (agent, images, limits) and the executor's run of it.
  Result<nlohmann::json> planAndRun(const AttemptRecord& a, const RunRecord& run, const Task& task,
                                    SandboxCanceller* canceller, std::optional<uid_t> resumedUid);
  void publish(const std::vector<EventRecord>& events);
  Result<Task> taskFor(const AttemptRecord& attempt);
  // What a queued attempt asks of a GPU (gpu_eligibility.h), for LocalExecutor::canStart. It
  // runs inside the store's claim, which it may not query: the options of the live runs are
  // read before each claim (refreshRunOptions), each task version's image vendor once.
  void refreshRunOptions();
  std::optional<GpuRequest> gpuRequestFor(const AttemptRecord& attempt);
  // What records an attempt's stage and snapshot in the store (and publishes the events), for
  // either executor.
  std::function<void(const std::string&)> stageRecorder(std::int64_t attemptId);
  std::function<Status(const std::string&)> snapshotRecorder(std::int64_t attemptId);

  Store& store_;
  EventBus& bus_;
  snapshot::SnapshotStore& snapshots_;
  GpuLeases& gpus_;
  SchedulerConfig config_;
  TimingSlots timingSlots_;  // before executor_: its attempts hold slots

  // Held while choosing and claiming, so that each choice sees the previous one's effect.
  std::mutex claimMutex_;
  std::map<std::string, nlohmann::json> runOptions_;         // run id -> options; under claimMutex_
  std::map<std::string, std::string> taskImageVendor_;      // task hash -> vendor; under claimMutex_
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
  std::uint64_t wakeups_ = 0;  // bumped by wake(): new work may be there
  std::vector<std::thread> threads_;
  std::unique_ptr<Executor> executor_;
  // Attempts a previous daemon left to the executor, followed before any new claim, with the
  // attempt uid each still runs as (0: none).
  std::deque<std::pair<AttemptRecord, uid_t>> resumes_;
  struct InFlight {
    std::string run_id;
    std::shared_ptr<SandboxCanceller> canceller;
    bool cancelled_by_user = false;
  };
  std::map<std::int64_t, InFlight> inflight_;
  UidPool uids_{UidRange{}};
  std::map<std::string, std::map<std::string, std::string>> credentials_;
};

}  // namespace akad
