#include "daemon/flags.h"

#include <unistd.h>

#include <CLI/CLI.hpp>
#include <filesystem>
#include <iostream>

#include "akad/version.h"
#include "common/byte_size.h"
#include "common/data_root.h"
#include "common/log.h"
#include "common/paths.h"
#include "common/trusted_dir.h"
#include "daemon/pipeline/task.h"

namespace fs = std::filesystem;

namespace akad {
namespace {

void addOptions(CLI::App& app, DaemonOptions& o) {
  app.set_version_flag("--version", std::string("akad ") + kVersion + " (protocol " +
                                        std::to_string(kProtocolVersion) + ")");
  app.add_option("--socket", o.socketPath, "Unix socket to listen on ($AKAD_SOCKET; /run/akad/akad.sock as root)")
      ->capture_default_str();
  app.add_option("--socket-group", o.socketGroup, "Group allowed to use the socket (mode 0660)");
  app.add_option("--state-dir", o.stateDir, "Where akad.db and run data live")->capture_default_str();
  app.add_option("--tasks-dir", o.tasksDir, "Task suites: <suite>/<task>/task.yaml")->capture_default_str();
  app.add_option("--log-level", o.logLevel, "debug, info, warn or error")->capture_default_str();
  app.add_option("--max-connections", o.maxConnections, "Connections served at once; more are refused")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000000));
  app.add_option("--workers", o.workers, "Attempts run at once (0: no executor, runs stay queued)")
      ->capture_default_str()
      ->check(CLI::Range(0, 256));
  app.add_option("--timing-slots", o.timingSlots,
                 "Performance gates timed at once; each needs two CPUs of its own (0: half this host's CPUs, "
                 "at least one)")
      ->capture_default_str()
      ->check(CLI::Range(0, 256));
  app.add_flag("--no-requeue", o.noRequeue, "Leave attempts interrupted by a restart interrupted instead of queueing them again");
  app.add_flag("--no-agent-network", o.noAgentNetwork, "Never give agents the host network, whatever their definition says");
  app.add_option("--gpus", o.gpuList, "GPUs the daemon may lease: all, none, or ids/indices (nvidia0,1)")->capture_default_str();
  app.add_option("--agents-dir", o.agentsDir, "Agent definitions (<name>.yaml)")->capture_default_str();
  app.add_option("--images-dir", o.imagesDir, "Toolchain image profiles (<name>/image.yaml)")->capture_default_str();
  app.add_option("--sandbox-uid", o.sandboxUid,
                 "Unprivileged host uid (and gid) that owns what sandboxes write; akabox maps its uid to it")
      ->capture_default_str()
      ->check(CLI::Range(1u, 4294967294u));
  app.add_option("--attempt-uids", o.attemptUids,
                 "Host uids FIRST-LAST for the attempts' own sandboxes (agent, compile, candidate): each running "
                 "attempt holds one; at least --workers of them; none may be --sandbox-uid")
      ->capture_default_str();
  app.add_option("--workspace-size", o.workspaceSize,
                 "Each agent's workspace is a file system of this size (tmpfs, in the agent's memory limit); 0: "
                 "a plain folder on the state dir's disk")
      ->capture_default_str();
  app.add_option("--workspace-inodes", o.workspaceInodes, "Files and folders each agent's workspace may hold")
      ->capture_default_str()
      ->check(CLI::Range(std::uint64_t{16}, std::uint64_t{1} << 32));
  app.add_option("--cgroup-parent", o.cgroupParent,
                 "Cgroup under which every sandbox of this daemon is made (cleaned at start-up)")
      ->capture_default_str();
  app.add_option("--mount-templates", o.mountTemplates,
                 "Where akabox keeps the daemon's mount templates (default <state-dir>/mount-templates; off: build every "
                 "sandbox's mounts from scratch); removed at start-up and shutdown");
  app.add_option("--trusted-cache", o.trustedCache,
                 "Where trusted builds are kept, per task version and harness version (default <state-dir>/tasks). "
                 "Daemons may share one (its builds are locked across processes); it must be a directory owned by "
                 "akad's user that no one else can write");
  app.add_option("--tenants", o.tenantsFile,
                 "Tenant policy (YAML: admins) (default /etc/akad/tenants.yaml if it exists; else root is the only admin)");
  app.add_option("--akacheck", o.akacheck, "The trusted checker (default: beside akad, or the build tree)");
  app.add_option("--executor", o.executor,
                 "local: attempts run in this daemon's sandboxes; slurm: each attempt is a Slurm job running "
                 "akad-node (docs/operations.md, \"Slurm\")")
      ->check(CLI::IsMember({"local", "slurm"}))
      ->capture_default_str();
  app.add_option("--slurm-shared", o.slurmShared, "Slurm: the shared area, mounted at this path on every node");
  app.add_option("--slurm-node-program", o.slurmNodeProgram, "Slurm: akad-node's path on the nodes (default: beside akad)");
  app.add_option("--slurm-partition", o.slurm.partition, "Slurm: partition (default: the cluster's)");
  app.add_option("--slurm-account", o.slurm.account, "Slurm: account (default: the submitting user's)");
  app.add_option("--slurm-qos", o.slurm.qos, "Slurm: quality of service");
  app.add_option("--slurm-node-cache", o.slurm.node_cache,
                 "Slurm: an absolute path on every node where it keeps trusted builds across jobs (each build made "
                 "once per node; default: each job builds afresh)");
  app.add_option("--slurm-gres", o.slurm.gres, "Slurm: the gres a GPU task asks one of (gpu, gpu:h200, ...)")
      ->capture_default_str();
  app.add_option("--slurm-time-limit", o.slurm.time_limit_min, "Slurm: job time limit in minutes (0: the partition's)")
      ->check(CLI::Range(0, 525600));
}

