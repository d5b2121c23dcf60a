#pragma once
#include "daemon/context.h"
#include "daemon/methods.h"

namespace akad {
// The benchmark's methods beyond runs: run.report, run.reproduce, attempt.get, attempt.logs,
// tasks.list, tasks.validate, agents.list, gpus.list, snapshot.list|show|export|gc.
void registerPipelineMethods(MethodTable& table, DaemonContext& context);
// Long jobs (tasks.validate, snapshot.export) run on threads of their own; at shut-down this
// cancels their sandboxes and waits for them, before what they use is destroyed.
void stopPipelineJobs();
}  // namespace akad
