#pragma once
// akad's command line: every flag by name with its documented default (docs/operations.md,
// "akad flags"), what the flags mean once checked against each other and the host, and the
// executor's configuration they make.

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>

#include "common/paths.h"
#include "common/result.h"
#include "daemon/pipeline/workspace_fs.h"
#include "daemon/scheduler.h"
#include "daemon/slurm/slurm_executor.h"
#include "daemon/tenants.h"
#include "daemon/uid_pool.h"

namespace akad {

// Every flag, by name. Defaults here are the documented ones (docs/operations.md, "akad flags").
struct DaemonOptions {
  std::string socketPath = defaultSocketPath().string();
  std::string stateDir = defaultStateDir().string();
  std::string tasksDir = (dataRoot() / "tasks").string();
  std::string logLevel = "info";
  std::size_t maxConnections = 4096;
  std::string socketGroup;
  int workers = 1;
  int timingSlots = 0;  // 0: TimingSlots::forThisHost()
  bool noRequeue = false;
  bool noAgentNetwork = false;
  std::string gpuList = "all";
  std::string agentsDir = (dataRoot() / "images" / "agents").string();
  std::string imagesDir = (dataRoot() / "images").string();
  std::string akacheck;
  // Above useradd's subordinate-id allocations (SUB_UID_MAX 600100000), so that no user can
  // map them into a user namespace of its own (checked at start all the same).
  uid_t sandboxUid = 700000000;
  std::string attemptUids = "700000001-700001000";
  std::string workspaceSize = "1G";
  std::uint64_t workspaceInodes = 100000;
  std::string cgroupParent = "akad";
  std::string mountTemplates;
  std::string trustedCache;  // empty: <state-dir>/tasks
  std::string tenantsFile;
  std::string executor = "local";
  slurm::SlurmConfig slurm;
  std::string slurmShared, slurmNodeProgram;
};

// Parses the command line into `o` and sets the log level; an exit status when akad should
// stop here (--help, --version: 0; a bad flag: 2).
std::optional<int> parseFlags(int argc, char** argv, DaemonOptions& o);

// What the flags mean once checked against each other and the host: refused with a reason
// (exit status 2) before anything is opened.
struct CheckedOptions {
  WorkspaceLimits workspace;
  UidRange attemptUids;
  TenantPolicy tenants;
  std::optional<slurm::SlurmConfig> slurm;
};
Result<CheckedOptions> checkOptions(const DaemonOptions& o);

// The executor's configuration: the flags, and the checked options.
SchedulerConfig schedulerConfig(const DaemonOptions& o, const CheckedOptions& c);

}  // namespace akad
