#include "daemon/pipeline_methods.h"

#include <algorithm>
#include <fstream>
#include <set>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "common/log.h"
#include "common/protocol.h"
#include "daemon/aka/import.h"
#include "daemon/aka/methods.h"
#include "daemon/gpu_leases.h"
#include "daemon/held_out_view.h"
#include "daemon/pipeline/agent.h"
#include "daemon/pipeline/files.h"
#include "daemon/pipeline/image.h"
#include "daemon/pipeline/report.h"
#include "daemon/pipeline/validate.h"
#include "daemon/scheduler.h"
#include "daemon/snapshot/store.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace akad {
namespace proto = protocol;

namespace {

constexpr std::size_t kMaxLogBytes = 1 << 20;
constexpr std::size_t kExportChunkBytes = 256 << 10;

Error invalid(const std::string& message) { return Error{message, proto::kInvalidParams}; }

// The attempt, when the caller may see it: its run's submitter or an admin.
Result<AttemptRecord> attemptFor(DaemonContext& ctx, const Peer& peer, std::int64_t id) {
  auto a = ctx.store.getAttempt(id);
  if (!a) return a.error();
  auto run = ctx.store.getRun(a->runId);
  if (!run) return run.error();
  if (auto s = ctx.tenants.mayAccess(peer, run->submitterUid, "attempt " + std::to_string(id)); !s) return s.error();
  return a;
}

// Whether the caller may see a snapshot: an admin, or a tenant one of whose runs recorded it
// (a snapshot is content-addressed: two tenants whose agents left the same files share it).
Status maySeeSnapshot(DaemonContext& ctx, const Peer& peer, const std::string& sha) {
  if (ctx.tenants.isAdmin(peer)) return {};
  auto mine = ctx.store.snapshotsOf(peer.uid);
  if (!mine) return mine.error();
  return ctx.tenants.mayAccess(peer, mine->count(sha) > 0, "snapshot " + sha);
}

// The background jobs in flight, so shut-down can stop them before the context goes away.
struct BackgroundJobs {
  std::mutex mutex;
  std::condition_variable idle;
  int running = 0;
  bool stopping = false;
  std::set<SandboxCanceller*> cancellers;
};
BackgroundJobs& jobs() {
  static BackgroundJobs j;
  return j;
}

// Holds a job's place in BackgroundJobs for as long as it runs; false if the daemon is stopping.
class BackgroundJob {
 public:
  BackgroundJob() {
    std::lock_guard lock(jobs().mutex);
    accepted_ = !jobs().stopping;
    if (accepted_) {
      ++jobs().running;
      jobs().cancellers.insert(&canceller_);
    }
  }
  ~BackgroundJob() {
    if (!accepted_) return;
    std::lock_guard lock(jobs().mutex);
    jobs().cancellers.erase(&canceller_);
    --jobs().running;
    jobs().idle.notify_all();
  }
  bool accepted() const { return accepted_; }
  bool stopping() const { return canceller_.cancelled(); }
  SandboxCanceller* canceller() { return &canceller_; }

 private:
  bool accepted_ = false;
  SandboxCanceller canceller_;
};

Error noExecutor() {
  return Error{"this daemon runs without an executor (--workers 0)", proto::kConflict};
}

bool isSha256(const std::string& s) {
  if (s.size() != 64) return false;
  for (char c : s)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return true;
}

Result<std::string> readSha(const json& params) {
  auto sha = proto::requireString(params, "snapshot");
  if (!sha) return sha.error();
  if (!isSha256(*sha)) return invalid("parameter \"snapshot\" must be a SHA-256 in lower-case hex");
  return *sha;
}

std::vector<AttemptOutcome> outcomesOf(const std::vector<AttemptRecord>& attempts) {
  std::vector<AttemptOutcome> out;
  for (const auto& a : attempts)
    out.push_back({std::to_string(a.id), a.taskId, a.state, a.result ? *a.result : json(), a.error.value_or("")});
  return out;
}

// The log files of one stage of an attempt, newest scoring first.
std::vector<fs::path> logFilesFor(const fs::path& attemptDir, const std::string& stage) {
  std::vector<fs::path> files;
  if (stage == "agent") return {attemptDir / "logs" / "agent.out", attemptDir / "logs" / "agent.err"};
  if (stage == "network") return {attemptDir / "logs" / "network.jsonl"};
  std::vector<fs::path> scorings;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(attemptDir, ec))
    if (e.path().filename().string().rfind("score-", 0) == 0) scorings.push_back(e.path());
  std::sort(scorings.begin(), scorings.end(), [](const fs::path& a, const fs::path& b) {
    std::error_code e1, e2;
    return fs::last_write_time(a, e1) > fs::last_write_time(b, e2);
  });
  if (scorings.empty()) return files;
  const fs::path logs = scorings.front() / "gates" / "logs";
  static const std::map<std::string, std::vector<std::string>> prefixes = {
      {"compile", {"compile"}},
      {"generate", {"reference-generate"}},
      {"correctness", {"visible-check"}},
      {"performance", {"visible-perf"}},
      {"held_out", {"held_out-"}}};
  auto it = prefixes.find(stage);
  std::vector<fs::path> all;
  for (const auto& e : fs::directory_iterator(logs, ec)) all.push_back(e.path());
  std::sort(all.begin(), all.end());
  for (const auto& p : all) {
    const std::string name = p.filename().string();
    if (it == prefixes.end()) files.push_back(p);
    else
      for (const auto& pre : it->second)
        if (name.rfind(pre, 0) == 0) files.push_back(p);
  }
  return files;
}

