#pragma once
#include "daemon/context.h"
#include "daemon/methods.h"

namespace akad {
// daemon.ping, daemon.info
void registerDaemonMethods(MethodTable& table, DaemonContext& context);
}  // namespace akad
