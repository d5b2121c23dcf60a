#include "daemon/daemon_methods.h"

#include <unistd.h>

#include "akad/version.h"
#include "common/protocol.h"
#include "daemon/scheduler.h"

namespace akad {

using nlohmann::json;

void registerDaemonMethods(MethodTable& table, DaemonContext& ctx) {
  table.add("daemon.ping", [](const Peer&, const json& params) -> Result<json> {
    if (auto s = protocol::allowOnly(params, {}); !s) return s.error();
    return json{{"pong", true}};
  });

  table.add("daemon.info", [&ctx, &table](const Peer& peer, const json& params) -> Result<json> {
    if (auto s = protocol::allowOnly(params, {}); !s) return s.error();
    auto counts = ctx.store.counts();
    if (!counts) return counts.error();
    auto schema = ctx.store.schemaVersion();
    if (!schema) return schema.error();
    double uptime = std::chrono::duration<double>(std::chrono::steady_clock::now() - ctx.startedAt).count();
    return json{
        {"version", kVersion},
        {"protocol_version", kProtocolVersion},
        {"pid", ::getpid()},
        {"uptime_s", uptime},
        {"started_at", ctx.startedAtIso},
        {"socket", ctx.socketPath.string()},
        {"state_dir", ctx.stateDir.string()},
        {"database", ctx.store.path().string()},
        {"schema_version", *schema},
        {"tasks_dir", ctx.tasks.root().string()},
        {"peer", {{"uid", peer.uid}, {"gid", peer.gid}, {"pid", peer.pid}}},
        {"counts",
         {{"runs", counts->runs}, {"runs_by_state", counts->runsByState}, {"attempts", counts->attempts.toJson()}}},
        {"executor", ctx.executor},
        {"executor_state", ctx.scheduler ? ctx.scheduler->executorState() : json()},
        {"connections", ctx.serverStats ? ctx.serverStats() : json::object()},
        {"methods", table.names()},
    };
  });

  // A tenant's limits and what it uses of them (akactl quota). An admin may ask about any uid.
  table.addOffloaded("tenant.quota", [&ctx](const Peer& peer, const json& params) -> Result<json> {
    if (auto s = protocol::allowOnly(params, {"uid"}); !s) return s.error();
    auto asked = protocol::optionalInt(params, "uid", peer.uid, 0, 4294967294LL);
    if (!asked) return asked.error();
    const auto uid = static_cast<uid_t>(*asked);
    if (uid != peer.uid)
      if (auto s = ctx.tenants.mustBeAdmin(peer, "see another user's quota"); !s) return s.error();
    auto usage = ctx.store.tenantUsage(isoTimeUtc(kUsageWindowS));
    if (!usage) return usage.error();
    auto u = usage->find(uid);
    const TenantUsage used = u == usage->end() ? TenantUsage{} : u->second;
    return json{{"uid", uid},
                {"admin", ctx.tenants.isAdmin(uid)},
                {"limits", ctx.tenants.limitsFor(uid).toJson()},
                {"usage",
                 {{"queued_attempts", used.queued},
                  {"running_attempts", used.running},
                  {"open_attempts", used.queued + used.running},
                  {"attempt_hours_24h", used.attempt_seconds / 3600},
                  {"gpu_hours_24h", used.gpu_seconds / 3600},
                  {"connections", ctx.connectionsOf ? ctx.connectionsOf(uid) : 0}}},
                {"window_hours", kUsageWindowS / 3600},
                {"note", "0 is no limit; admins have none"}};
  });
}

}  // namespace akad
