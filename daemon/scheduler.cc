#include "daemon/scheduler.h"

#include <chrono>
#include <limits>

#include "common/log.h"
#include "daemon/pipeline/agent.h"
#include "daemon/fair_share.h"
#include "daemon/pipeline/attempt.h"
#include "daemon/pipeline/attempt_setup.h"
#include "daemon/pipeline/image.h"
#include "daemon/local_executor.h"
#include "daemon/pipeline/task_scan.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace akad {
Scheduler::Scheduler(Store& store, EventBus& bus, snapshot::SnapshotStore& snapshots, GpuLeases& gpus,
                     SchedulerConfig config)
    : store_(store), bus_(bus), snapshots_(snapshots), gpus_(gpus), config_(std::move(config)),
      timingSlots_(config_.timing_slots), uids_(config_.attempt_uids) {
  AttemptSetup setup;
  setup.attempts_dir = config_.state_dir / "attempts";
  setup.trusted_cache = config_.trusted_cache.empty() ? config_.state_dir / "tasks" : config_.trusted_cache;
  setup.build_cache = config_.state_dir / "build-cache";
  setup.images_dir = config_.images_dir;
  setup.akacheck = config_.akacheck;
  setup.allow_agent_network = config_.allow_agent_network;
  setup.workspace_limits = config_.workspace_limits;
  setup.sandbox_uid = config_.sandbox_uid;
  setup.sandbox_gid = config_.sandbox_gid;
  setup.timing_slots = &timingSlots_;
  const fs::path tasksDir = config_.state_dir / "tasks";
  if (config_.slurm)
    executor_ = std::make_unique<slurm::SlurmExecutor>(
        *config_.slurm, setup, tasksDir, snapshots_,
        // Slurm's fair share and limits apply per account on top of akad's own.
        [this](uid_t uid) { return config_.tenants.limitsFor(uid).slurm_account; });
  else
    executor_ = std::make_unique<LocalExecutor>(setup, tasksDir, snapshots_, gpus_,
                                                [this](const AttemptRecord& a) { return gpuRequestFor(a); });
}

Scheduler::~Scheduler() { stop(); }

void Scheduler::publish(const std::vector<EventRecord>& events) {
  for (const auto& e : events) bus_.publish(e);
}

Status Scheduler::start() {
  // Whatever sandboxes a previous daemon left in our cgroup parent (after kill -9 the akabox
  // processes die with it, but their cgroups stay), and its mount templates.
  cleanupSandboxLeftovers();
  removeAttemptLeftovers();
  // What the executor still runs of the last daemon's attempts (Slurm jobs live on) is followed
  // again; the rest is requeued.
  auto running = store_.runningAttempts();
  if (!running) return running.error();
  const std::map<std::int64_t, uid_t> followed = executor_->resumable(*running);
  std::set<std::int64_t> followedIds;
  for (const auto& [id, uid] : followed) followedIds.insert(id);
  auto recovered = store_.recoverAttempts(config_.requeue_interrupted, followedIds);
  if (!recovered) return recovered.error();
  publish(*recovered);
  if (!recovered->empty()) log::info("recovered ", recovered->size(), " events' worth of attempts from the last daemon");
  std::lock_guard lock(mutex_);
  for (const AttemptRecord& a : *running) {
    auto it = followed.find(a.id);
    if (it == followed.end()) continue;
    if (it->second != 0 && !uids_.take(it->second))
      log::warn("attempt ", a.id, " runs as uid ", it->second, ", which this daemon's uid range does not hold");
    resumes_.emplace_back(a, it->second);
  }
  for (int i = 0; i < config_.workers; ++i) threads_.emplace_back([this, i] { workerLoop(i); });
  log::info("executor started: ", executor_->name(), ", ", config_.workers, " worker(s), ", gpus_.size(), " GPU(s)");
  return {};
}

