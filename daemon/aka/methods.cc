#include "daemon/aka/methods.h"

#include "common/log.h"
#include "common/protocol.h"
#include "daemon/aka/import.h"
#include "daemon/context.h"
#include "daemon/gpu_leases.h"
#include "daemon/method_checks.h"
#include "daemon/methods.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace akad {
namespace proto = protocol;

namespace {

// The platform the daemon's GPU discovery found: what its sandboxes will run the tasks on.
aka::Platform discoveredPlatform(const DaemonContext& ctx) {
  if (ctx.gpus != nullptr && ctx.gpus->exists(GpuRequest{"nvidia", ""})) return aka::Platform::Nvidia;
  if (ctx.gpus != nullptr && ctx.gpus->exists(GpuRequest{"amd", ""})) return aka::Platform::Amd;
  return aka::Platform::Cpu;
}

Result<json> importTasks(DaemonContext& ctx, const Peer& peer, const json& params) {
  if (auto s = proto::allowOnly(params, {"source", "dir", "select", "platform", "files", "held_out", "convert"}); !s) return s.error();
  // It makes tasks every tenant can run, from a folder only the daemon reads as root.
  if (auto s = ctx.tenants.mustBeAdmin(peer, "import tasks"); !s) return s.error();
  auto source = proto::requireString(params, "source");
  if (!source) return source.error();
  if (*source != "aka") return invalidParams("parameter \"source\" must be \"aka\" (the only importer), got \"" + *source + "\"");
  auto dir = proto::requireString(params, "dir");
  if (!dir) return dir.error();
  if (dir->empty() || dir->front() != '/' || dir->find('\0') != std::string::npos || dir->size() > 4096)
    return invalidParams("parameter \"dir\" must be an absolute path to an AgentKernelArena checkout");
  aka::ImportOptions o;
  o.checkout = *dir;
  auto heldOut = proto::optionalString(params, "held_out");
  if (!heldOut) return heldOut.error();
  if (*heldOut) {
    const std::string& h = **heldOut;
    if (h.empty() || h.front() != '/' || h.find('\0') != std::string::npos || h.size() > 4096)
      return invalidParams("parameter \"held_out\" must be an absolute path to AKA's held_out_tests folder");
    if (!fs::is_directory(h)) return invalidParams("held-out folder " + h + " is not a directory");
    o.heldOutDir = h;
  }
  o.stateDir = ctx.stateDir;
  if (auto sel = params.find("select"); sel != params.end() && !sel->is_null()) {
    if (!sel->is_array()) return invalidParams("parameter \"select\" must be an array of task-name prefixes");
    for (const json& s : *sel) {
      if (!s.is_string() || s.get<std::string>().empty() || s.get<std::string>().size() > 512 ||
          !aka::isInsideRelativePath(s.get<std::string>()))
        return invalidParams("parameter \"select\" must hold task-name prefixes such as \"triton2triton/vllm\"");
      o.selectors.push_back(s.get<std::string>());
    }
  }
  auto platform = proto::optionalString(params, "platform");
  if (!platform) return platform.error();
  if (*platform) {
    auto p = aka::parsePlatform(**platform);
    if (!p) return invalidParams("parameter \"platform\": " + p.error().message);
    o.platform = *p;
  } else {
    o.platform = discoveredPlatform(ctx);
  }
  auto convert = proto::optionalBool(params, "convert", false);
  if (!convert) return convert.error();
  o.convert = *convert;
  o.commonSource = ctx.tasks.root() / "common";
  auto withFiles = proto::optionalBool(params, "files", false);
  if (!withFiles) return withFiles.error();
  auto report = aka::importCheckout(o);
  if (!report) return Error{report.error().message, proto::kInvalidParams};
  int imported = 0;
  for (const auto& t : report->tasks) imported += t.imported ? 1 : 0;
  log::info("imported ", imported, " of ", report->tasks.size(), " AgentKernelArena tasks from ", report->checkout.string(),
            " (", report->commit.known() ? report->commit.commit : report->commit.note, ") for ",
            aka::platformName(report->platform), " by uid ", peer.uid);
  return report->toJson(*withFiles);
}

}  // namespace

json akaTaskListing(const fs::path& stateDir) {
  auto index = aka::readImportIndex(stateDir);
  if (!index) return json{{"error", index.error().message}};
  json out = json::array();
  for (const auto& [name, entry] : index->items()) out.push_back(entry);
  return out;
}

void registerAkaMethods(MethodTable& table, DaemonContext& ctx) {
  table.addOffloaded("tasks.import", [&ctx](const Peer& peer, const json& params) -> Result<json> {
    return importTasks(ctx, peer, params);
  });
}

}  // namespace akad
