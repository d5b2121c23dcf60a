#include "daemon/pipeline_methods.h"

#include <memory>
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

// One task of a tasks.validate: its image, a GPU if it needs one (the same rule as an attempt's,
// gpu_eligibility.h, with no model asked for), then validateTask. Returns the task's row.
json validateOne(DaemonContext& ctx, const std::string& id, double minSpeedup, BackgroundJob& job,
                 const std::shared_ptr<Responder>& r) {
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
    const GpuRequest want = gpuRequestOf(image ? image->requires_gpu_vendor : "", json::object());
    const bool servable = !task->gpu || ctx.gpus->exists(want);
    if (image && task->gpu && servable) {
      auto g = ctx.gpus->acquire("tasks validate " + id, want, [&] { return r->done() || job.stopping(); });
      if (g) {
        lease = std::make_unique<GpuLease>(*ctx.gpus, g);
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
  }
  return row;
}

void validateTasks(DaemonContext& ctx, const json& params, std::shared_ptr<Responder> r) {
  if (auto s = proto::allowOnly(params, {"tasks", "min_speedup"}); !s) return r->finish(s.error());
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
      const json row = validateOne(ctx, id, minSpeedup, job, r);
      allOk = allOk && row.value("ok", false);
      r->event({{"task", id}, {"state", "done"}, {"result", row}});
      results.push_back(row);
    }
    r->finish(json{{"ok", allOk}, {"tasks", results}});
  }).detach();
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