Status checkWorkspace(const DaemonOptions& o, WorkspaceLimits& out) {
  auto bytes = parseSize(o.workspaceSize);
  if (!bytes) return Error{"--workspace-size: expected a size such as 512M or 2G (or 0), got \"" + o.workspaceSize + "\""};
  out.bytes = *bytes;
  if (out.bytes > 0 && out.bytes < (1u << 20))
    return Error{"--workspace-size " + o.workspaceSize + " is below 1M: no task's files fit"};
  out.inodes = o.workspaceInodes;
  return {};
}

Result<UidRange> checkUids(const DaemonOptions& o) {
  auto range = parseUidRange(o.attemptUids);
  if (!range) return Error{"--attempt-uids: " + range.error().message};
  const std::string uid = std::to_string(o.sandboxUid);
  if (range->contains(o.sandboxUid))
    return Error{"--attempt-uids " + o.attemptUids + " holds --sandbox-uid " + uid +
                 ": the candidate's sandboxes must not share the trusted ones' uid"};
  if (range->count < static_cast<uid_t>(std::max(o.workers, 1)))
    return Error{"--attempt-uids " + o.attemptUids + " has fewer uids than --workers (" + std::to_string(o.workers) + ")"};
  // A user who owns subordinate ids covering the sandboxes' uids could become them (newuidmap)
  // and trace or signal every sandbox.
  for (const char* file : {"/etc/subuid", "/etc/subgid"}) {
    const auto overlaps = subordinateOverlaps(file, *range, o.sandboxUid);
    if (!overlaps.empty())
      return Error{std::string(file) + " gives " + overlaps.front() + " ids that --sandbox-uid " + uid +
                   " or --attempt-uids " + o.attemptUids +
                   " use: that user could act as the sandboxes; choose uids outside every range there"};
  }
  return range;
}

Result<TenantPolicy> loadTenants(const DaemonOptions& o) {
  std::string file = o.tenantsFile;
  if (file.empty() && fs::exists("/etc/akad/tenants.yaml")) file = "/etc/akad/tenants.yaml";
  if (file.empty()) return TenantPolicy{};
  return loadTenantPolicy(file);
}