void Scheduler::removeAttemptLeftovers() {
  // Nothing runs yet: every workspace and every scoring's data under attempts/ is a dead
  // daemon's. The attempts that get run or scored again make theirs anew.
  const fs::path attempts = config_.state_dir / "attempts";
  if (const int n = unmountEverythingUnder(attempts); n > 0) log::info("unmounted ", n, " workspace(s) a previous daemon left");
  std::error_code ec;
  for (const auto& a : fs::directory_iterator(attempts, ec)) {
    std::error_code e;
    fs::remove_all(a.path() / "workspace", e);
    for (const auto& d : fs::directory_iterator(a.path(), e))
      if (d.path().filename().string().rfind("score-", 0) == 0) dropScoringData(d.path());
  }
}

void Scheduler::stop() {
  std::vector<std::thread> threads;
  {
    std::lock_guard lock(mutex_);
    if (stopping_ && threads_.empty()) return;
    stopping_ = true;
    for (auto& [id, f] : inflight_) f.canceller->cancel();
    threads.swap(threads_);
  }
  wake_.notify_all();
  gpus_.wakeWaiters();
  for (auto& t : threads) t.join();
  // No sandbox runs now: the mount templates go with the daemon.
  if (!mountTemplateDir().empty()) cleanupSandboxLeftovers();
}

void Scheduler::wake() {
  {
    std::lock_guard lock(mutex_);
    ++wakeups_;
  }
  wake_.notify_all();
}

void Scheduler::cancelRun(const std::string& runId) {
  std::lock_guard lock(mutex_);
  for (auto& [id, f] : inflight_)
    if (f.run_id == runId) {
      f.cancelled_by_user = true;
      f.canceller->cancel();
    }
  gpus_.wakeWaiters();
}

json Scheduler::describe() const {
  std::lock_guard lock(mutex_);
  json running = json::array();
  for (const auto& [id, f] : inflight_) running.push_back({{"attempt", id}, {"run", f.run_id}});
  return {{"workers", config_.workers}, {"running", running}, {"stopping", stopping_},
          {"executor", executor_->describe()}};
}

void Scheduler::setCredentials(const std::string& runId, std::map<std::string, std::string> values) {
  std::lock_guard lock(mutex_);
  credentials_[runId] = std::move(values);
}

std::map<std::string, std::string> Scheduler::credentialsOf(const std::string& runId) const {
  std::lock_guard lock(mutex_);
  auto it = credentials_.find(runId);
  return it == credentials_.end() ? std::map<std::string, std::string>{} : it->second;
}

namespace {

// What the run's options and the submitter's limits leave the agent: the run may have narrowed
// its network (checked at submit), the tenant's network limit and agent-time ceiling apply
// again in case the policy changed since (run.submit refuses to ask above them).
void limitAgent(AttemptPlan& plan, const json& options, const TenantLimits& limits) {
  if (auto st = applyRunNetwork(plan.agent, options); !st) {
    log::warn("attempt ", plan.attempt_id, ": ", st.error().message, "; the agent runs without network");
    capNetwork(plan.agent, NetworkLevel::None);
  }
  if (auto cap = parseNetworkLevel(limits.agent_network); cap && capNetwork(plan.agent, *cap))
    log::info("attempt ", plan.attempt_id, ": the agent's network is capped to ", networkLevelName(*cap));
  if (limits.max_agent_time_s > 0) {
    const double want = plan.agent_time_limit_s > 0 ? plan.agent_time_limit_s
                                                    : std::min(plan.agent.time_limit_s, plan.task->limits.agent_s);
    plan.agent_time_limit_s = std::min(want, limits.max_agent_time_s);
  }
}

}  // namespace

std::function<void(const std::string&)> Scheduler::stageRecorder(std::int64_t attemptId) {
  return [this, attemptId](const std::string& stage) {
    auto change = store_.setAttemptStage(attemptId, stage);
    if (change) publish(change->events);
  };
}

std::function<Status(const std::string&)> Scheduler::snapshotRecorder(std::int64_t attemptId) {
  return [this, attemptId](const std::string& sha) -> Status {
    auto change = store_.setAttemptSnapshot(attemptId, sha);
    if (!change) return change.error();
    publish(change->events);
    return {};
  };
}

