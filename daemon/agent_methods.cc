#include "daemon/pipeline_methods.h"

#include "daemon/pipeline/agent.h"

#include "common/protocol.h"
#include "daemon/method_checks.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace akad {
namespace proto = protocol;

void registerAgentMethods(MethodTable& table, DaemonContext& ctx) {
  table.addOffloaded("agents.list", [&ctx](const Peer&, const json& params) -> Result<json> {
    if (auto s = proto::allowOnly(params, {}); !s) return s.error();
    json agents = json::array();
    for (const auto& a : listAgents(ctx.agentsDir))
      agents.push_back({{"name", a.name}, {"description", a.description}, {"network", a.network_host ? "host" : a.network_allow ? "allow" : "none"},
                        {"time_limit_s", a.time_limit_s}, {"credentials", a.credentials}, {"template", a.template_only},
                        {"image", a.image.empty() ? json(nullptr) : json(a.image)}});
    return json{{"agents", agents}};
  });

}

}  // namespace akad
