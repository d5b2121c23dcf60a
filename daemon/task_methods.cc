#include "daemon/pipeline_methods.h"

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <thread>

#include "daemon/aka/import.h"
#include "daemon/aka/methods.h"
#include "daemon/background_jobs.h"
#include "daemon/gpu_leases.h"
#include "daemon/pipeline/files.h"
#include "daemon/pipeline/image.h"
#include "daemon/pipeline/validate.h"
#include "daemon/scheduler.h"

#include "common/protocol.h"
#include "daemon/method_checks.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace akad {
namespace proto = protocol;

namespace {

constexpr int64_t kMaxValidateParallel = 64;

// The GPU request of a task's image (gpu_eligibility.h's rule, with no model asked for).
GpuRequest gpuRequestOfTask(DaemonContext& ctx, const Task& task) {
  auto image = loadImageProfile(ctx.imagesDir, task.image);
  return gpuRequestOf(image ? image->requires_gpu_vendor : "", json::object());
}

// One task of a tasks.validate: its image, a GPU if it needs one (`shared`: the request's lease
// for tasks validated side by side, else one of its own), then validateTask. Returns the row.
json validateOne(DaemonContext& ctx, const std::string& id, double minSpeedup, BackgroundJob& job,
                 const std::shared_ptr<Responder>& r, const std::vector<std::string>& shared) {
  json row = {{"task", id}};
  auto task = ctx.tasks.load(id);
  if (!task) {
    row["ok"] = false;
    row["problems"] = {task.error().message};
    return row;
  }
  r->event({{"task", id}, {"state", "validating"}});
  const auto& cfg = ctx.scheduler->config();
  ScoringEnvironment env;
  // The task's own tasks root: an imported AKA task's common harness layers are beside it.
  env.tasks_root = task->dir.parent_path().parent_path();
  env.trusted_cache = cfg.trusted_cache.empty() ? ctx.stateDir / "tasks" : cfg.trusted_cache;  // the scheduler's
  env.akacheck = cfg.akacheck;
  env.sandbox_uid = cfg.sandbox_uid;
  env.sandbox_gid = cfg.sandbox_gid;
  env.canceller = job.canceller();
  env.timing_slots = ctx.scheduler->timingSlots();  // validations are timed like attempts
  auto image = loadImageProfile(ctx.imagesDir, task->image);
  std::unique_ptr<GpuLease> lease;
  const GpuRequest want = gpuRequestOfTask(ctx, *task);
  const bool servable = !task->gpu || ctx.gpus->exists(want);
  if (image && task->gpu && servable) {
    if (!shared.empty()) {
      env.gpus = shared;
      env.gpu_shared = true;
    } else if (auto g = ctx.gpus->acquire("tasks validate " + id, want, [&] { return r->done() || job.stopping(); })) {
      lease = std::make_unique<GpuLease>(*ctx.gpus, g, "tasks validate " + id);
      env.gpus = {g->id};
    }
  }
  if (!image) {
    row["ok"] = false;
    row["problems"] = {image.error().message};
  } else if (!servable) {
    row["ok"] = false;
    row["problems"] = {"the task needs " + want.describe() + " and this daemon has none (akactl gpus)"};
  } else if (task->gpu && env.gpus.empty()) {
    row["ok"] = false;
    row["problems"] = {"the task needs a GPU and none was free before validation stopped"};
  } else {
    env.image = *image;
    auto v = validateTask(*task, env, ctx.stateDir / "validate" / randomHex(4), minSpeedup);
    if (v) row = *v;
    else {
      row["ok"] = false;
      row["problems"] = {v.error().message};
    }
  }
  return row;
}

// Validates `ids`, the others one at a time after `parallel` at once of those whose validation
// times nothing, sharing one lease per GPU request: an imported AgentKernelArena task's, wrapped
// or converted (compile and correctness of the pristine baseline and of a candidate akad broke).
// Rows come back in the order of `ids`.
class ValidationRun {
 public:
  ValidationRun(DaemonContext& ctx, std::vector<std::string> ids, double minSpeedup, int parallel,
                std::shared_ptr<Responder> r)
      : ctx_(ctx), ids_(std::move(ids)), minSpeedup_(minSpeedup), parallel_(parallel), r_(std::move(r)),
        rows_(ids_.size()) {}