Result<std::optional<slurm::SlurmConfig>> checkSlurm(const DaemonOptions& o) {
  if (o.executor != "slurm") return std::optional<slurm::SlurmConfig>{};
  if (o.slurmShared.empty()) return Error{"--executor slurm needs --slurm-shared (a folder every node mounts at the same path)"};
  std::error_code ec;
  fs::create_directories(fs::path(o.slurmShared).parent_path(), ec);
  // Root on every node acts on what is in it (job specs, the akacheck path they name), and the
  // credential files are there: refused if anyone but akad's user could write to it or swap it.
  if (auto s = makeTrustedDirectory(o.slurmShared); !s)
    return Error{"refusing --slurm-shared " + o.slurmShared + ": " + s.error().message};
  if (!o.slurm.node_cache.empty() && !o.slurm.node_cache.is_absolute())
    return Error{"--slurm-node-cache " + o.slurm.node_cache.string() + ": must be an absolute path (the same on every node)"};
  slurm::SlurmConfig c = o.slurm;
  c.shared = fs::absolute(o.slurmShared);
  c.node_program = !o.slurmNodeProgram.empty() ? fs::path(o.slurmNodeProgram) : companionProgram("akad-node", "daemon");
  return std::optional<slurm::SlurmConfig>(c);
}

// The checker is installed beside akad, or built in the tree's tasks/ folder.
fs::path findAkacheck() { return companionProgram("akacheck", "tasks"); }

}  // namespace

std::optional<int> parseFlags(int argc, char** argv, DaemonOptions& o) {
  CLI::App app{"akad: sandbox orchestrator daemon for agentic GPU-kernel benchmarks.\n"
               "Serves akactl over a Unix socket; state lives in SQLite under the state dir."};
  addOptions(app, o);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int rc = app.exit(e);
    return rc == 0 ? 0 : 2;
  }
  log::Level level;
  if (!log::parseLevel(o.logLevel, level)) {
    std::cerr << "akad: --log-level must be debug, info, warn or error, got \"" << o.logLevel << "\"\n";
    return 2;
  }
  log::setLevel(level);
  return std::nullopt;
}

Result<CheckedOptions> checkOptions(const DaemonOptions& o) {
  CheckedOptions c;
  if (auto s = checkWorkspace(o, c.workspace); !s) return s.error();
  auto uids = checkUids(o);
  if (!uids) return uids.error();
  c.attemptUids = *uids;
  auto tenants = loadTenants(o);
  if (!tenants) return tenants.error();
  c.tenants = std::move(*tenants);
  auto slurmConfig = checkSlurm(o);
  if (!slurmConfig) return slurmConfig.error();
  c.slurm = *slurmConfig;
  return c;
}

SchedulerConfig schedulerConfig(const DaemonOptions& o, const CheckedOptions& c) {
  SchedulerConfig cfg;
  cfg.workers = o.workers;
  cfg.timing_slots = o.timingSlots > 0 ? o.timingSlots : TimingSlots::forThisHost();
  cfg.state_dir = o.stateDir;
  cfg.trusted_cache = o.trustedCache.empty() ? fs::path(o.stateDir) / "tasks" : fs::path(o.trustedCache);
  cfg.tasks_root = o.tasksDir;
  cfg.agents_dir = o.agentsDir;
  cfg.images_dir = o.imagesDir;
  cfg.akacheck = o.akacheck.empty() ? findAkacheck() : fs::path(o.akacheck);
  cfg.requeue_interrupted = !o.noRequeue;
  cfg.allow_agent_network = !o.noAgentNetwork;
  cfg.sandbox_uid = o.sandboxUid;
  cfg.sandbox_gid = o.sandboxUid;
  cfg.tenants = c.tenants;
  cfg.attempt_uids = c.attemptUids;
  cfg.workspace_limits = c.workspace;
  cfg.slurm = c.slurm;
  return cfg;
}

}  // namespace akad