void validateTasks(DaemonContext& ctx, const json& params, std::shared_ptr<Responder> r) {
  if (auto s = proto::allowOnly(params, {"tasks", "min_speedup"}); !s) return r->finish(s.error());
  std::vector<std::string> selectors;
  if (auto t = params.find("tasks"); t != params.end()) {
    if (!t->is_array()) return r->finish(invalid("parameter \"tasks\" must be an array of selectors"));
    for (const auto& s : *t) {
      if (!s.is_string()) return r->finish(invalid("parameter \"tasks\" must be an array of strings"));
      selectors.push_back(s.get<std::string>());
    }
  }
  double minSpeedup = 1.2;
  if (auto m = params.find("min_speedup"); m != params.end()) {
    if (!m->is_number() || m->get<double>() < 0) return r->finish(invalid("parameter \"min_speedup\" must be a number >= 0"));
    minSpeedup = m->get<double>();
  }
  if (selectors.empty()) {
    auto all = ctx.tasks.list();
    if (!all) return r->finish(all.error());
    selectors = *all;
  }
  auto ids = ctx.tasks.resolve(selectors);
  if (!ids) return r->finish(ids.error());
  if (ctx.scheduler == nullptr) return r->finish(noExecutor());
  // Validation runs many sandboxes: off the server thread, answering through the responder.
  std::thread([&ctx, ids = *ids, minSpeedup, r] {
    BackgroundJob job;
    if (!job.accepted()) return r->finish(Error{"the daemon is shutting down", proto::kShuttingDown});
    json results = json::array();
    bool allOk = true;
    for (const auto& id : ids) {
      if (r->done() || job.stopping()) return r->finish(Error{"validation stopped", proto::kShuttingDown});
      json row = {{"task", id}};
      auto task = ctx.tasks.load(id);
      if (!task) {
        row["ok"] = false;
        row["problems"] = {task.error().message};
      } else {
        r->event({{"task", id}, {"state", "validating"}});
        const auto& cfg = ctx.scheduler->config();
        ScoringEnvironment env;
        env.tasks_root = ctx.tasks.root();
        env.trusted_cache = ctx.stateDir / "tasks";  // the scheduler's: one trusted build per task version
        env.akacheck = cfg.akacheck;
        env.sandbox_uid = cfg.sandbox_uid;
        env.sandbox_gid = cfg.sandbox_gid;
        env.canceller = job.canceller();
        auto image = loadImageProfile(ctx.imagesDir, task->image);
        std::unique_ptr<GpuLease> lease;
        if (task->gpu) {
          auto g = ctx.gpus->acquire("tasks validate " + id, "", [&] { return r->done() || job.stopping(); });
          if (g) {
            lease = std::make_unique<GpuLease>(*ctx.gpus, g);
            env.gpus = {g->id};
          }
        }
        if (!image) {
          row["ok"] = false;
          row["problems"] = {image.error().message};
        } else if (task->gpu && env.gpus.empty()) {
          row["ok"] = false;
          row["problems"] = {"the task needs a GPU and this daemon has none free"};
        } else {
          env.image = *image;
          auto v = validateTask(*task, env, ctx.stateDir / "validate" / randomHex(4), minSpeedup);
          if (v) row = *v;
          else {
            row["ok"] = false;
            row["problems"] = {v.error().message};
          }
        }
      }
      allOk = allOk && row.value("ok", false);
      r->event({{"task", id}, {"state", "done"}, {"result", row}});
      results.push_back(row);
    }
    r->finish(json{{"ok", allOk}, {"tasks", results}});
  }).detach();
}

