// akad: the daemon. Flags and signals here; the pieces live in server/methods/store/events.

#include <fcntl.h>
#include <malloc.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cerrno>
#include <cstring>
#include <utility>
#include <boost/asio.hpp>
#include <filesystem>
#include <iostream>
#include <sstream>

#include "akad/version.h"
#include "common/log.h"
#include "common/paths.h"
#include "common/root_only_dir.h"
#include "common/trusted_dir.h"
#include "common/unique_fd.h"
#include "daemon/aka/import.h"
#include "daemon/aka/methods.h"
#include "daemon/audit.h"
#include "daemon/context.h"
#include "daemon/daemon_methods.h"
#include "daemon/events.h"
#include "daemon/gpu_leases.h"
#include "daemon/gpu_memory.h"
#include "daemon/methods.h"
#include "daemon/pipeline/sandbox_run.h"
#include "daemon/pipeline/task.h"
#include "daemon/pipeline_methods.h"
#include "daemon/scheduler.h"
#include "daemon/snapshot/store.h"
#include "sandbox/gpu_discovery.h"
#include "daemon/run_methods.h"
#include "daemon/server.h"
#include "daemon/store.h"
#include "daemon/task_catalog.h"

namespace fs = std::filesystem;
using namespace akad;

namespace {

// Each connection is one descriptor; the default soft limit (1024) would cap clients below
// what the protocol promises, so take what the hard limit allows.
void raiseFileLimit() {
  rlimit rl{};
  if (::getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
    rl.rlim_cur = rl.rlim_max;
    if (::setrlimit(RLIMIT_NOFILE, &rl) != 0) log::warn("cannot raise RLIMIT_NOFILE: ", std::strerror(errno));
  }
}

// Two daemons on one state dir would both execute its queued attempts.
Result<UniqueFd> lockStateDir(const fs::path& dir) {
  fs::path lock = dir / "akad.lock";
  UniqueFd fd(::open(lock.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600));
  if (!fd.valid()) return errnoError("cannot open " + lock.string());
  if (::flock(fd.get(), LOCK_EX | LOCK_NB) != 0) {
    if (errno == EWOULDBLOCK) return Error{"another akad is using state dir " + dir.string(), 0};
    return errnoError("flock " + lock.string());
  }
  return fd;
}

// --gpus all | none | comma-separated ids ("nvidia0") or discovery indices ("0").
Result<std::vector<gpu::GpuDevice>> selectGpus(const std::string& spec) {
  if (spec == "none") return std::vector<gpu::GpuDevice>{};
  auto found = gpu::discoverGpus();
  if (!found) return Error{"GPU discovery failed: " + found.error().message};
  if (spec == "all") return *found;
  std::vector<gpu::GpuDevice> chosen;
  std::stringstream ss(spec);
  std::string item;
  while (std::getline(ss, item, ',')) {
    bool matched = false;
    for (std::size_t i = 0; i < found->size(); ++i)
      if ((*found)[i].id == item || std::to_string(i) == item) {
        chosen.push_back((*found)[i]);
        matched = true;
      }
    if (!matched) return Error{"--gpus: no GPU '" + item + "' (found " + std::to_string(found->size()) + ")"};
  }
  return chosen;
}

// The checker is installed beside akad, or built in the tree's tasks/ folder.
fs::path findAkacheck() {
  std::error_code ec;
  const fs::path self = fs::read_symlink("/proc/self/exe", ec);
  for (const fs::path& p : {self.parent_path() / "akacheck", self.parent_path().parent_path() / "tasks" / "akacheck"})
    if (::access(p.c_str(), X_OK) == 0) return p;
  return "akacheck";
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"akad: sandbox orchestrator daemon for agentic GPU-kernel benchmarks.\n"
               "Serves akactl over a Unix socket; state lives in SQLite under the state dir."};
  std::string socketPath = defaultSocketPath().string();
  std::string stateDir = defaultStateDir().string();
  std::string tasksDir = (dataRoot() / "tasks").string();
  std::string logLevel = "info";
  std::size_t maxConnections = 4096;
  std::string socketGroup;
  int workers = 1;
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
  std::string tenantsFile;
  app.set_version_flag("--version", std::string("akad ") + kVersion + " (protocol " +
                                        std::to_string(kProtocolVersion) + ")");
  app.add_option("--socket", socketPath, "Unix socket to listen on ($AKAD_SOCKET; /run/akad/akad.sock as root)")
      ->capture_default_str();
  app.add_option("--socket-group", socketGroup, "Group allowed to use the socket (mode 0660)");
  app.add_option("--state-dir", stateDir, "Where akad.db and run data live")->capture_default_str();
  app.add_option("--tasks-dir", tasksDir, "Task suites: <suite>/<task>/task.yaml")->capture_default_str();
  app.add_option("--log-level", logLevel, "debug, info, warn or error")->capture_default_str();
  app.add_option("--max-connections", maxConnections, "Connections served at once; more are refused")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000000));
  app.add_option("--workers", workers, "Attempts run at once (0: no executor, runs stay queued)")
      ->capture_default_str()
      ->check(CLI::Range(0, 256));
  app.add_flag("--no-requeue", noRequeue, "Leave attempts interrupted by a restart interrupted instead of queueing them again");
  app.add_flag("--no-agent-network", noAgentNetwork, "Never give agents the host network, whatever their definition says");
  app.add_option("--gpus", gpuList, "GPUs the daemon may lease: all, none, or ids/indices (nvidia0,1)")->capture_default_str();
  app.add_option("--agents-dir", agentsDir, "Agent definitions (<name>.yaml)")->capture_default_str();
  app.add_option("--images-dir", imagesDir, "Toolchain image profiles (<name>/image.yaml)")->capture_default_str();
  app.add_option("--sandbox-uid", sandboxUid,
                 "Unprivileged host uid (and gid) that owns what sandboxes write; akabox maps its uid to it")
      ->capture_default_str()
      ->check(CLI::Range(1u, 4294967294u));
  app.add_option("--attempt-uids", attemptUids,
                 "Host uids FIRST-LAST for the attempts' own sandboxes (agent, compile, candidate): each running "
                 "attempt holds one; at least --workers of them; none may be --sandbox-uid")
      ->capture_default_str();
  app.add_option("--workspace-size", workspaceSize,
                 "Each agent's workspace is a file system of this size (tmpfs, in the agent's memory limit); 0: "
                 "a plain folder on the state dir's disk")
      ->capture_default_str();
  app.add_option("--workspace-inodes", workspaceInodes, "Files and folders each agent's workspace may hold")
      ->capture_default_str()
      ->check(CLI::Range(std::uint64_t{16}, std::uint64_t{1} << 32));
  app.add_option("--cgroup-parent", cgroupParent,
                 "Cgroup under which every sandbox of this daemon is made (cleaned at start-up)")
      ->capture_default_str();
  app.add_option("--mount-templates", mountTemplates,
                 "Where akabox keeps the daemon's mount templates (default <state-dir>/mount-templates; off: build every "
                 "sandbox's mounts from scratch); removed at start-up and shutdown");
  app.add_option("--tenants", tenantsFile,
                 "Tenant policy (YAML: admins) (default /etc/akad/tenants.yaml if it exists; else root is the only admin)");
  app.add_option("--akacheck", akacheck, "The trusted checker (default: beside akad, or the build tree)");
  std::string executor = "local";
  slurm::SlurmConfig slurmConfig;
  std::string slurmShared, slurmNodeProgram;
  app.add_option("--executor", executor,
                 "local: attempts run in this daemon's sandboxes; slurm: each attempt is a Slurm job running "
                 "akad-node (docs/operations.md, \"Slurm\")")
      ->check(CLI::IsMember({"local", "slurm"}))
      ->capture_default_str();
  app.add_option("--slurm-shared", slurmShared, "Slurm: the shared area, mounted at this path on every node");
  app.add_option("--slurm-node-program", slurmNodeProgram, "Slurm: akad-node's path on the nodes (default: beside akad)");
  app.add_option("--slurm-partition", slurmConfig.partition, "Slurm: partition (default: the cluster's)");
  app.add_option("--slurm-account", slurmConfig.account, "Slurm: account (default: the submitting user's)");
  app.add_option("--slurm-qos", slurmConfig.qos, "Slurm: quality of service");
  app.add_option("--slurm-gres", slurmConfig.gres, "Slurm: the gres a GPU task asks one of (gpu, gpu:h200, ...)")
      ->capture_default_str();
  app.add_option("--slurm-time-limit", slurmConfig.time_limit_min, "Slurm: job time limit in minutes (0: the partition's)")
      ->check(CLI::Range(0, 525600));
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int rc = app.exit(e);
    return rc == 0 ? 0 : 2;
  }
  log::Level level;
  if (!log::parseLevel(logLevel, level)) {
    std::cerr << "akad: --log-level must be debug, info, warn or error, got \"" << logLevel << "\"\n";
    return 2;
  }
  log::setLevel(level);

  ::signal(SIGPIPE, SIG_IGN);
  raiseFileLimit();
  // Fixing the mmap threshold stops glibc from raising it after a 1 MiB request is freed, so
  // big request buffers go back to the kernel and RSS stays flat across hostile clients.
  ::mallopt(M_MMAP_THRESHOLD, 256 * 1024);

  WorkspaceLimits workspaceLimits;
  if (!parseSize(workspaceSize, workspaceLimits.bytes)) {
    log::error("--workspace-size: expected a size such as 512M or 2G (or 0), got \"", workspaceSize, "\"");
    return 2;
  }
  if (workspaceLimits.bytes > 0 && workspaceLimits.bytes < (1u << 20)) {
    log::error("--workspace-size ", workspaceSize, " is below 1M: no task's files fit");
    return 2;
  }
  workspaceLimits.inodes = workspaceInodes;
  auto attemptRange = parseUidRange(attemptUids);
  if (!attemptRange) {
    log::error("--attempt-uids: ", attemptRange.error().message);
    return 2;
  }
  if (attemptRange->contains(sandboxUid)) {
    log::error("--attempt-uids ", attemptUids, " holds --sandbox-uid ", sandboxUid,
               ": the candidate's sandboxes must not share the trusted ones' uid");
    return 2;
  }
  if (attemptRange->count < static_cast<uid_t>(std::max(workers, 1))) {
    log::error("--attempt-uids ", attemptUids, " has fewer uids than --workers (", workers, ")");
    return 2;
  }
  // A user who owns subordinate ids covering the sandboxes' uids could become them (newuidmap)
  // and trace or signal every sandbox.
  for (const char* file : {"/etc/subuid", "/etc/subgid"}) {
    const auto overlaps = subordinateOverlaps(file, *attemptRange, sandboxUid);
    if (!overlaps.empty()) {
      log::error(file, " gives ", overlaps.front(), " ids that --sandbox-uid ", sandboxUid, " or --attempt-uids ",
                 attemptUids, " use: that user could act as the sandboxes; choose uids outside every range there");
      return 2;
    }
  }

  TenantPolicy tenants;
  if (tenantsFile.empty() && fs::exists("/etc/akad/tenants.yaml")) tenantsFile = "/etc/akad/tenants.yaml";
  if (!tenantsFile.empty()) {
    auto policy = loadTenantPolicy(tenantsFile);
    if (!policy) {
      log::error(policy.error().message);
      return 2;
    }
    tenants = std::move(*policy);
  }

  std::error_code ec;
  const bool madeStateDir = !fs::exists(stateDir);
  fs::create_directories(stateDir, ec);
  if (ec) {
    log::error("cannot create state dir ", stateDir, ": ", ec.message());
    return 1;
  }
  if (madeStateDir) ::chmod(stateDir.c_str(), 0700);
  // A state dir another user could write to (or swap) would let them steer root's writes.
  if (auto s = checkTrustedDirectory(stateDir); !s) {
    log::error("refusing state dir ", stateDir, ": ", s.error().message);
    return 1;
  }
  auto stateLock = lockStateDir(stateDir);
  if (!stateLock) {
    log::error(stateLock.error().message);
    return 1;
  }
  auto store = Store::open(fs::path(stateDir) / "akad.db");
  if (!store) {
    log::error("cannot open store: ", store.error().message);
    return 1;
  }
  // The database holds every tenant's runs: readable by akad's user only.
  for (const char* f : {"akad.db", "akad.db-wal", "akad.db-shm"}) ::chmod((fs::path(stateDir) / f).c_str(), 0600);

  boost::asio::io_context io(1);
  EventBus events;
  TaskCatalog catalog(tasksDir);
  catalog.addRoot(aka::importedTasksRoot(stateDir));  // AgentKernelArena tasks (docs/aka.md)
  DaemonContext context{**store, events, catalog, socketPath, stateDir, std::chrono::steady_clock::now(),
                        nowIso8601(), "none (runs stay queued)", {}, {}, nullptr, nullptr, nullptr, agentsDir, imagesDir, tenants};

  setDefaultCgroupParent(cgroupParent);
  if (mountTemplates.empty()) mountTemplates = (fs::path(stateDir) / "mount-templates").string();
  if (mountTemplates != "off") {
    // akabox keeps templates only in a directory that root owns and only root can write.
    if (::geteuid() != 0) {
      log::info("mount templates off: akad is not root");
    } else {
      if (::mkdir(mountTemplates.c_str(), 0700) != 0 && errno != EEXIST) {
        log::error("--mount-templates: cannot create ", mountTemplates, ": ", std::strerror(errno));
        return 2;
      }
      if (!rootOnlyDirectory(mountTemplates)) {
        log::error("--mount-templates: ", mountTemplates, " must be a directory owned by root that only root can write");
        return 2;
      }
      setMountTemplateDir(fs::absolute(mountTemplates).string());
    }
  }
  auto gpus = selectGpus(gpuList);
  if (!gpus) {
    log::error(gpus.error().message);
    return 2;
  }
  if (NvmlMemoryReport nvml = fillNvidiaMemory(*gpus); !nvml.problem.empty())
    log::info("GPU memory sizes: ", nvml.filled, " from NVML; ", nvml.problem);
  GpuLeases leases(std::move(*gpus));
  context.gpus = &leases;
  snapshot::SnapshotStore snapshots(fs::path(stateDir) / "snapshots");
  context.snapshots = &snapshots;
  std::unique_ptr<Scheduler> scheduler;
  if (workers > 0) {
    SchedulerConfig cfg;
    cfg.workers = workers;
    cfg.state_dir = stateDir;
    cfg.tasks_root = tasksDir;
    cfg.agents_dir = agentsDir;
    cfg.images_dir = imagesDir;
    cfg.akacheck = akacheck.empty() ? findAkacheck() : fs::path(akacheck);
    cfg.requeue_interrupted = !noRequeue;
    cfg.allow_agent_network = !noAgentNetwork;
    cfg.sandbox_uid = sandboxUid;
    cfg.sandbox_gid = sandboxUid;
    cfg.tenants = tenants;
    cfg.attempt_uids = *attemptRange;
    cfg.workspace_limits = workspaceLimits;
    if (executor == "slurm") {
      if (slurmShared.empty()) {
        log::error("--executor slurm needs --slurm-shared (a folder every node mounts at the same path)");
        return 2;
      }
      std::error_code ec;
      fs::create_directories(slurmShared, ec);
      if (ec) {
        log::error("--slurm-shared ", slurmShared, ": ", ec.message());
        return 2;
      }
      slurmConfig.shared = fs::absolute(slurmShared);
      fs::path self = fs::read_symlink("/proc/self/exe", ec);
      slurmConfig.node_program = !slurmNodeProgram.empty() ? fs::path(slurmNodeProgram) : self.parent_path() / "akad-node";
      cfg.slurm = slurmConfig;
    }
    scheduler = std::make_unique<Scheduler>(**store, events, snapshots, leases, cfg);
    if (auto s = scheduler->start(); !s) {
      log::error("cannot start the executor: ", s.error().message);
      return 1;
    }
    context.scheduler = scheduler.get();
    context.executor = std::to_string(workers) + " worker(s)" + (executor == "slurm" ? ", Slurm jobs" : "");
  }
  auto audit = AuditLog::open(fs::path(stateDir) / "audit.log");
  if (!audit) {
    log::error(audit.error().message);
    return 1;
  }
  // Handlers that touch files run here, off the I/O thread (daemon/methods.h).
  WorkPool pool(2);
  MethodTable methods;
  methods.setAuditLog(audit->get());
  methods.setWorkPool(&pool);
  registerDaemonMethods(methods, context);
  registerRunMethods(methods, context);
  registerPipelineMethods(methods, context);
  registerAkaMethods(methods, context);

  ServerOptions options;
  options.socketPath = socketPath;
  options.maxConnections = maxConnections;
  options.socketGroup = socketGroup;
  options.peerLimits = [&tenants](uid_t uid) {
    const TenantLimits l = tenants.limitsFor(uid);
    return ServerOptions::PeerLimits{static_cast<std::size_t>(l.max_connections), l.requests_per_second};
  };
  auto server = std::make_unique<Server>(io, methods, options);
  context.serverStats = [&server] { return server->stats(); };
  context.connectionsOf = [&server](uid_t uid) { return server->connectionsOf(uid); };
  if (auto s = server->listen(); !s) {
    log::error("cannot listen: ", s.error().message);
    return 1;
  }
  server->start();

  boost::asio::signal_set signals(io, SIGTERM, SIGINT);
  signals.async_wait([&](const boost::system::error_code& sec, int signo) {
    if (sec) return;
    log::info("received ", ::strsignal(signo), "; shutting down");
    server->stop();
  });

  auto version = (*store)->schemaVersion();
  log::info("akad ", kVersion, " pid ", ::getpid(), " listening on ", socketPath, "; state ", stateDir,
            " (schema v", version ? *version : -1, "); tasks ", tasksDir);
  io.run();

  server.reset();
  // Everything that still uses the store stops first: background jobs (validation, exports)
  // and the executor's workers, whose sandboxes get the cancel; a scoring cancelled this way
  // records nothing and its attempt is queued again. Only then does the store close.
  stopPipelineJobs();
  if (scheduler) scheduler->stop();
  store->reset();
  log::info("stopped");
  return 0;
}
