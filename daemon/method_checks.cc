#include "daemon/method_checks.h"

#include "common/protocol.h"

using nlohmann::json;

namespace akad {
namespace proto = protocol;

Error invalidParams(const std::string& message) { return Error{message, proto::kInvalidParams}; }

Result<AttemptRecord> attemptFor(DaemonContext& ctx, const Peer& peer, std::int64_t id) {
  auto a = ctx.store.getAttempt(id);
  if (!a) return a.error();
  auto run = ctx.store.getRun(a->runId);
  if (!run) return run.error();
  if (auto s = ctx.tenants.mayAccess(peer, run->submitterUid, "attempt " + std::to_string(id)); !s) return s.error();
  return a;
}

Status maySeeSnapshot(DaemonContext& ctx, const Peer& peer, const std::string& sha) {
  if (ctx.tenants.isAdmin(peer)) return {};
  auto mine = ctx.store.snapshotsOf(peer.uid);
  if (!mine) return mine.error();
  return ctx.tenants.mayAccess(peer, mine->count(sha) > 0, "snapshot " + sha);
}

namespace {

// The attempt a description's metadata names as the one that made the snapshot, if any.
std::optional<std::int64_t> makerOf(const nlohmann::json& described) {
  if (!described.contains("metadata") || !described["metadata"].is_object()) return std::nullopt;
  const auto attempt = described["metadata"].find("attempt");
  if (attempt == described["metadata"].end() || !attempt->is_number_integer()) return std::nullopt;
  return attempt->get<std::int64_t>();
}

void keepOnlyTaskAndPolicies(nlohmann::json& described) {
  if (!described.contains("metadata") || !described["metadata"].is_object()) return;
  const nlohmann::json& metadata = described["metadata"];
  nlohmann::json shown = nlohmann::json::object();
  for (const char* key : {"task", "task_hash", "image", "policies"})
    if (metadata.contains(key)) shown[key] = metadata.at(key);
  shown["made_by"] = "another submitter's attempt";
  described["metadata"] = std::move(shown);
}

}  // namespace

void hideForeignMetadata(DaemonContext& ctx, const Peer& peer, nlohmann::json& described) {
  if (ctx.tenants.isAdmin(peer)) return;
  if (const auto maker = makerOf(described)) {
    auto a = ctx.store.getAttempt(*maker);
    auto run = a ? ctx.store.getRun(a->runId) : Result<RunRecord>(Error{"no attempt"});
    if (run && run->submitterUid == static_cast<std::int64_t>(peer.uid)) return;
  }
  keepOnlyTaskAndPolicies(described);
}

void hideForeignMetadata(const std::set<std::int64_t>& ownAttempts, nlohmann::json& described) {
  const auto maker = makerOf(described);
  if (maker && ownAttempts.count(*maker)) return;
  keepOnlyTaskAndPolicies(described);
}

Error noExecutor() {
  return Error{"this daemon runs without an executor (--workers 0)", proto::kConflict};
}

namespace {

bool isSha256(const std::string& s) {
  if (s.size() != 64) return false;
  for (char c : s)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return true;
}

}  // namespace

Result<std::string> readSha(const json& params) {
  auto sha = proto::requireString(params, "snapshot");
  if (!sha) return sha.error();
  if (!isSha256(*sha)) return invalidParams("parameter \"snapshot\" must be a SHA-256 in lower-case hex");
  return *sha;
}

}  // namespace akad