void exportSnapshot(DaemonContext& ctx, const Peer& peer, const json& params, std::shared_ptr<Responder> r) {
  if (auto s = proto::allowOnly(params, {"snapshot"}); !s) return r->finish(s.error());
  auto sha = readSha(params);
  if (!sha) return r->finish(sha.error());
  if (ctx.snapshots == nullptr) return r->finish(noExecutor());
  if (auto s = maySeeSnapshot(ctx, peer, *sha); !s) return r->finish(s.error());
  std::thread([&ctx, sha = *sha, r] {
    BackgroundJob job;
    if (!job.accepted()) return r->finish(Error{"the daemon is shutting down", proto::kShuttingDown});
    auto path = ctx.snapshots->openVerified(sha);
    if (!path) return r->finish(Error{path.error().message, proto::kNotFound});
    auto manifest = ctx.snapshots->manifest(sha);
    if (!manifest) return r->finish(manifest.error());
    std::ifstream in(*path, std::ios::binary);
    std::string buf(kExportChunkBytes, '\0');
    static const char* b64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    while (in && !r->done() && !job.stopping()) {
      in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
      std::size_t n = static_cast<std::size_t>(in.gcount());
      if (n == 0) break;
      std::string enc;
      enc.reserve((n + 2) / 3 * 4);
      for (std::size_t i = 0; i < n; i += 3) {
        uint32_t v = static_cast<unsigned char>(buf[i]) << 16;
        if (i + 1 < n) v |= static_cast<unsigned char>(buf[i + 1]) << 8;
        if (i + 2 < n) v |= static_cast<unsigned char>(buf[i + 2]);
        enc += b64[(v >> 18) & 63];
        enc += b64[(v >> 12) & 63];
        enc += i + 1 < n ? b64[(v >> 6) & 63] : '=';
        enc += i + 2 < n ? b64[v & 63] : '=';
      }
      r->event({{"chunk", enc}});
    }
    r->finish(json{{"snapshot", sha}, {"manifest", manifest->toJson()}});
  }).detach();
}

}  // namespace

void stopPipelineJobs() {
  std::unique_lock lock(jobs().mutex);
  jobs().stopping = true;
  for (SandboxCanceller* c : jobs().cancellers) c->cancel();
  jobs().idle.wait(lock, [] { return jobs().running == 0; });
}

