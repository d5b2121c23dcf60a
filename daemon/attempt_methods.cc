#include "daemon/pipeline_methods.h"

#include <algorithm>
#include <map>
#include <set>

#include "daemon/held_out_view.h"
#include "daemon/pipeline/files.h"

#include "common/protocol.h"
#include "daemon/method_checks.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace akad {
namespace proto = protocol;

namespace {

constexpr std::size_t kMaxLogBytes = 1 << 20;

// The log files of one stage of an attempt, newest scoring first.
std::vector<fs::path> logFilesFor(const fs::path& attemptDir, const std::string& stage) {
  std::vector<fs::path> files;
  if (stage == "agent") return {attemptDir / "logs" / "agent.out", attemptDir / "logs" / "agent.err"};
  if (stage == "network") return {attemptDir / "logs" / "network.jsonl"};
  std::vector<fs::path> scorings;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(attemptDir, ec))
    if (e.path().filename().string().rfind("score-", 0) == 0) scorings.push_back(e.path());
  std::sort(scorings.begin(), scorings.end(), [](const fs::path& a, const fs::path& b) {
    std::error_code e1, e2;
    return fs::last_write_time(a, e1) > fs::last_write_time(b, e2);
  });
  if (scorings.empty()) return files;
  const fs::path logs = scorings.front() / "gates" / "logs";
  static const std::map<std::string, std::vector<std::string>> prefixes = {
      {"compile", {"compile"}},
      {"generate", {"reference-generate"}},
      {"correctness", {"visible-check"}},
      {"performance", {"visible-perf"}},
      {"held_out", {"held_out-"}}};
  auto it = prefixes.find(stage);
  std::vector<fs::path> all;
  for (const auto& e : fs::directory_iterator(logs, ec)) all.push_back(e.path());
  std::sort(all.begin(), all.end());
  for (const auto& p : all) {
    const std::string name = p.filename().string();
    if (it == prefixes.end()) files.push_back(p);
    else
      for (const auto& pre : it->second)
        if (name.rfind(pre, 0) == 0) files.push_back(p);
  }
  return files;
}

}  // namespace

void registerAttemptMethods(MethodTable& table, DaemonContext& ctx) {
  table.addOffloaded("attempt.get", [&ctx](const Peer& peer, const json& params) -> Result<json> {
    if (auto s = proto::allowOnly(params, {"id"}); !s) return s.error();
    auto id = proto::optionalInt(params, "id", -1, 1, INT64_MAX);
    if (!id) return id.error();
    if (*id < 0) return invalidParams("missing parameter \"id\" (an attempt number)");
    auto a = attemptFor(ctx, peer, *id);
    if (!a) return a.error();
    return json{{"attempt", HeldOutView::forCaller(ctx.tenants.isAdmin(peer), ctx.stateDir, {*a}).attempt(a->toJson())}};
  });

  table.addOffloaded("attempt.logs", [&ctx](const Peer& peer, const json& params) -> Result<json> {
    if (auto s = proto::allowOnly(params, {"id", "stage"}); !s) return s.error();
    auto id = proto::optionalInt(params, "id", -1, 1, INT64_MAX);
    if (!id) return id.error();
    if (*id < 0) return invalidParams("missing parameter \"id\" (an attempt number)");
    auto stage = proto::optionalString(params, "stage");
    if (!stage) return stage.error();
    static const std::set<std::string> stages = {"agent", "network", "compile", "generate", "correctness", "performance", "held_out", "all"};
    const std::string which = stage->value_or("all");
    if (!stages.count(which)) return invalidParams("parameter \"stage\" must be one of agent, network, compile, generate, correctness, performance, held_out, all");
    auto a = attemptFor(ctx, peer, *id);
    if (!a) return a.error();
    const fs::path dir = ctx.stateDir / "attempts" / std::to_string(*id);
    std::vector<fs::path> files;
    for (const std::string& st : which == "all" ? std::vector<std::string>{"agent", "network", "scoring"} : std::vector<std::string>{which}) {
      auto part = logFilesFor(dir, st);
      files.insert(files.end(), part.begin(), part.end());
    }
    // A tenant who is not an admin gets the held-out gates (and the reference's generation of
    // their inputs) as a summary by opaque id, never their raw logs.
    const bool admin = ctx.tenants.isAdmin(peer);
    const HeldOutView view = HeldOutView::forCaller(admin, ctx.stateDir, {*a});
    auto heldOutLog = [](const fs::path& f) {
      const std::string name = f.filename().string();
      return name.rfind("held_out", 0) == 0 || name.rfind("reference-generate", 0) == 0;
    };
    json logs = json::array();
    bool summarised = false;
    for (const auto& f : files) {
      if (!fs::exists(f)) continue;
      if (!admin && heldOutLog(f)) {
        if (!summarised)
          logs.push_back({{"file", "held_out (summary)"},
                          {"text", HeldOutView::logSummary(view.attempt(a->toJson()).value("result", json()))}});
        summarised = true;
        continue;
      }
      logs.push_back({{"file", view.text(fs::relative(f, dir).string())}, {"text", view.text(tailOfFile(f, kMaxLogBytes))}});
    }
    return json{{"attempt", *id}, {"stage", which}, {"logs", logs}};
  });

}

}  // namespace akad