Result<Task> Scheduler::taskFor(const AttemptRecord& a) {
  if (!a.taskHash) return Error{"attempt " + std::to_string(a.id) + " has no task version recorded"};
  const fs::path dir = taskVersionDir(config_.state_dir / "tasks", *a.taskHash, a.taskId);
  auto t = loadTask(dir);
  if (!t) return Error{"the imported task " + a.taskId + " (" + *a.taskHash + ") cannot be loaded: " + t.error().message};
  if (t->content_hash != *a.taskHash)
    return Error{"the imported task " + a.taskId + " no longer matches its hash " + *a.taskHash};
  return t;
}

void Scheduler::refreshRunOptions() {
  runOptions_.clear();
  for (const char* state : {"queued", "running"}) {
    auto runs = store_.listRuns(std::string(state), std::numeric_limits<std::int32_t>::max(), std::nullopt);
    if (!runs) continue;  // their attempts then start on any free GPU, and the lease decides
    for (const RunRecord& r : *runs) runOptions_[r.id] = r.params.value("options", json::object());
  }
}

std::optional<GpuRequest> Scheduler::gpuRequestFor(const AttemptRecord& a) {
  const auto options = runOptions_.find(a.runId);
  if (options == runOptions_.end() || !a.taskHash) return std::nullopt;
  auto vendor = taskImageVendor_.find(*a.taskHash);
  if (vendor == taskImageVendor_.end()) {
    auto task = taskFor(a);
    if (!task) return std::nullopt;
    auto image = loadImageProfile(config_.images_dir, task->image);
    if (!image) return std::nullopt;
    if (taskImageVendor_.size() > 4096) taskImageVendor_.clear();  // task versions come and go
    vendor = taskImageVendor_.emplace(*a.taskHash, image->requires_gpu_vendor).first;
  }
  return gpuRequestOf(vendor->second, options->second, a.runId);
}

Result<std::pair<std::optional<AttemptRecord>, std::vector<EventRecord>>> Scheduler::claimNext(
    const std::function<bool(const AttemptRecord&)>& startable) {
  std::lock_guard claim(claimMutex_);
  refreshRunOptions();
  return claimByFairShare(store_, config_.tenants, isoTimeUtc(kUsageWindowS), startable);
}

void Scheduler::workerLoop(int worker) {
  auto eligible = [this](const AttemptRecord& a) { return executor_->canStart(a); };
  for (;;) {
    std::uint64_t seen = 0;
    std::optional<std::pair<AttemptRecord, uid_t>> resume;
    {
      std::lock_guard lock(mutex_);
      if (stopping_) return;
      seen = wakeups_;  // read before claiming, so a wake() during the claim is not lost
      if (!resumes_.empty()) {
        resume = std::move(resumes_.front());
        resumes_.pop_front();
      }
    }
    if (resume) {
      execute(resume->first, resume->second);
      continue;
    }
    auto claimed = claimNext(eligible);
    if (!claimed) {
      log::error("worker ", worker, ": cannot take an attempt from the store: ", claimed.error().message);
    } else if (claimed->first) {
      publish(claimed->second);
      execute(*claimed->first);
      continue;
    }
    // Sleep until new work (wake) or a stop; the timeout also catches GPUs freed meanwhile.
    std::unique_lock lock(mutex_);
    wake_.wait_for(lock, std::chrono::seconds(1), [&] { return stopping_ || wakeups_ != seen; });
  }
}