void registerPipelineMethods(MethodTable& table, DaemonContext& ctx) {
  table.addOffloaded("run.report", [&ctx](const Peer& peer, const json& params) -> Result<json> {
    if (auto s = proto::allowOnly(params, {"id"}); !s) return s.error();
    auto id = proto::requireString(params, "id");
    if (!id) return id.error();
    auto run = ctx.store.getRun(*id);
    if (!run) return run.error();
    if (auto s = ctx.tenants.mayAccess(peer, run->submitterUid, "run " + *id); !s) return s.error();
    auto attempts = ctx.store.attemptsOf(*id);
    if (!attempts) return attempts.error();
    auto outcomes = outcomesOf(*attempts);
    json report = runReport(outcomes);
    const HeldOutView view = HeldOutView::forCaller(ctx.tenants.isAdmin(peer), ctx.stateDir, *attempts);
    return json{{"run", run->toJson()}, {"report", view.names(report)}, {"csv", view.text(runReportCsv(outcomes))}};
  });

  table.addOffloaded("attempt.get", [&ctx](const Peer& peer, const json& params) -> Result<json> {
    if (auto s = proto::allowOnly(params, {"id"}); !s) return s.error();
    auto id = proto::optionalInt(params, "id", -1, 1, INT64_MAX);
    if (!id) return id.error();
    if (*id < 0) return invalid("missing parameter \"id\" (an attempt number)");
    auto a = attemptFor(ctx, peer, *id);
    if (!a) return a.error();
    return json{{"attempt", HeldOutView::forCaller(ctx.tenants.isAdmin(peer), ctx.stateDir, {*a}).attempt(a->toJson())}};
  });

  table.addOffloaded("attempt.logs", [&ctx](const Peer& peer, const json& params) -> Result<json> {
    if (auto s = proto::allowOnly(params, {"id", "stage"}); !s) return s.error();
    auto id = proto::optionalInt(params, "id", -1, 1, INT64_MAX);
    if (!id) return id.error();
    if (*id < 0) return invalid("missing parameter \"id\" (an attempt number)");
    auto stage = proto::optionalString(params, "stage");
    if (!stage) return stage.error();
    static const std::set<std::string> stages = {"agent", "network", "compile", "generate", "correctness", "performance", "held_out", "all"};
    const std::string which = stage->value_or("all");
    if (!stages.count(which)) return invalid("parameter \"stage\" must be one of agent, network, compile, generate, correctness, performance, held_out, all");
    auto a = attemptFor(ctx, peer, *id);
    if (!a) return a.error();
    const fs::path dir = ctx.stateDir / "attempts" / std::to_string(*id);
    std::vector<fs::path> files;
    for (const std::string& st : which == "all" ? std::vector<std::string>{"agent", "network", "scoring"} : std::vector<std::string>{which}) {
      auto part = logFilesFor(dir, st);
      files.insert(files.end(), part.begin(), part.end());
    }
    // A tenant who is not an admin gets the held-out gates (and the reference's generation of
    // their inputs) as a summary by opaque id, never their raw logs.
    const bool admin = ctx.tenants.isAdmin(peer);
    const HeldOutView view = HeldOutView::forCaller(admin, ctx.stateDir, {*a});
    auto heldOutLog = [](const fs::path& f) {
      const std::string name = f.filename().string();
      return name.rfind("held_out", 0) == 0 || name.rfind("reference-generate", 0) == 0;
    };
    json logs = json::array();
    bool summarised = false;
    for (const auto& f : files) {
      if (!fs::exists(f)) continue;
      if (!admin && heldOutLog(f)) {
        if (!summarised)
          logs.push_back({{"file", "held_out (summary)"},
                          {"text", HeldOutView::logSummary(view.attempt(a->toJson()).value("result", json()))}});
        summarised = true;
        continue;
      }
      logs.push_back({{"file", view.text(fs::relative(f, dir).string())}, {"text", view.text(tailOfFile(f, kMaxLogBytes))}});
    }
    return json{{"attempt", *id}, {"stage", which}, {"logs", logs}};
  });

  table.addOffloaded("run.reproduce", [&ctx](const Peer& peer, const json& params) -> Result<json> {
    if (auto s = proto::allowOnly(params, {"snapshot"}); !s) return s.error();
    auto sha = readSha(params);
    if (!sha) return sha.error();
    if (ctx.scheduler == nullptr || ctx.snapshots == nullptr) return noExecutor();
    // Re-scoring another tenant's snapshot would hand its kernel, and its scores, to the caller.
    if (auto s = maySeeSnapshot(ctx, peer, *sha); !s) return s.error();
    auto manifest = ctx.snapshots->manifest(*sha);
    if (!manifest) return Error{"no snapshot " + *sha + " in the store: " + manifest.error().message, proto::kNotFound};
    auto original = ctx.store.attemptWithSnapshot(*sha);
    if (!original) return original.error();
    const json& meta = manifest->metadata;
    std::string taskId = meta.value("task", std::string());
    std::string taskHash = meta.value("task_hash", std::string());
    if (*original) {
      taskId = (*original)->taskId;
      taskHash = (*original)->taskHash.value_or(taskHash);
    }
    if (taskId.empty() || taskHash.empty()) return invalid("snapshot " + *sha + " names no task; it cannot be re-scored");
    if (!fs::exists(ctx.stateDir / "tasks" / taskHash / "def"))
      return Error{"the task version " + taskHash + " of snapshot " + *sha + " is not in this daemon's state", proto::kNotFound};
    NewRun run;
    run.label = "reproduce " + sha->substr(0, 12);
    run.taskIds = {taskId};
    run.taskHashes[taskId] = taskHash;
    run.snapshot = *sha;
    if (*original && (*original)->needsGpu) run.tasksNeedingGpu.insert(taskId);
    run.agentCommand = "re-score of snapshot " + *sha;
    run.submitterUid = peer.uid;
    run.submitterGid = peer.gid;
    run.params = {{"reproduce", *sha},
                  {"original_attempt", *original ? json((*original)->id) : json(nullptr)},
                  {"task_ids", {taskId}}, {"options", json::object()}};
    if (auto s = applyTenantLimits(run, peer, ctx.tenants); !s) return s.error();
    auto change = ctx.store.submitRun(run);
    if (!change) return change.error();
    for (const auto& ev : change->events) ctx.events.publish(ev);
    ctx.scheduler->wake();
    json out = {{"run", change->run.toJson()}};
    if (*original)
      out["original"] = HeldOutView::forCaller(ctx.tenants.isAdmin(peer), ctx.stateDir, {**original}).attempt((*original)->toJson());
    return out;
  });

  table.addOffloaded("tasks.list", [&ctx](const Peer&, const json& params) -> Result<json> {
    if (auto s = proto::allowOnly(params, {}); !s) return s.error();
    auto scan = scanTasks(ctx.tasks.root());
    // Imported AgentKernelArena tasks are tasks like any other; "aka" adds every verdict of
    // their imports, the refused ones with their reasons (daemon/aka/).
    auto imported = scanTasks(aka::importedTasksRoot(ctx.stateDir));
    scan.tasks.insert(scan.tasks.end(), imported.tasks.begin(), imported.tasks.end());
    scan.errors.insert(scan.errors.end(), imported.errors.begin(), imported.errors.end());
    json tasks = json::array();
    for (const auto& t : scan.tasks)
      tasks.push_back({{"id", t.id}, {"title", t.title}, {"gpu", t.gpu}, {"image", t.image},
                       {"hash", t.content_hash}, {"visible", t.visible.size()}, {"held_out", t.held_out.size()}});
    return json{{"tasks", tasks}, {"errors", scan.errors}, {"aka", akaTaskListing(ctx.stateDir)}};
  });

  table.addStream("tasks.validate", [&ctx](const Peer& peer, const json& params, std::shared_ptr<Responder> r) {
    // It scores the reference solutions: an admin's tool, and it would show them to a tenant.
    if (auto s = ctx.tenants.mustBeAdmin(peer, "validate tasks"); !s) return r->finish(s.error());
    validateTasks(ctx, params, std::move(r));
  });

  table.addOffloaded("agents.list", [&ctx](const Peer&, const json& params) -> Result<json> {
    if (auto s = proto::allowOnly(params, {}); !s) return s.error();
    json agents = json::array();
    for (const auto& a : listAgents(ctx.agentsDir))
      agents.push_back({{"name", a.name}, {"description", a.description}, {"network", a.network_host ? "host" : a.network_allow ? "allow" : "none"},
                        {"time_limit_s", a.time_limit_s}, {"credentials", a.credentials}, {"template", a.template_only},
                        {"image", a.image.empty() ? json(nullptr) : json(a.image)}});
    return json{{"agents", agents}};
  });

  table.add("gpus.list", [&ctx](const Peer&, const json& params) -> Result<json> {
    if (auto s = proto::allowOnly(params, {}); !s) return s.error();
    return json{{"gpus", ctx.gpus ? ctx.gpus->describe() : json::array()}};
  });

  table.addOffloaded("snapshot.list", [&ctx](const Peer& peer, const json& params) -> Result<json> {
    if (auto s = proto::allowOnly(params, {}); !s) return s.error();
    if (ctx.snapshots == nullptr) return noExecutor();
    json all = ctx.snapshots->listJson();  // {"snapshots": [...]}
    if (ctx.tenants.isAdmin(peer)) return all;
    auto mine = ctx.store.snapshotsOf(peer.uid);
    if (!mine) return mine.error();
    json shown = json::array();
    for (const json& s : all.at("snapshots"))
      if (mine->count(s.value("sha256", std::string()))) shown.push_back(s);
    return json{{"snapshots", shown}};
  });

  table.addOffloaded("snapshot.show", [&ctx](const Peer& peer, const json& params) -> Result<json> {
    if (auto s = proto::allowOnly(params, {"snapshot"}); !s) return s.error();
    auto sha = readSha(params);
    if (!sha) return sha.error();
    if (ctx.snapshots == nullptr) return noExecutor();
    if (auto s = maySeeSnapshot(ctx, peer, *sha); !s) return s.error();
    auto shown = ctx.snapshots->showJson(*sha);
    if (!shown) return Error{shown.error().message, proto::kNotFound};
    return *shown;
  });

  table.addStream("snapshot.export", [&ctx](const Peer& peer, const json& params, std::shared_ptr<Responder> r) {
    exportSnapshot(ctx, peer, params, std::move(r));
  });

  table.addOffloaded("snapshot.gc", [&ctx](const Peer& peer, const json& params) -> Result<json> {
    if (auto s = proto::allowOnly(params, {}); !s) return s.error();
    if (auto s = ctx.tenants.mustBeAdmin(peer, "collect garbage in the snapshot store"); !s) return s.error();
    if (ctx.snapshots == nullptr) return noExecutor();
    auto referenced = ctx.store.referencedSnapshots();
    if (!referenced) return referenced.error();
    auto report = ctx.snapshots->gc(*referenced);
    if (!report) return report.error();
    return report->toJson();
  });
}

}  // namespace akad
