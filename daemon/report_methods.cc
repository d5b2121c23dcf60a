#include "daemon/pipeline_methods.h"

#include "daemon/held_out_view.h"
#include "daemon/pipeline/report.h"

#include "common/protocol.h"
#include "daemon/method_checks.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace akad {
namespace proto = protocol;

namespace {

std::vector<AttemptOutcome> outcomesOf(const std::vector<AttemptRecord>& attempts) {
  std::vector<AttemptOutcome> out;
  for (const auto& a : attempts)
    out.push_back({std::to_string(a.id), a.taskId, a.state, a.result ? *a.result : json(), a.error.value_or("")});
  return out;
}

}  // namespace

void registerReportMethods(MethodTable& table, DaemonContext& ctx) {
  table.addOffloaded("run.report", [&ctx](const Peer& peer, const json& params) -> Result<json> {
    if (auto s = proto::allowOnly(params, {"id"}); !s) return s.error();
    auto id = proto::requireString(params, "id");
    if (!id) return id.error();
    auto run = ctx.store.getRun(*id);
    if (!run) return run.error();
    if (auto s = ctx.tenants.mayAccess(peer, run->submitterUid, "run " + *id); !s) return s.error();
    auto attempts = ctx.store.attemptsOf(*id);
    if (!attempts) return attempts.error();
    auto outcomes = outcomesOf(*attempts);
    json report = runReport(outcomes);
    const HeldOutView view = HeldOutView::forCaller(ctx.tenants.isAdmin(peer), ctx.stateDir, *attempts);
    return json{{"run", run->toJson()}, {"report", view.names(report)}, {"csv", view.text(runReportCsv(outcomes))}};
  });

}

}  // namespace akad
