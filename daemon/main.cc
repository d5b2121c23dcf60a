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
#include <optional>
#include <utility>
#include <boost/asio.hpp>
#include <filesystem>
#include <iostream>
#include <sstream>

#include "akad/version.h"
#include "common/byte_size.h"
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

// A daemon's process-wide settings: clients that hang up cost no signal, descriptors for every
// connection, and memory that goes back to the kernel.
void prepareProcess() {
  ::signal(SIGPIPE, SIG_IGN);
  raiseFileLimit();
  // Fixing the mmap threshold stops glibc from raising it after a 1 MiB request is freed, so
  // big request buffers go back to the kernel and RSS stays flat across hostile clients.
  ::mallopt(M_MMAP_THRESHOLD, 256 * 1024);
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

// Each NVIDIA GPU's memory size from NVML, where discovery could not read it.
std::vector<gpu::GpuDevice> withMemorySizes(std::vector<gpu::GpuDevice> gpus) {
  if (NvmlMemoryReport nvml = fillNvidiaMemory(gpus); !nvml.problem.empty())
    log::info("GPU memory sizes: ", nvml.filled, " from NVML; ", nvml.problem);
  return gpus;
}

// --gpus all | none | comma-separated ids ("nvidia0") or discovery indices ("0").
Result<std::vector<gpu::GpuDevice>> selectGpus(const std::string& spec) {
  if (spec == "none") return std::vector<gpu::GpuDevice>{};
  auto found = gpu::discoverGpus();
  if (!found) return Error{"GPU discovery failed: " + found.error().message};
  if (spec == "all") return withMemorySizes(std::move(*found));
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
  return withMemorySizes(std::move(chosen));
}

// The checker is installed beside akad, or built in the tree's tasks/ folder.
fs::path findAkacheck() { return companionProgram("akacheck", "tasks"); }

// Every flag, by name. Defaults here are the documented ones (docs/operations.md, "akad flags").
struct DaemonOptions {
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
  std::string executor = "local";
  slurm::SlurmConfig slurm;
  std::string slurmShared, slurmNodeProgram;
};

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
  app.add_option("--slurm-gres", o.slurm.gres, "Slurm: the gres a GPU task asks one of (gpu, gpu:h200, ...)")
      ->capture_default_str();
  app.add_option("--slurm-time-limit", o.slurm.time_limit_min, "Slurm: job time limit in minutes (0: the partition's)")
      ->check(CLI::Range(0, 525600));
}

// What the flags mean once checked against each other and the host: refused with a reason
// (exit status 2) before anything is opened.
struct CheckedOptions {
  WorkspaceLimits workspace;
  UidRange attemptUids;
  TenantPolicy tenants;
  std::optional<slurm::SlurmConfig> slurm;
};

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
  fs::create_directories(o.slurmShared, ec);
  if (ec) return Error{"--slurm-shared " + o.slurmShared + ": " + ec.message()};
  slurm::SlurmConfig c = o.slurm;
  c.shared = fs::absolute(o.slurmShared);
  c.node_program = !o.slurmNodeProgram.empty() ? fs::path(o.slurmNodeProgram) : companionProgram("akad-node", "daemon");
  return std::optional<slurm::SlurmConfig>(c);
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

// The state dir, made private if new and refused if anyone else could write it, locked against
// a second daemon, and the store in it.
struct OpenState {
  UniqueFd lock;
  std::unique_ptr<Store> store;
};

Result<OpenState> openState(const std::string& stateDir) {
  std::error_code ec;
  const bool made = !fs::exists(stateDir);
  fs::create_directories(stateDir, ec);
  if (ec) return Error{"cannot create state dir " + stateDir + ": " + ec.message()};
  if (made && ::chmod(stateDir.c_str(), 0700) != 0) return errnoError("chmod 0700 " + stateDir);
  // A state dir another user could write to (or swap) would let them steer root's writes.
  if (auto s = checkTrustedDirectory(stateDir); !s) return Error{"refusing state dir " + stateDir + ": " + s.error().message};
  auto lock = lockStateDir(stateDir);
  if (!lock) return lock.error();
  auto store = Store::open(fs::path(stateDir) / "akad.db");
  if (!store) return Error{"cannot open store: " + store.error().message};
  // The database holds every tenant's runs: readable by akad's user only.
  for (const char* f : {"akad.db", "akad.db-wal", "akad.db-shm"}) {
    const fs::path p = fs::path(stateDir) / f;
    if (::chmod(p.c_str(), 0600) != 0 && errno != ENOENT) return errnoError("chmod 0600 " + p.string());
  }
  return OpenState{std::move(*lock), std::move(*store)};
}

// akabox keeps templates only in a directory that root owns and only root can write.
Status setUpMountTemplates(const DaemonOptions& o) {
  const std::string dir = o.mountTemplates.empty() ? (fs::path(o.stateDir) / "mount-templates").string() : o.mountTemplates;
  if (dir == "off") return {};
  if (::geteuid() != 0) {
    log::info("mount templates off: akad is not root");
    return {};
  }
  if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST)
    return Error{"--mount-templates: cannot create " + dir + ": " + std::strerror(errno)};
  if (!rootOnlyDirectory(dir))
    return Error{"--mount-templates: " + dir + " must be a directory owned by root that only root can write"};
  setMountTemplateDir(fs::absolute(dir).string());
  return {};
}

