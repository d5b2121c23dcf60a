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
#include "daemon/pipeline/files.h"

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

// `Key=value` from scontrol's one-line output (values run to the next space).
std::string field(const std::string& line, const std::string& key) {
  const std::string k = " " + key + "=";
  auto at = (" " + line).find(k);
  if (at == std::string::npos) return "";
  const size_t from = at + k.size() - 1;
  const size_t to = line.find(' ', from);
  return line.substr(from, to == std::string::npos ? std::string::npos : to - from);
}

bool terminal(const std::string& state) {
  static const std::set<std::string> done = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "OUT_OF_MEMORY",
                                             "BOOT_FAIL", "DEADLINE", "PREEMPTED", "SPECIAL_EXIT", ""};
  return done.count(state) > 0;
}

std::string readSmall(const fs::path& p) {
  std::ifstream in(p);
  std::string s((std::istreambuf_iterator<char>(in)), {});
  if (s.size() > 4096) s.resize(4096);
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

// Removes the job's folder on every way out.
struct JobDir {
  fs::path path;
  ~JobDir() {
    std::error_code ec;
    if (!path.empty()) fs::remove_all(path, ec);
  }
};

}  // namespace

std::vector<std::string> sbatchCommand(const SlurmConfig& c, const SlurmJobInput& in, const fs::path& jobDir) {
  std::vector<std::string> cmd = {"sbatch", "--parsable", "--requeue",
                                  "--job-name", "akad-a" + std::to_string(in.spec.attempt_id),
                                  "--chdir", jobDir.string(),
                                  "--output", (jobDir / "slurm-%j.out").string()};
  if (!c.partition.empty()) cmd.insert(cmd.end(), {"--partition", c.partition});
  const std::string account = in.account.empty() ? c.account : in.account;
  if (!account.empty()) cmd.insert(cmd.end(), {"--account", account});
  if (!c.qos.empty()) cmd.insert(cmd.end(), {"--qos", c.qos});
  if (c.time_limit_min > 0) cmd.insert(cmd.end(), {"--time", std::to_string(c.time_limit_min)});
  if (in.needs_gpu) cmd.insert(cmd.end(), {"--gres", c.gres + ":1"});
  cmd.insert(cmd.end(), {"--wrap", "exec " + shellQuote(c.node_program.string()) + " run --job " + shellQuote(jobDir.string())});
  return cmd;
}

Result<JobState> queryJob(const std::string& job) {
  auto r = runCommand({"scontrol", "show", "job", "-o", job});
  if (!r) return r.error();
  if (r->exit_code != 0) {
    if (r->err.find("Invalid job id") != std::string::npos) return JobState{};
    return Error{"scontrol show job " + job + " failed: " + r->err.substr(0, 300)};
  }
  JobState s;
  s.state = field(r->out, "JobState");
  s.reason = field(r->out, "Reason");
  s.node = field(r->out, "NodeList");
  if (s.node == "(null)") s.node.clear();
  try {
    s.restarts = std::stoi(field(r->out, "Restarts"));
  } catch (...) {
    s.restarts = 0;
  }
  return s;
}

Result<json> runOnSlurm(const SlurmConfig& c, const SlurmJobInput& in, snapshot::SnapshotStore& snapshots,
                        const SlurmHooks& hooks) {
  std::error_code ec;
  const fs::path jobs = c.shared / "jobs";
  fs::create_directories(jobs, ec);
  if (ec) return Error{"cannot create " + jobs.string() + ": " + ec.message()};
  JobDir dir{jobs / ("a" + std::to_string(in.spec.attempt_id) + "-" + nonce())};
  if (::mkdir(dir.path.c_str(), 0700) != 0) return Error{"cannot create " + dir.path.string() + ": " + std::strerror(errno)};
  if (auto s = publishTree(in.task_def_root, c.shared / "tasks" / in.spec.task_hash / "def"); !s) return s.error();
  if (in.spec.snapshot)
    if (auto s = snapshots.exportTo(*in.spec.snapshot, dir.path / "snapshot.tar.zst"); !s) return s.error();
  if (auto s = writeFileDurably(dir.path / "spec.json", toJson(in.spec).dump(1) + "\n"); !s) return s.error();
  if (!in.credentials.empty())
    if (auto s = writeFileDurably(dir.path / "credentials.json", json(in.credentials).dump(), 0600); !s) return s.error();

  auto submitted = runCommand(sbatchCommand(c, in, dir.path));
  if (!submitted) return submitted.error();
  if (submitted->exit_code != 0) return Error{"sbatch refused the attempt: " + submitted->err.substr(0, 500)};
  const std::string job = submitted->out.substr(0, submitted->out.find_first_of(";\n"));
  if (job.empty() || job.find_first_not_of("0123456789") != std::string::npos)
    return Error{"sbatch answered '" + submitted->out.substr(0, 100) + "' instead of a job id"};
  log::info("attempt ", in.spec.attempt_id, ": Slurm job ", job);
  if (hooks.on_job) hooks.on_job(job, "");

  JobState last;
  std::string lastNode, lastStage;
  const auto interval = std::chrono::milliseconds(static_cast<int>(c.poll_interval_s * 1000));
  for (;;) {
    if (hooks.canceller && hooks.canceller->cancelled()) {
      (void)runCommand({"scancel", job});
      // Until Slurm has ended it: the job's processes may still write into the folder.
      for (int i = 0; i < 120; ++i) {
        auto st = queryJob(job);
        if (!st || terminal(st->state)) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(250));
      }
      return Error{"cancelled"};
    }
    auto st = queryJob(job);
    if (!st) {
      log::warn("attempt ", in.spec.attempt_id, ": ", st.error().message);
      std::this_thread::sleep_for(interval);
      continue;
    }
    last = *st;
    if (!last.node.empty() && last.node != lastNode) {
      lastNode = last.node;
      if (hooks.on_job) hooks.on_job(job, lastNode);
    }
    std::string stage;
    if (last.state == "PENDING" || last.state == "REQUEUED")
      stage = "slurm: " + std::string(last.restarts > 0 ? "requeued, " : "") + "pending (" + last.reason + ")";
    else
      stage = readSmall(dir.path / incarnationName(job, last.restarts) / "stage");
    if (!stage.empty() && stage != lastStage) {
      lastStage = stage;
      if (hooks.on_stage) hooks.on_stage(stage);
    }
    if (terminal(last.state)) break;
    std::this_thread::sleep_for(interval);
  }

  const fs::path out = dir.path / incarnationName(job, last.restarts);
  const fs::path resultFile = out / "result.json";
  if (!fs::exists(resultFile, ec)) {
    std::string tail = readSmall(dir.path / ("slurm-" + job + ".out"));
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
    auto m = snapshots.importVerified(out / "snapshot.tar.zst", sha);
    if (!m) return Error{"the snapshot Slurm job " + job + " made: " + m.error().message};
    if (hooks.on_snapshot)
      if (auto s = hooks.on_snapshot(sha); !s) return s.error();
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