Result<json> Scheduler::planAndRun(const AttemptRecord& a, const RunRecord& run, const Task& task,
                                   SandboxCanceller* canceller, std::optional<uid_t> resumedUid) {
  const json& options = run.params.value("options", json::object());
  AttemptPlan plan;
  plan.attempt_id = a.id;
  plan.run_id = a.runId;
  plan.task = &task;
  plan.snapshot = a.snapshotSha256;
  plan.agent_time_limit_s = options.value("agent_time_limit_s", 0.0);
  plan.credentials = credentialsOf(a.runId);
  Result<AgentDefinition> agent = Error{"no agent"};
  if (run.agentCommand) agent = adHocAgent(*run.agentCommand, task.limits.agent_s);
  else if (run.agent) agent = findAgent(config_.agents_dir, *run.agent);
  else if (plan.snapshot) agent = adHocAgent("true", 1);  // a re-score runs no agent
  if (!agent) return agent.error();
  auto images = attemptImages(config_.images_dir, task, *agent);
  if (!images) return images.error();
  plan.agent = *agent;
  limitAgent(plan, options, config_.tenants.limitsFor(static_cast<uid_t>(run.submitterUid)));

  // The attempt's own uid for its untrusted sandboxes. The range holds at least one uid per
  // worker (checked at start), and each worker runs one attempt at a time; a resumed attempt
  // keeps the uid its job runs as (taken at start).
  std::optional<UidLease> attemptUid;
  if (resumedUid) {
    if (*resumedUid != 0) attemptUid.emplace(uids_, *resumedUid);
  } else if (config_.attempt_uids.count > 0) {
    if (auto uid = uids_.acquire()) attemptUid.emplace(uids_, *uid);
    else log::error("attempt ", a.id, ": no free uid in ", config_.attempt_uids.text(), "; running it as the sandbox uid");
  }
  AttemptExecution e{
      .attempt = a,
      .run = run,
      .task = task,
      .plan = plan,
      .images = *images,
      .candidate_uid = attemptUid ? std::optional<uid_t>(attemptUid->uid()) : std::nullopt,
      .canceller = canceller,
      .on_stage = stageRecorder(a.id),
      .on_snapshot = snapshotRecorder(a.id),
      .on_placed =
          [this, id = a.id](const std::string& job, const std::string& node) {
            auto change = store_.setAttemptExecutor(id, job, node);
            if (change) publish(change->events);
            else log::error("cannot record where attempt ", id, " runs: ", change.error().message);
          },
      .on_gpu_time =
          [this, id = a.id, uid = run.submitterUid](double seconds) {
            if (auto st = store_.recordGpuUsage(id, uid, seconds); !st)
              log::error("cannot record attempt ", id, "'s GPU time: ", st.error().message);
          },
  };
  return resumedUid ? executor_->resume(e) : executor_->execute(e);
}

void Scheduler::execute(const AttemptRecord& a, std::optional<uid_t> resumedUid) {
  auto canceller = std::make_shared<SandboxCanceller>();
  {
    std::lock_guard lock(mutex_);
    inflight_[a.id] = InFlight{a.runId, canceller, false};
  }
  auto finish = [&](const std::string& state, const std::optional<json>& result, const std::optional<std::string>& error) {
    auto change = store_.finishAttempt(a.id, state, result, error);
    if (!change) log::error("cannot record the end of attempt ", a.id, ": ", change.error().message);
    else publish(change->events);
  };

  auto run = store_.getRun(a.runId);
  auto task = taskFor(a);
  Result<json> outcome = Error{"not run"};
  if (!run) outcome = run.error();
  else if (!task) outcome = task.error();
  else outcome = planAndRun(a, *run, *task, canceller.get(), resumedUid);

  bool byUser = false, stopping = false;
  {
    std::lock_guard lock(mutex_);
    byUser = inflight_[a.id].cancelled_by_user;
    stopping = stopping_;
    inflight_.erase(a.id);
  }
  if (outcome) finish("scored", *outcome, std::nullopt);
  else if (byUser) finish("cancelled", std::nullopt, "cancelled by the user");
  else if (stopping) {
    // The daemon is shutting down: the attempt goes back to the queue for the next daemon.
    auto change = store_.requeueAttempt(a.id, "the daemon stopped during stage; queued again");
    if (change) publish(change->events);
  } else finish("failed", std::nullopt, outcome.error().message);
}

}  // namespace akad
