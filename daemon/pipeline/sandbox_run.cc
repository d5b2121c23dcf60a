#include "daemon/pipeline/sandbox_run.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <sstream>

#include "akad/version.h"
#include "common/data_root.h"
#include "common/log.h"
#include "common/unique_fd.h"

namespace fs = std::filesystem;

namespace akad {
namespace {
constexpr std::size_t kMaxResultBytes = 1 << 20;
std::string g_cgroupParent = "akad";
std::string g_mountTemplateDir;

std::string formatSeconds(double s) {
  std::ostringstream os;
  os << s;
  return os.str();
}
}  // namespace

std::string SandboxOutcome::describe() const {
  if (status == "exited") return "exited with " + std::to_string(exit_code);
  if (status == "signaled")
    return "killed by signal " + result.value("signal", nlohmann::json(0)).dump();
  if (status == "wall-timeout") return "killed at the wall-time limit after " + formatSeconds(wall_s) + " s";
  if (status == "cpu-timeout") return "killed at the CPU-time limit after " + formatSeconds(cpu_s) + " s of CPU";
  if (status == "oom") return "killed by the memory limit (out of memory)";
  if (status == "output-limit") return "stopped at the output limit";
  if (status == "setup-failed") return "sandbox set-up failed: " + result.value("message", nlohmann::json("?")).dump();
  return "ended with status " + status;
}

namespace {
// ESRCH (akabox already exited) is no error: there is nothing left to stop.
void terminate(int pidfd) { (void)::syscall(SYS_pidfd_send_signal, pidfd, SIGTERM, nullptr, 0); }
}  // namespace

void SandboxCanceller::cancel() {
  std::lock_guard lock(mutex_);
  cancelled_ = true;
  if (pidfd_ >= 0) terminate(pidfd_);
}
void SandboxCanceller::attach(int pidfd) {
  std::lock_guard lock(mutex_);
  pidfd_ = pidfd;
  if (cancelled_) terminate(pidfd_);
}
void SandboxCanceller::detach() {
  std::lock_guard lock(mutex_);
  pidfd_ = -1;
}

void setDefaultCgroupParent(const std::string& parent) { g_cgroupParent = parent; }
const std::string& defaultCgroupParent() { return g_cgroupParent; }
void setMountTemplateDir(const std::string& dir) { g_mountTemplateDir = dir; }
const std::string& mountTemplateDir() { return g_mountTemplateDir; }

namespace {
// akabox's whole environment: it gets nothing else from the daemon.
std::vector<std::string> akaboxEnvironment() {
  std::vector<std::string> env = {"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
                                  "AKAD_DATA_DIR=" + dataRoot().string()};
  if (!g_mountTemplateDir.empty()) env.push_back("AKABOX_TEMPLATE_DIR=" + g_mountTemplateDir);
  return env;
}

std::vector<char*> pointersTo(std::vector<std::string>& strings) {
  std::vector<char*> out;
  for (auto& s : strings) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}
}  // namespace

namespace {

// `akabox cleanup` run to its end; what kept it from succeeding, if anything.
Status runAkaboxCleanup() {
  std::vector<std::string> args = {akaboxPath().string(), "cleanup", "--cgroup-parent", g_cgroupParent};
  if (!g_mountTemplateDir.empty()) args.push_back("--templates");
  std::vector<std::string> env = akaboxEnvironment();
  std::vector<char*> argv = pointersTo(args), envp = pointersTo(env);
  pid_t pid = ::fork();
  if (pid < 0) return errnoError("fork for " + args[0] + " cleanup");
  if (pid == 0) {
    ::execve(argv[0], argv.data(), envp.data());
    ::_exit(127);
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) return errnoError("waitpid for " + args[0] + " cleanup");
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return {};
  if (WIFSIGNALED(status)) return Error{args[0] + " cleanup was killed by signal " + std::to_string(WTERMSIG(status))};
  if (WEXITSTATUS(status) == 127) return Error{args[0] + " cleanup could not be started (exit 127: no such program, or not executable)"};
  return Error{args[0] + " cleanup exited with status " + std::to_string(WEXITSTATUS(status)) + " (its stderr, the daemon's, says why)"};
}

}  // namespace

void cleanupSandboxLeftovers() {
  if (auto s = runAkaboxCleanup(); !s)
    log::warn("akabox cleanup of leftover sandboxes", g_mountTemplateDir.empty() ? "" : " and mount templates",
              " did not succeed: ", s.error().message);
}

fs::path akaboxPath() {
  if (const char* env = std::getenv("AKABOX"); env != nullptr && *env != '\0') return env;
  return companionProgram("akabox", "sandbox");
}

fs::path netBridgePath() { return akaboxPath().parent_path() / "akanet-bridge"; }

std::vector<std::string> akaboxArgv(const fs::path& akabox, const SandboxRequest& r) {
  std::vector<std::string> a = {akabox.string(), "run"};
  auto add = [&](const std::string& flag, const std::string& value) {
    a.push_back(flag);
    a.push_back(value);
  };
  if (!r.workspace.empty()) add("--workspace", r.workspace.string());
  for (const auto& b : r.binds) add("--bind", b.source.string() + ":" + b.target + (b.writable ? ":rw" : ""));
  for (const auto& t : r.tmpfs) {
    std::string value = t.target;
    if (t.size_bytes) value.append(":").append(std::to_string(t.size_bytes));
    if (t.huge_pages) value += ":huge";
    add("--tmpfs", value);
  }
  // The environment (credentials among it) is not on the command line, where every local user
  // could read it in /proc/PID/cmdline: runSandbox passes it in a spec on fd 4.
  if (!r.env.empty()) add("--spec", "/dev/fd/4");
  add("--memory", std::to_string(r.memory_bytes));
  add("--pids", std::to_string(r.pids));
  add("--wall-time", formatSeconds(r.wall_s));
  if (r.cpu_s > 0) add("--cpu-time", formatSeconds(r.cpu_s));
  add("--output-limit", std::to_string(r.output_limit));
  add("--net", r.network_host ? "host" : "none");
  add("--seccomp", r.seccomp);
  for (const auto& g : r.gpus) add("--gpu", g);
  if (!r.stdout_file.empty()) add("--stdout", r.stdout_file.string());
  if (!r.stderr_file.empty()) add("--stderr", r.stderr_file.string());
  add("--cgroup-parent", r.cgroup_parent.empty() ? defaultCgroupParent() : r.cgroup_parent);
  if (r.outside_uid != 0) add("--outside-uid", std::to_string(r.outside_uid));
  if (r.outside_gid != 0) add("--outside-gid", std::to_string(r.outside_gid));
  if (!g_mountTemplateDir.empty()) a.push_back("--mount-template");
  add("--result-fd", "3");
  a.push_back("--");
  a.insert(a.end(), r.command.begin(), r.command.end());
  return a;
}

namespace {

// The sandbox's environment as a spec of its own in a memfd, to be inherited as fd 4: only root
// (akabox's owner) can read it there.
Result<UniqueFd> environmentFile(const std::map<std::string, std::string>& env) {
  UniqueFd made(::memfd_create("akabox-env", MFD_CLOEXEC));
  if (made.get() < 0) return errnoError("cannot create the environment file for akabox");
  // Above the numbers the child dup2s onto, so that neither copy overwrites it.
  UniqueFd envFd(::fcntl(made.get(), F_DUPFD_CLOEXEC, 10));
  if (envFd.get() < 0) return errnoError("cannot create the environment file for akabox");
  const std::string spec = nlohmann::json{{"env", env}}.dump();
  for (size_t done = 0; done < spec.size();) {
    const ssize_t n = ::pwrite(envFd.get(), spec.data() + done, spec.size() - done, static_cast<off_t>(done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return errnoError("cannot write the environment file for akabox");
    done += static_cast<size_t>(n);
  }
  return envFd;
}

// The result JSON akabox wrote on fd 3, with its wait status: what the sandbox's command did.
Result<SandboxOutcome> readOutcome(const std::string& text, int status, const std::string& akabox) {
  SandboxOutcome out;
  if (WIFEXITED(status) && WEXITSTATUS(status) == 127 && text.empty())
    return Error{"cannot execute " + akabox + " (is akabox built? set AKABOX to its path)"};
  try {
    out.result = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception&) {
    return Error{"akabox (" + akabox + ") gave no readable result JSON; its exit status was " +
                 std::to_string(WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status))};
  }
  if (!out.result.is_object()) return Error{"akabox's result is not a JSON object"};
  auto number = [&](const char* key, double fallback) {
    auto it = out.result.find(key);
    return (it != out.result.end() && it->is_number()) ? it->get<double>() : fallback;
  };
  auto st = out.result.find("status");
  out.status = (st != out.result.end() && st->is_string()) ? st->get<std::string>() : "setup-failed";
  out.exit_code = static_cast<int>(number("exit_code", -1));
  out.wall_s = number("wall_s", 0);
  out.cpu_s = number("cpu_s", 0);
  return out;
}

}  // namespace

Result<SandboxOutcome> runSandbox(const SandboxRequest& request, SandboxCanceller* canceller) {
  if (request.command.empty()) return Error{"sandbox request without a command"};
  std::vector<std::string> args = akaboxArgv(akaboxPath(), request);
  std::vector<char*> argv = pointersTo(args);
  // akabox gets a clean environment; the sandbox's own comes in the spec on fd 4.
  std::vector<std::string> env = akaboxEnvironment();
  std::vector<char*> envp = pointersTo(env);

  UniqueFd envFd;
  if (!request.env.empty()) {
    auto made = environmentFile(request.env);
    if (!made) return made.error();
    envFd = std::move(*made);
  }

  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return errnoError("cannot create the result pipe for akabox");
  UniqueFd readEnd(fds[0]), writeEnd(fds[1]);
  int devNull = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  UniqueFd nullFd(devNull);

  // Between fork and exec only async-signal-safe calls: the daemon is multi-threaded.
  const pid_t daemonPid = ::getpid();
  pid_t pid = ::fork();
  if (pid < 0) return errnoError("cannot fork to start akabox");
  if (pid == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // a killed daemon takes its sandboxes with it
    // A daemon killed between the fork and the prctl sends no signal: the child then has a
    // new parent already, and must not go on to run a sandbox nobody waits for.
    if (::getppid() != daemonPid) ::_exit(127);
    if (nullFd.get() >= 0) ::dup2(nullFd.get(), 0);
    ::dup2(writeEnd.get(), 3);  // dup2 clears FD_CLOEXEC on the copy
    if (envFd.get() >= 0) ::dup2(envFd.get(), 4);
    ::execve(argv[0], argv.data(), envp.data());
    ::_exit(127);
  }
  writeEnd.reset();
  // Before any wait can reap akabox, so the pidfd is surely its own.
  UniqueFd pidfd(static_cast<int>(::syscall(SYS_pidfd_open, pid, 0)));
  if (!pidfd.valid()) {
    const int err = errno;
    ::kill(pid, SIGKILL);  // not reaped yet: the pid is still akabox's
    while (::waitpid(pid, nullptr, 0) < 0 && errno == EINTR) {
    }
    return errnoError("pidfd_open(akabox)", err);
  }
  if (canceller) canceller->attach(pidfd.get());

  std::string json;
  char buf[8192];
  for (;;) {
    ssize_t n = ::read(readEnd.get(), buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    if (json.size() < kMaxResultBytes) json.append(buf, static_cast<std::size_t>(n));
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (canceller) canceller->detach();

  auto out = readOutcome(json, status, args[0]);
  if (!out) return out.error();
  if (canceller) canceller->addCommandSeconds(out->wall_s);
  return out;
}

}  // namespace akad
