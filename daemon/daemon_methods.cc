#include "daemon/daemon_methods.h"

#include <unistd.h>

#include "akad/version.h"
#include "common/protocol.h"

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
        {"connections", ctx.serverStats ? ctx.serverStats() : json::object()},
        {"methods", table.names()},
    };
  });
}

}  // namespace akad
