#pragma once
#include "daemon/context.h"
#include "daemon/methods.h"

namespace akad {
// run.submit, run.list, run.get, run.cancel, run.watch
void registerRunMethods(MethodTable& table, DaemonContext& context);
}  // namespace akad
