// akad: the daemon's start-up and shut-down, in order: the flags (flags.h), the process, the
// state dir and store, mount templates, GPUs, the executor, then the socket; the pieces live in
// server/methods/store/events.

#include <fcntl.h>
#include <malloc.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <optional>
#include <utility>
#include <boost/asio.hpp>
#include <filesystem>
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
#include "daemon/flags.h"
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

// A --trusted-cache of the operator's: trusted binaries, so refused if anyone but akad's user could
// write to it or swap it (the default is inside the state dir, checked with it).
Status setUpTrustedCache(const DaemonOptions& o) {
  if (o.trustedCache.empty()) return {};
  if (auto s = makeTrustedDirectory(o.trustedCache); !s)
    return Error{"refusing --trusted-cache " + o.trustedCache + ": " + s.error().message};
  return {};
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

// From the checked flags to a serving daemon, and back down in order on SIGTERM or SIGINT: an
// exit status.
int serve(const DaemonOptions& o, const CheckedOptions& checked, OpenState& state) {
  boost::asio::io_context io(1);
  EventBus events;
  TaskCatalog catalog(o.tasksDir);
  catalog.addRoot(aka::importedTasksRoot(o.stateDir));  // AgentKernelArena tasks (docs/aka.md)
  DaemonContext context{.store = *state.store,
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
                        .tenants = checked.tenants};

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
  auto scheduler = startExecutor(o, checked, context, leases);
  if (!scheduler) {
    log::error("cannot start the executor: ", scheduler.error().message);
    return 1;
  }
  Frontend frontend;
  boost::asio::signal_set signals(io, SIGTERM, SIGINT);
  const Status served = startServing(io, signals, o, context, checked.tenants, frontend);
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
  state.store.reset();
  if (!served) return 1;
  log::info("stopped");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  DaemonOptions o;
  if (auto exit = parseFlags(argc, argv, o)) return *exit;
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
  if (auto s = setUpTrustedCache(o); !s) {
    log::error(s.error().message);
    return 1;
  }
  return serve(o, *checked, *state);
}
