#include "daemon/pipeline_methods.h"

#include "daemon/gpu_leases.h"

#include "common/protocol.h"
#include "daemon/method_checks.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace akad {
namespace proto = protocol;

void registerGpuMethods(MethodTable& table, DaemonContext& ctx) {
  table.add("gpus.list", [&ctx](const Peer&, const json& params) -> Result<json> {
    if (auto s = proto::allowOnly(params, {}); !s) return s.error();
    return json{{"gpus", ctx.gpus ? ctx.gpus->describe() : json::array()}};
  });

}

}  // namespace akad
