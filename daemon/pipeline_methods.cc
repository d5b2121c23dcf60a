#include "daemon/pipeline_methods.h"

namespace akad {

void registerPipelineMethods(MethodTable& table, DaemonContext& context) {
  registerReportMethods(table, context);
  registerAttemptMethods(table, context);
  registerReproduceMethods(table, context);
  registerTaskMethods(table, context);
  registerAgentMethods(table, context);
  registerGpuMethods(table, context);
  registerSnapshotMethods(table, context);
}

}  // namespace akad