  void run() {
    BackgroundJob job;
    if (!job.accepted()) return r_->finish(Error{"the daemon is shutting down", proto::kShuttingDown});
    std::map<std::string, std::vector<std::size_t>> sideBySide;  // GPU request -> tasks
    std::vector<std::size_t> alone;
    for (std::size_t i = 0; i < ids_.size(); ++i) {
      auto task = parallel_ > 1 ? ctx_.tasks.load(ids_[i]) : Result<Task>(Error{"validated alone"});
      if (task && task->traits().imported) sideBySide[task->gpu ? gpuRequestOfTask(ctx_, *task).describe() : ""].push_back(i);
      else alone.push_back(i);
    }
    for (const auto& [want, group] : sideBySide)
      if (!runGroup(group, job)) return stopped();
    for (std::size_t i : alone) {
      if (r_->done() || job.stopping()) return stopped();
      record(i, validateOne(ctx_, ids_[i], minSpeedup_, job, r_, {}));
    }
    bool allOk = true;
    for (const json& row : rows_) allOk = allOk && row.value("ok", false);
    r_->finish(json{{"ok", allOk}, {"tasks", rows_}});
  }

 private:
  void stopped() { r_->finish(Error{"validation stopped", proto::kShuttingDown}); }

  void record(std::size_t i, json row) {
    std::lock_guard lock(mutex_);
    r_->event({{"task", ids_[i]}, {"state", "done"}, {"result", row}});
    rows_[i] = std::move(row);
  }

  // `parallel_` threads take the group's tasks in turn under one lease (when they need a GPU).
  bool runGroup(const std::vector<std::size_t>& group, BackgroundJob& job) {
    auto first = ctx_.tasks.load(ids_[group.front()]);
    std::unique_ptr<GpuLease> lease;
    std::vector<std::string> gpus;
    if (first && first->gpu && ctx_.gpus->exists(gpuRequestOfTask(ctx_, *first))) {
      const std::string holder = "tasks validate (" + std::to_string(group.size()) + " tasks side by side)";
      auto g = ctx_.gpus->acquire(holder, gpuRequestOfTask(ctx_, *first), [&] { return r_->done() || job.stopping(); });
      if (!g) return false;
      lease = std::make_unique<GpuLease>(*ctx_.gpus, g, holder);
      gpus = {g->id};
    }
    std::atomic<std::size_t> next{0};
    std::vector<std::thread> workers;
    const int n = std::min<int>(parallel_, static_cast<int>(group.size()));
    for (int w = 0; w < n; ++w)
      workers.emplace_back([&] {
        for (std::size_t k; (k = next++) < group.size();) {
          if (r_->done() || job.stopping()) return;
          record(group[k], validateOne(ctx_, ids_[group[k]], minSpeedup_, job, r_, gpus));
        }
      });
    for (auto& t : workers) t.join();
    return !(r_->done() || job.stopping());
  }

  DaemonContext& ctx_;
  const std::vector<std::string> ids_;
  const double minSpeedup_;
  const int parallel_;
  const std::shared_ptr<Responder> r_;
  std::mutex mutex_;
  std::vector<json> rows_;
};

void validateTasks(DaemonContext& ctx, const json& params, std::shared_ptr<Responder> r) {
  if (auto s = proto::allowOnly(params, {"tasks", "min_speedup", "parallel"}); !s) return r->finish(s.error());
  std::vector<std::string> selectors;
  if (auto t = params.find("tasks"); t != params.end()) {
    if (!t->is_array()) return r->finish(invalidParams("parameter \"tasks\" must be an array of selectors"));
    for (const auto& s : *t) {
      if (!s.is_string()) return r->finish(invalidParams("parameter \"tasks\" must be an array of strings"));
      selectors.push_back(s.get<std::string>());
    }
  }
  double minSpeedup = 1.2;
  if (auto m = params.find("min_speedup"); m != params.end()) {
    if (!m->is_number() || m->get<double>() < 0) return r->finish(invalidParams("parameter \"min_speedup\" must be a number >= 0"));
    minSpeedup = m->get<double>();
  }
  int parallel = 1;
  if (auto p = params.find("parallel"); p != params.end()) {
    if (!p->is_number_integer() || p->get<int64_t>() < 1 || p->get<int64_t>() > kMaxValidateParallel)
      return r->finish(invalidParams("parameter \"parallel\" must be an integer from 1 to " + std::to_string(kMaxValidateParallel)));
    parallel = static_cast<int>(p->get<int64_t>());
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
  std::thread([run = std::make_shared<ValidationRun>(ctx, *ids, minSpeedup, parallel, r)] { run->run(); }).detach();
}

}  // namespace

void registerTaskMethods(MethodTable& table, DaemonContext& ctx) {
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

}

}  // namespace akad
