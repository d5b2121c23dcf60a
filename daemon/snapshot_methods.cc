#include "daemon/pipeline_methods.h"

#include <fstream>
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

void exportSnapshot(DaemonContext& ctx, const Peer& peer, const json& params, std::shared_ptr<Responder> r) {
  if (auto s = proto::allowOnly(params, {"snapshot"}); !s) return r->finish(s.error());
  auto sha = readSha(params);
  if (!sha) return r->finish(sha.error());
  if (ctx.snapshots == nullptr) return r->finish(noExecutor());
  if (auto s = maySeeSnapshot(ctx, peer, *sha); !s) return r->finish(s.error());
  std::thread([&ctx, peer, sha = *sha, r] {
    BackgroundJob job;
    if (!job.accepted()) return r->finish(Error{"the daemon is shutting down", proto::kShuttingDown});
    auto path = ctx.snapshots->openVerified(sha);
    if (!path) return r->finish(Error{path.error().message, proto::kNotFound});
    auto manifest = ctx.snapshots->manifest(sha);
    if (!manifest) return r->finish(manifest.error());
    std::ifstream in(*path, std::ios::binary);
    std::string buf(kExportChunkBytes, '\0');
    while (in && !r->done() && !job.stopping()) {
      in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
      std::size_t n = static_cast<std::size_t>(in.gcount());
      if (n == 0) break;
      r->event({{"chunk", base64Encode(std::string_view(buf.data(), n))}});
    }
    json shown = manifest->toJson();
    hideForeignMetadata(ctx, peer, shown);
    r->finish(json{{"snapshot", sha}, {"manifest", shown}});
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
