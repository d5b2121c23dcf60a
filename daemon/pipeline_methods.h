#pragma once
#include "daemon/context.h"
#include "daemon/methods.h"

namespace akad {
// The benchmark's methods beyond runs, each group in a file of its name: run.report
// (report_methods.cc), attempt.get|logs (attempt_methods.cc), run.reproduce
// (reproduce_methods.cc), tasks.list|validate (task_methods.cc), agents.list
// (agent_methods.cc), gpus.list (gpu_methods.cc), snapshot.list|show|export|gc
// (snapshot_methods.cc). What they check first is method_checks.h.
void registerPipelineMethods(MethodTable& table, DaemonContext& context);

void registerReportMethods(MethodTable& table, DaemonContext& context);
void registerAttemptMethods(MethodTable& table, DaemonContext& context);
void registerReproduceMethods(MethodTable& table, DaemonContext& context);
void registerTaskMethods(MethodTable& table, DaemonContext& context);
void registerAgentMethods(MethodTable& table, DaemonContext& context);
void registerGpuMethods(MethodTable& table, DaemonContext& context);
void registerSnapshotMethods(MethodTable& table, DaemonContext& context);

// Long jobs (tasks.validate, snapshot.export) run on threads of their own; at shut-down this
// cancels their sandboxes and waits for them, before what they use is destroyed
// (background_jobs.cc).
void stopPipelineJobs();
}  // namespace akad
