// akad: the daemon. Flags and signals here; the pieces live in server/methods/store/events.

#include <fcntl.h>
#include <malloc.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <utility>
#include <boost/asio.hpp>
#include <filesystem>
#include <iostream>

#include "akad/version.h"
#include "common/log.h"
#include "common/paths.h"
#include "common/unique_fd.h"
#include "daemon/context.h"
#include "daemon/daemon_methods.h"
#include "daemon/events.h"
#include "daemon/methods.h"
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
  UniqueFd fd(::open(lock.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600));
  if (!fd.valid()) return errnoError("cannot open " + lock.string());
  if (::flock(fd.get(), LOCK_EX | LOCK_NB) != 0) {
    if (errno == EWOULDBLOCK) return Error{"another akad is using state dir " + dir.string(), 0};
    return errnoError("flock " + lock.string());
  }
  return fd;
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

  std::error_code ec;
  fs::create_directories(stateDir, ec);
  if (ec) {
    log::error("cannot create state dir ", stateDir, ": ", ec.message());
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

  boost::asio::io_context io(1);
  EventBus events;
  TaskCatalog catalog(tasksDir);
  DaemonContext context{**store, events, catalog, socketPath, stateDir, std::chrono::steady_clock::now(),
                        nowIso8601(), "none (runs stay queued)", {}};
  MethodTable methods;
  registerDaemonMethods(methods, context);
  registerRunMethods(methods, context);

  ServerOptions options;
  options.socketPath = socketPath;
  options.maxConnections = maxConnections;
  options.socketGroup = socketGroup;
  auto server = std::make_unique<Server>(io, methods, options);
  context.serverStats = [&server] { return server->stats(); };
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
  store->reset();
  log::info("stopped");
  return 0;
}
