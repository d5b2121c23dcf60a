#include "daemon/slurm/slurm_executor.h"

#include <sys/random.h>
#include <sys/stat.h>

#include <chrono>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <thread>

#include "common/durable_file.h"
#include "common/log.h"
#include "daemon/pipeline/agent.h"
#include "daemon/pipeline/files.h"
#include "daemon/pipeline/task_scan.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace akad::slurm {

namespace {

std::string shellQuote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

std::string nonce() {
  unsigned char b[4];
  if (::getrandom(b, sizeof b, 0) != static_cast<ssize_t>(sizeof b)) return "0";
  char text[9];
  std::snprintf(text, sizeof text, "%02x%02x%02x%02x", b[0], b[1], b[2], b[3]);
  return text;
}

std::string readSmall(const fs::path& p) {
  std::ifstream in(p);
  std::string s((std::istreambuf_iterator<char>(in)), {});
  if (s.size() > 4096) s.resize(4096);
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

// Removes the job's folder on every way out of the front end's part (a daemon that dies leaves
// it for the next one, which follows the job again).
struct JobDir {
  fs::path path;
  ~JobDir() {
    std::error_code ec;
    if (!path.empty()) fs::remove_all(path, ec);
  }
};

// jobs/a<attempt>-<nonce>: the attempt's id, or 0 for a name that is not ours.
std::int64_t attemptOfDir(const fs::path& dir) {
  const std::string n = dir.filename().string();
  const size_t dash = n.find('-');
  if (n.size() < 3 || n[0] != 'a' || dash == std::string::npos || dash < 2) return 0;
  const std::string id = n.substr(1, dash - 1);
  if (id.size() > 18 || id.find_first_not_of("0123456789") != std::string::npos) return 0;
  return std::stoll(id);
}

}  // namespace

std::string jobName(const SlurmJobInput& in, const std::string& nonceText) {
  return "akad-a" + std::to_string(in.spec.attempt_id) + "-" + nonceText;
}

std::vector<std::string> sbatchCommand(const SlurmConfig& c, const SlurmJobInput& in, const fs::path& jobDir) {
  const std::string dirName = jobDir.filename().string();
  const std::string nonceText = dirName.substr(dirName.find('-') + 1);
  std::vector<std::string> cmd = {"sbatch", "--parsable", "--requeue",
                                  "--job-name", jobName(in, nonceText),
                                  "--chdir", jobDir.string(),
                                  "--output", (jobDir / "slurm-%j.out").string()};
  if (!c.partition.empty()) cmd.insert(cmd.end(), {"--partition", c.partition});
  const std::string account = in.account.empty() ? c.account : in.account;
  if (!account.empty()) cmd.insert(cmd.end(), {"--account", account});
  if (!c.qos.empty()) cmd.insert(cmd.end(), {"--qos", c.qos});
  if (c.time_limit_min > 0) cmd.insert(cmd.end(), {"--time", std::to_string(c.time_limit_min)});
  if (in.memory_bytes > 0) {
    // One sandbox at a time runs the task's code, but a driven gate runs the driver and the
    // worker at once, and the agent's workspace is a tmpfs: ask for all of it, plus the node
    // program's own.
    const std::uint64_t bytes = 2 * in.memory_bytes + in.spec.workspace_bytes + (512ull << 20);
    cmd.insert(cmd.end(), {"--mem", std::to_string((bytes + (1 << 20) - 1) >> 20) + "M"});
  }
  if (in.needs_gpu) cmd.insert(cmd.end(), {"--gres", c.gres + ":1"});
  cmd.insert(cmd.end(), {"--wrap", "exec " + shellQuote(c.node_program.string()) + " run --job " + shellQuote(jobDir.string())});
  return cmd;
}

SlurmExecutor::SlurmExecutor(SlurmConfig config, AttemptSetup setup, fs::path tasksDir,
                             snapshot::SnapshotStore& snapshots, std::function<std::string(uid_t)> accountOf)
    : config_(std::move(config)), setup_(std::move(setup)), tasks_dir_(std::move(tasksDir)), snapshots_(snapshots),
      account_of_(std::move(accountOf)), tracker_(std::make_unique<JobTracker>(config_.poll_interval_s)) {}

json SlurmExecutor::describe() const {
  return {{"kind", "slurm"}, {"shared", config_.shared.string()}, {"queue_polls", tracker_->polls()}};
}

SlurmJobInput SlurmExecutor::inputFor(const AttemptExecution& e) const {
  SlurmJobInput in;
  in.spec.attempt_id = e.attempt.id;
  in.spec.run_id = e.attempt.runId;
  in.spec.task_id = e.task.id;
  in.spec.task_hash = e.task.content_hash;
  in.spec.agent = agentToJson(e.plan.agent);
  in.spec.agent_time_limit_s = e.plan.agent_time_limit_s;
  in.spec.snapshot = e.plan.snapshot;
  in.spec.images_dir = fs::absolute(setup_.images_dir).string();  // the job runs in its own folder
  in.spec.akacheck = fs::absolute(setup_.akacheck).string();
  in.spec.allow_agent_network = setup_.allow_agent_network;
  in.spec.workspace_bytes = setup_.workspace_limits.bytes;
  in.spec.workspace_inodes = setup_.workspace_limits.inodes;
  in.spec.sandbox_uid = setup_.sandbox_uid;
  in.spec.sandbox_gid = setup_.sandbox_gid;
  // The attempt's own uid, unique among every attempt this front end runs, on any node.
  if (e.candidate_uid) in.spec.candidate_uid = *e.candidate_uid;
  in.spec.node_cache = config_.node_cache.string();
  in.needs_gpu = e.task.gpu;
  in.memory_bytes = e.task.limits.memory_bytes;
  if (account_of_) in.account = account_of_(static_cast<uid_t>(e.run.submitterUid));
  in.task_def_root = taskVersionRoot(tasks_dir_, e.task.content_hash);
  in.credentials = e.plan.credentials;
  return in;
}

Result<json> SlurmExecutor::execute(const AttemptExecution& e) {
  const SlurmJobInput in = inputFor(e);
  std::error_code ec;
  const fs::path jobs = config_.shared / "jobs";
  fs::create_directories(jobs, ec);
  if (ec) return Error{"cannot create " + jobs.string() + ": " + ec.message()};
  JobDir dir{jobs / ("a" + std::to_string(in.spec.attempt_id) + "-" + nonce())};
  if (::mkdir(dir.path.c_str(), 0700) != 0) return Error{"cannot create " + dir.path.string() + ": " + std::strerror(errno)};
  if (auto s = publishTree(in.task_def_root, taskVersionRoot(config_.shared / "tasks", in.spec.task_hash)); !s) return s.error();
  if (in.spec.snapshot)
    if (auto s = snapshots_.exportTo(*in.spec.snapshot, dir.path / "snapshot.tar.zst"); !s) return s.error();
  if (auto s = writeFileDurably(dir.path / "spec.json", toJson(in.spec).dump(1) + "\n"); !s) return s.error();
  if (!in.credentials.empty())
    if (auto s = writeFileDurably(dir.path / "credentials.json", json(in.credentials).dump(), 0600); !s) return s.error();

  auto submitted = runCommand(sbatchCommand(config_, in, dir.path));
  if (!submitted) return submitted.error();
  if (submitted->exit_code != 0) return Error{"sbatch refused the attempt: " + submitted->err.substr(0, 500)};
  const std::string job = submitted->out.substr(0, submitted->out.find_first_of(";\n"));
  if (job.empty() || job.find_first_not_of("0123456789") != std::string::npos)
    return Error{"sbatch answered '" + submitted->out.substr(0, 100) + "' instead of a job id"};
  log::info("attempt ", in.spec.attempt_id, ": Slurm job ", job);
  // The job id beside the spec, so a restarted front end knows which job the folder is for.
  if (auto s = writeFileDurably(dir.path / "job", job + "\n"); !s)
    log::warn("attempt ", in.spec.attempt_id, ": ", s.error().message);
  if (e.on_placed) e.on_placed(job, "");
  return follow(e, job, dir.path);
}

std::map<std::int64_t, uid_t> SlurmExecutor::resumable(const std::vector<AttemptRecord>& running) {
  std::map<std::int64_t, const AttemptRecord*> byId;
  for (const auto& a : running) byId[a.id] = &a;
  std::map<std::int64_t, uid_t> resumed;
  std::error_code ec;
  for (const auto& d : fs::directory_iterator(config_.shared / "jobs", ec)) {
    const std::int64_t id = attemptOfDir(d.path());
    auto it = byId.find(id);
    const std::string job = readSmall(d.path() / "job");
    const bool followable = it != byId.end() && !resumed.count(id) && !job.empty() &&
                            it->second->executorJob && *it->second->executorJob == job;
    if (!followable) {
      removeOrphan(d.path());
      continue;
    }
    // The uid the job's candidate runs as stays taken while it runs.
    uid_t uid = 0;
    if (auto text = readFileLimited(d.path() / "spec.json", 1 << 20))
      if (auto spec = specFromJson(json::parse(*text, nullptr, false))) uid = spec->candidate_uid;
    resumed[id] = uid;
    std::lock_guard lock(mutex_);
    resumed_dirs_[id] = d.path();
  }
  if (!resumed.empty()) log::info("following ", resumed.size(), " Slurm job(s) a previous daemon left running");
  return resumed;
}

Result<json> SlurmExecutor::resume(const AttemptExecution& e) {
  fs::path path;
  {
    std::lock_guard lock(mutex_);
    auto it = resumed_dirs_.find(e.attempt.id);
    if (it == resumed_dirs_.end()) return Error{"no Slurm job folder to follow for attempt " + std::to_string(e.attempt.id)};
    path = it->second;
    resumed_dirs_.erase(it);
  }
  JobDir dir{path};
  const std::string job = readSmall(dir.path / "job");
  if (job.empty()) return Error{"the Slurm job folder " + path.string() + " names no job"};
  return follow(e, job, dir.path);
}

void SlurmExecutor::cancelJob(const std::string& job) {
  (void)runCommand({"scancel", job});
  // Until Slurm has ended it: the job's processes may still write into the folder.
  tracker_->follow(job);
  std::uint64_t seen = 0;
  for (int i = 0; i < 120; ++i) {
    auto s = tracker_->next(job, seen);
    seen = s.poll;
    if (s.state && terminalState(s.state->state)) break;
  }
  tracker_->forget(job);
}

void SlurmExecutor::removeOrphan(const fs::path& dir) {
  const std::string job = readSmall(dir / "job");
  if (!job.empty() && job.find_first_not_of("0123456789") == std::string::npos) {
    log::info("cancelling Slurm job ", job, ": its attempt is no longer followed (", dir.filename().string(), ")");
    cancelJob(job);
  } else if (attemptOfDir(dir) > 0) {
    // Submitted just before the last daemon died, before it wrote the job id down: by name.
    const std::string name = "akad-" + dir.filename().string();
    (void)runCommand({"scancel", "--name=" + name});
  }
  std::error_code ec;
  fs::remove_all(dir, ec);
}

Result<json> SlurmExecutor::follow(const AttemptExecution& e, const std::string& job, const fs::path& dir) {
  tracker_->follow(job);
  struct Forget {
    JobTracker& t;
    const std::string& job;
    ~Forget() { t.forget(job); }
  } forget{*tracker_, job};
  JobState last;
  std::string lastNode = e.attempt.executorNode.value_or(""), lastStage;
  std::uint64_t seen = 0;
  for (;;) {
    if (e.canceller && e.canceller->cancelled()) {
      cancelJob(job);
      return Error{"cancelled"};
    }
    auto sample = tracker_->next(job, seen);
    seen = sample.poll;
    if (!sample.state) continue;  // logged by the tracker; Slurm may be back at the next poll
    last = *sample.state;
    if (!last.node.empty() && last.node != lastNode) {
      lastNode = last.node;
      if (e.on_placed) e.on_placed(job, lastNode);
    }
    std::string stage;
    if (last.state == "PENDING" || last.state == "REQUEUED")
      stage = "slurm: " + std::string(last.restarts > 0 ? "requeued, " : "") + "pending (" + last.reason + ")";
    else
      stage = readSmall(dir / incarnationName(job, last.restarts) / "stage");
    if (!stage.empty() && stage != lastStage) {
      lastStage = stage;
      if (e.on_stage) e.on_stage(stage);
    }
    if (terminalState(last.state)) break;
  }

  const fs::path out = dir / incarnationName(job, last.restarts);
  const fs::path resultFile = out / "result.json";
  std::error_code ec;
  if (!fs::exists(resultFile, ec)) {
    std::string tail = readSmall(dir / ("slurm-" + job + ".out"));
    if (tail.size() > 1000) tail = tail.substr(tail.size() - 1000);
    return Error{"Slurm job " + job + " ended (" + (last.state.empty() ? std::string("gone") : last.state) +
                 ") without a result" + (tail.empty() ? std::string() : ": " + tail)};
  }
  auto text = readFileLimited(resultFile, 64 << 20);
  if (!text) return text.error();
  json r = json::parse(*text, nullptr, false);
  if (!r.is_object() || !r.contains("ok") || !r["ok"].is_boolean())
    return Error{"Slurm job " + job + " left a malformed result"};
  if (!r["ok"].get<bool>()) return Error{r.value("error", std::string("the node program failed"))};
  if (r.contains("snapshot") && r["snapshot"].is_string()) {
    const std::string sha = r["snapshot"];
    auto m = snapshots_.importVerified(out / "snapshot.tar.zst", sha);
    if (!m) return Error{"the snapshot Slurm job " + job + " made: " + m.error().message};
    if (e.on_snapshot)
      if (auto s = e.on_snapshot(sha); !s) return s.error();
  }
  if (!r.contains("result")) return Error{"Slurm job " + job + " left no result"};
  json result = r["result"];
  if (result.is_object())
    result["executor"] = {{"kind", "slurm"},
                          {"job", job},
                          {"node", lastNode},
                          {"restarts", last.restarts},
                          {"node_finished_at", r.value("finished_at", std::string())}};
  return result;
}

}  // namespace akad::slurm
