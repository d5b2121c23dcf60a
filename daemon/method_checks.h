#pragma once
// What the benchmark's method handlers (pipeline_methods.h) check before they act: that the
// caller may see the attempt or snapshot it names, that a snapshot parameter is a SHA-256,
// and that this daemon has an executor.

#include <cstdint>
#include <set>
#include <string>

#include <nlohmann/json.hpp>

#include "common/result.h"
#include "daemon/context.h"
#include "daemon/methods.h"

namespace akad {

// A bad parameter (protocol::kInvalidParams).
Error invalidParams(const std::string& message);

// The attempt, when the caller may see it: its run's submitter or an admin.
Result<AttemptRecord> attemptFor(DaemonContext& ctx, const Peer& peer, std::int64_t id);

// Whether the caller may see a snapshot: an admin, or a tenant one of whose runs recorded it
// (a snapshot is content-addressed: two tenants whose agents left the same files share it).
Status maySeeSnapshot(DaemonContext& ctx, const Peer& peer, const std::string& sha);

// A snapshot's description (a manifest, or the store's view of one) made fit for the caller: its
// "metadata" names the attempt, run, agent and GPU that made the snapshot first, and two tenants
// whose agents left the same files share one snapshot, so a tenant whose attempt did not make
// it keeps only what names the task and the policies (an admin keeps all of it).
void hideForeignMetadata(DaemonContext& ctx, const Peer& peer, nlohmann::json& described);
// The same for many descriptions at once: ownAttempts are the ids of the caller's attempts.
void hideForeignMetadata(const std::set<std::int64_t>& ownAttempts, nlohmann::json& described);

// The answer of a method that needs the executor on a daemon started with --workers 0.
Error noExecutor();

// params["snapshot"], a SHA-256 in lower-case hex.
Result<std::string> readSha(const nlohmann::json& params);

}  // namespace akad
