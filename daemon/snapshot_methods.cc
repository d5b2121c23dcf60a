#include "daemon/pipeline_methods.h"

#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <thread>

#include "common/base64.h"
#include "daemon/background_jobs.h"
#include "daemon/snapshot/store.h"

#include "common/protocol.h"
#include "daemon/method_checks.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace akad {
namespace proto = protocol;

namespace {

constexpr std::size_t kExportChunkBytes = 256 << 10;
// Exports one uid may have running at once; admins have no limit. An export hashes and
// base64-encodes the whole archive on a thread of its own, a CPU's worth of work, so without a
// cap one tenant pipelining exports of a snapshot it may see keeps every CPU busy.
constexpr int kMaxExportsPerUid = 2;

// The exports each uid has running. A slot is taken on the I/O thread when the request is
// dispatched and given back when its last holder lets go of it.
class ExportSlots : public std::enable_shared_from_this<ExportSlots> {
 public:
  class Slot {
   public:
    Slot(std::shared_ptr<ExportSlots> slots, uid_t uid) : slots_(std::move(slots)), uid_(uid) {}
    ~Slot() { slots_->giveBack(uid_); }
    Slot(const Slot&) = delete;
    Slot& operator=(const Slot&) = delete;

   private:
    std::shared_ptr<ExportSlots> slots_;
    uid_t uid_;
  };

  // A slot of `uid`'s, or null when it has kMaxExportsPerUid running.
  std::shared_ptr<Slot> take(uid_t uid) {
    std::lock_guard lock(mutex_);
    int& running = running_[uid];
    if (running >= kMaxExportsPerUid) return nullptr;
    ++running;
    return std::make_shared<Slot>(shared_from_this(), uid);
  }

 private:
  void giveBack(uid_t uid) {
    std::lock_guard lock(mutex_);
    if (--running_[uid] == 0) running_.erase(uid);
  }

  std::mutex mutex_;
  std::map<uid_t, int> running_;
};

// The archive as chunk events, then the answer: the snapshot and its manifest, fit for the caller.
Result<json> streamArchive(DaemonContext& ctx, const Peer& peer, const std::string& sha, Responder& r,
                           const BackgroundJob& job) {
  auto path = ctx.snapshots->openVerified(sha);
  if (!path) return Error{path.error().message, proto::kNotFound};
  auto manifest = ctx.snapshots->manifest(sha);
  if (!manifest) return manifest.error();
  std::ifstream in(*path, std::ios::binary);
  std::string buf(kExportChunkBytes, '\0');
  while (in && !r.done() && !job.stopping()) {
    in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
    std::size_t n = static_cast<std::size_t>(in.gcount());
    if (n == 0) break;
    r.event({{"chunk", base64Encode(std::string_view(buf.data(), n))}});
  }
  json shown = manifest->toJson();
  hideForeignMetadata(ctx, peer, shown);
  return json{{"snapshot", sha}, {"manifest", shown}};
}

void exportSnapshot(DaemonContext& ctx, ExportSlots& slots, const Peer& peer, const json& params,
                    std::shared_ptr<Responder> r) {
  if (auto s = proto::allowOnly(params, {"snapshot"}); !s) return r->finish(s.error());
  auto sha = readSha(params);
  if (!sha) return r->finish(sha.error());
  if (ctx.snapshots == nullptr) return r->finish(noExecutor());
  if (auto s = maySeeSnapshot(ctx, peer, *sha); !s) return r->finish(s.error());
  std::shared_ptr<ExportSlots::Slot> slot;
  if (!ctx.tenants.isAdmin(peer)) {
    slot = slots.take(peer.uid);
    if (!slot)
      return r->finish(Error{"uid " + std::to_string(peer.uid) + " has " + std::to_string(kMaxExportsPerUid) +
                                 " snapshot exports running, its limit; retry when one has ended",
                             proto::kQuotaExceeded});
    // The thread holds the slot while it works and the Responder until the answer is queued, so
    // the slot comes back on the I/O thread, before the client can read that answer: a client
    // that has its answer may export again at once, and requests read in one go count against
    // each other however fast their threads end. A client that hangs up leaves it to the thread.
    r->hold(slot);
  }
  std::thread([&ctx, peer, sha = *sha, r, slot = std::move(slot)]() mutable {
    BackgroundJob job;
    Result<json> outcome = Error{"the daemon is shutting down", proto::kShuttingDown};
    if (job.accepted()) outcome = streamArchive(ctx, peer, sha, *r, job);
    slot.reset();
    r->finish(outcome);
  }).detach();
}

}  // namespace

void registerSnapshotMethods(MethodTable& table, DaemonContext& ctx) {
  table.addOffloaded("snapshot.list", [&ctx](const Peer& peer, const json& params) -> Result<json> {
    if (auto s = proto::allowOnly(params, {}); !s) return s.error();
    if (ctx.snapshots == nullptr) return noExecutor();
    json all = ctx.snapshots->listJson();  // {"snapshots": [...]}
    if (ctx.tenants.isAdmin(peer)) return all;
    auto mine = ctx.store.snapshotsOf(peer.uid);
    if (!mine) return mine.error();
    auto ownAttempts = ctx.store.attemptIdsOf(peer.uid);
    if (!ownAttempts) return ownAttempts.error();
    json shown = json::array();
    for (json& s : all.at("snapshots"))
      if (mine->count(s.value("sha256", std::string()))) {
        hideForeignMetadata(*ownAttempts, s);
        shown.push_back(std::move(s));
      }
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
    hideForeignMetadata(ctx, peer, *shown);
    return *shown;
  });

  table.addStream("snapshot.export", [&ctx, slots = std::make_shared<ExportSlots>()](
                                         const Peer& peer, const json& params, std::shared_ptr<Responder> r) {
    exportSnapshot(ctx, *slots, peer, params, std::move(r));
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