SchedulerConfig schedulerConfig(const DaemonOptions& o, const CheckedOptions& c) {
  SchedulerConfig cfg;
  cfg.workers = o.workers;
  cfg.state_dir = o.stateDir;
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

// The socket's side: the audit log, the pool for handlers that touch files, the method table and
// the server. Owned by main() so that they outlive the executor's stop, as handlers may wait on it.
struct Frontend {
  std::unique_ptr<AuditLog> audit;
  WorkPool pool{2};  // handlers that touch files run here, off the I/O thread (daemon/methods.h)
  MethodTable methods;
  std::unique_ptr<Server> server;
};

// Registers the methods and listens; the server stops on SIGTERM or SIGINT.
Status startServing(boost::asio::io_context& io, boost::asio::signal_set& signals, const DaemonOptions& o,
                    DaemonContext& context, const TenantPolicy& tenants, Frontend& f) {
  auto audit = AuditLog::open(fs::path(o.stateDir) / "audit.log");
  if (!audit) return audit.error();
  f.audit = std::move(*audit);
  f.methods.setAuditLog(f.audit.get());
  f.methods.setWorkPool(&f.pool);
  registerDaemonMethods(f.methods, context);
  registerRunMethods(f.methods, context);
  registerPipelineMethods(f.methods, context);
  registerAkaMethods(f.methods, context);

  ServerOptions options;
  options.socketPath = o.socketPath;
  options.maxConnections = o.maxConnections;
  options.socketGroup = o.socketGroup;
  options.peerLimits = [&tenants](uid_t uid) {
    const TenantLimits l = tenants.limitsFor(uid);
    return ServerOptions::PeerLimits{static_cast<std::size_t>(l.max_connections), l.requests_per_second};
  };
  f.server = std::make_unique<Server>(io, f.methods, options);
  Server* server = f.server.get();
  context.serverStats = [server] { return server->stats(); };
  context.connectionsOf = [server](uid_t uid) { return server->connectionsOf(uid); };
  if (auto s = f.server->listen(); !s) return Error{"cannot listen: " + s.error().message};
  f.server->start();
  signals.async_wait([server](const boost::system::error_code& sec, int signo) {
    if (sec) return;
    log::info("received ", ::strsignal(signo), "; shutting down");
    server->stop();
  });
  auto version = context.store.schemaVersion();
  log::info("akad ", kVersion, " pid ", ::getpid(), " listening on ", o.socketPath, "; state ", o.stateDir,
            " (schema v", version ? *version : -1, "); tasks ", o.tasksDir);
  return {};
}

// The executor, unless --workers 0 leaves runs queued; recovers the last daemon's attempts.
Result<std::unique_ptr<Scheduler>> startExecutor(const DaemonOptions& o, const CheckedOptions& c,
                                                 DaemonContext& context, GpuLeases& leases) {
  if (o.workers == 0) return std::unique_ptr<Scheduler>();
  auto scheduler = std::make_unique<Scheduler>(context.store, context.events, *context.snapshots, leases,
                                               schedulerConfig(o, c));
  if (auto s = scheduler->start(); !s) return s.error();
  context.scheduler = scheduler.get();
  context.executor = std::to_string(o.workers) + " worker(s)" + (c.slurm ? ", Slurm jobs" : "");
  return scheduler;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"akad: sandbox orchestrator daemon for agentic GPU-kernel benchmarks.\n"
               "Serves akactl over a Unix socket; state lives in SQLite under the state dir."};
  DaemonOptions o;
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
  auto checked = checkOptions(o);
  if (!checked) {
    log::error(checked.error().message);
    return 2;
  }

  prepareProcess();

  auto state = openState(o.stateDir);
  if (!state) {
    log::error(state.error().message);
    return 1;
  }
  boost::asio::io_context io(1);
  EventBus events;
  TaskCatalog catalog(o.tasksDir);
  catalog.addRoot(aka::importedTasksRoot(o.stateDir));  // AgentKernelArena tasks (docs/aka.md)
  DaemonContext context{.store = *state->store,
                        .events = events,
                        .tasks = catalog,
                        .socketPath = o.socketPath,
                        .stateDir = o.stateDir,
                        .startedAt = std::chrono::steady_clock::now(),
                        .startedAtIso = isoTimeUtc(),
                        .executor = "none (runs stay queued)",
                        .serverStats = {},
                        .connectionsOf = {},
                        .scheduler = nullptr,
                        .snapshots = nullptr,
                        .gpus = nullptr,
                        .agentsDir = o.agentsDir,
                        .imagesDir = o.imagesDir,
                        .tenants = checked->tenants};

  setDefaultCgroupParent(o.cgroupParent);
  if (auto s = setUpMountTemplates(o); !s) {
    log::error(s.error().message);
    return 2;
  }
  auto gpus = selectGpus(o.gpuList);
  if (!gpus) {
    log::error(gpus.error().message);
    return 2;
  }
  GpuLeases leases(std::move(*gpus));
  context.gpus = &leases;
  snapshot::SnapshotStore snapshots(fs::path(o.stateDir) / "snapshots");
  context.snapshots = &snapshots;
  auto scheduler = startExecutor(o, *checked, context, leases);
  if (!scheduler) {
    log::error("cannot start the executor: ", scheduler.error().message);
    return 1;
  }
  Frontend frontend;
  boost::asio::signal_set signals(io, SIGTERM, SIGINT);
  const Status served = startServing(io, signals, o, context, checked->tenants, frontend);
  if (served) io.run();
  else log::error(served.error().message);
  frontend.server.reset();
  context.serverStats = nullptr;
  context.connectionsOf = nullptr;
  // Everything that still uses the store stops first: background jobs (validation, exports)
  // and the executor's workers, whose sandboxes get the cancel; a scoring cancelled this way
  // records nothing and its attempt is queued again. Only then does the store close.
  stopPipelineJobs();
  if (*scheduler) (*scheduler)->stop();
  state->store.reset();
  if (!served) return 1;
  log::info("stopped");
  return 0;
}
