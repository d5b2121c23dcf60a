#include "daemon/pipeline_methods.h"

#include "daemon/held_out_view.h"
#include "daemon/pipeline/task_scan.h"
#include "daemon/scheduler.h"
#include "daemon/snapshot/store.h"

#include "common/protocol.h"
#include "daemon/method_checks.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace akad {
namespace proto = protocol;

void registerReproduceMethods(MethodTable& table, DaemonContext& ctx) {
  table.addOffloaded("run.reproduce", [&ctx](const Peer& peer, const json& params) -> Result<json> {
    if (auto s = proto::allowOnly(params, {"snapshot"}); !s) return s.error();
    auto sha = readSha(params);
    if (!sha) return sha.error();
    if (ctx.scheduler == nullptr || ctx.snapshots == nullptr) return noExecutor();
    // Re-scoring another tenant's snapshot would hand its kernel, and its scores, to the caller.
    if (auto s = maySeeSnapshot(ctx, peer, *sha); !s) return s.error();
    auto manifest = ctx.snapshots->manifest(*sha);
    if (!manifest) return Error{"no snapshot " + *sha + " in the store: " + manifest.error().message, proto::kNotFound};
    // The original is the caller's own attempt with this snapshot (an admin: the first of all):
    // another tenant's attempt with the same files is not the caller's to see.
    std::optional<std::int64_t> owner;
    if (!ctx.tenants.isAdmin(peer)) owner = peer.uid;
    auto original = ctx.store.attemptWithSnapshot(*sha, owner);
    if (!original) return original.error();
    const json& meta = manifest->metadata;  // only its task and task version are used
    std::string taskId = meta.value("task", std::string());
    std::string taskHash = meta.value("task_hash", std::string());
    if (*original) {
      taskId = (*original)->taskId;
      taskHash = (*original)->taskHash.value_or(taskHash);
    }
    if (taskId.empty() || taskHash.empty()) return invalidParams("snapshot " + *sha + " names no task; it cannot be re-scored");
    if (!fs::exists(taskVersionRoot(ctx.stateDir / "tasks", taskHash)))
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

}

}  // namespace akad
