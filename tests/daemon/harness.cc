#include <algorithm>
#include "tests/daemon/harness.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <thread>

#include "common/client.h"

extern char** environ;

namespace akad::test {

fs::path akadBinary() { return AKAD_TEST_AKAD_BIN; }
fs::path akactlBinary() { return AKAD_TEST_AKACTL_BIN; }

TempDir::TempDir() {
  std::string tmpl = "/tmp/akt-XXXXXX";
  if (::mkdtemp(tmpl.data()) == nullptr) std::abort();
  path_ = tmpl;
}

TempDir::~TempDir() {
  std::error_code ec;
  fs::remove_all(path_, ec);
}

fs::path writeFakeTasks(const fs::path& root) {
  fs::path tasks = root / "tasks";
  for (const char* id : {"cpu/softmax", "cpu/vecadd", "hip2hip/gemm"}) {
    // A minimal but valid task: the daemon validates every task.yaml it is asked to run.
    const fs::path dir = tasks / id;
    for (const char* sub : {"workspace", "harness", "solution"}) fs::create_directories(dir / sub);
    std::ofstream(dir / "workspace" / "kernel.cpp") << "// baseline\n";
    std::ofstream(dir / "solution" / "kernel.cpp") << "// solution\n";
    std::ofstream(dir / "task.yaml")
        << "id: " << fs::path(id).filename().string() << "\n"
        << "suite: " << fs::path(id).parent_path().string() << "\n"
        << "title: fake task for protocol tests\n"
        << "prompt: nothing to do\n"
        << "harness: cpp\n"
        << "editable: [kernel.cpp]\n"
        << "build: {reference: [\"true\"], candidate: [\"true\"]}\n"
        << "configs:\n  visible: [{name: v1, n: 1}]\n  held_out: [{name: h1, n: 2}]\n"
        << "tolerances: {f32: {atol: 0.0, rtol: 0.0}}\n";
  }
  // Shared harness code has no task.yaml and must not count as a task.
  fs::create_directories(tasks / "common" / "cpp");
  return tasks;
}

bool processExists(pid_t pid) {
  if (::kill(pid, 0) == 0) return true;
  return errno != ESRCH;
}

long residentKiB(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stol(line.substr(6));
  }
  return -1;
}

std::vector<std::string> linesOf(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

static std::string slurp(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

Result<std::unique_ptr<ChildProcess>> ChildProcess::spawn(const std::vector<std::string>& argv,
                                                          const std::vector<std::string>& extraEnv) {
  std::unique_ptr<ChildProcess> child(new ChildProcess());
  child->io_ = std::make_unique<TempDir>();
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  std::string outPath = (child->io_->path() / "stdout").string();
  std::string errPath = (child->io_->path() / "stderr").string();
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 1, outPath.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  posix_spawn_file_actions_addopen(&actions, 2, errPath.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  std::vector<std::string> envStrings;
  for (char** e = environ; *e != nullptr; ++e) {
    // The tests choose the socket explicitly; an inherited AKAD_SOCKET must not leak in.
    if (std::string_view(*e).rfind("AKAD_SOCKET=", 0) == 0) continue;
    envStrings.emplace_back(*e);
  }
  for (const auto& e : extraEnv) envStrings.push_back(e);
  std::vector<char*> env;
  for (auto& e : envStrings) env.push_back(e.data());
  env.push_back(nullptr);
  pid_t pid = -1;
  int rc = ::posix_spawn(&pid, argv[0].c_str(), &actions, nullptr, args.data(), env.data());
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) return errnoError("posix_spawn " + argv[0], rc);
  child->pid_ = pid;
  return child;
}

ChildProcess::~ChildProcess() {
  if (pid_ > 0 && !reaped_) {
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, &status_, 0);
  }
}

bool ChildProcess::running() {
  if (reaped_) return false;
  pid_t r = ::waitpid(pid_, &status_, WNOHANG);
  if (r == pid_) {
    reaped_ = true;
    return false;
  }
  return true;
}

void ChildProcess::signal(int signo) {
  if (!reaped_) ::kill(pid_, signo);
}

CommandResult ChildProcess::wait(std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (running() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  CommandResult r;
  r.out = stdoutText();
  r.err = stderrText();
  if (!reaped_) return r;  // still running: exitCode -1
  if (WIFEXITED(status_)) r.exitCode = WEXITSTATUS(status_);
  else if (WIFSIGNALED(status_)) r.exitCode = 128 + WTERMSIG(status_);
  return r;
}

std::string ChildProcess::stdoutText() const { return slurp(io_->path() / "stdout"); }
std::string ChildProcess::stderrText() const { return slurp(io_->path() / "stderr"); }

CommandResult runCommand(const std::vector<std::string>& argv, const std::vector<std::string>& extraEnv,
                         std::chrono::milliseconds timeout) {
  auto child = ChildProcess::spawn(argv, extraEnv);
  if (!child) return CommandResult{-1, "", child.error().message};
  auto r = (*child)->wait(timeout);
  if (r.exitCode == -1) r.err += "\n[harness: timed out after " + std::to_string(timeout.count()) + " ms]";
  return r;
}

Result<std::unique_ptr<DaemonProcess>> DaemonProcess::start(const Paths& paths,
                                                            const std::vector<std::string>& extraArgs) {
  std::vector<std::string> argv{akadBinary().string(), "--socket", paths.socket.string(), "--state-dir",
                                paths.stateDir.string(), "--tasks-dir", paths.tasksDir.string()};
  // The protocol tests want runs to stay queued: no executor unless a test asks for workers.
  if (std::find(extraArgs.begin(), extraArgs.end(), "--workers") == extraArgs.end()) {
    argv.push_back("--workers");
    argv.push_back("0");
  }
  argv.insert(argv.end(), extraArgs.begin(), extraArgs.end());
  auto child = ChildProcess::spawn(argv);
  if (!child) return child.error();
  std::unique_ptr<DaemonProcess> d(new DaemonProcess());
  d->paths_ = paths;
  d->child_ = std::move(*child);
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (std::chrono::steady_clock::now() < deadline) {
    if (!d->child_->running()) {
      auto r = d->child_->wait(std::chrono::milliseconds(0));
      return Error{"akad exited with " + std::to_string(r.exitCode) + " before answering; its log:\n" + r.err, 0};
    }
    if (auto c = Client::connect(paths.socket); c) {
      // Another daemon may be answering on this socket; ready means *ours* answers.
      if (auto info = c->call("daemon.info"); info && info->value("pid", -1) == d->pid()) return d;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return Error{"akad did not answer on " + paths.socket.string() + " within 10 s; its log:\n" + d->log(), 0};
}

DaemonProcess::~DaemonProcess() = default;  // ChildProcess kills and reaps

int DaemonProcess::stop(int signo) {
  child_->signal(signo);
  return child_->wait(std::chrono::seconds(20)).exitCode;
}

CommandResult akactl(const fs::path& socket, const std::vector<std::string>& args) {
  std::vector<std::string> argv{akactlBinary().string(), "--socket", socket.string()};
  argv.insert(argv.end(), args.begin(), args.end());
  return runCommand(argv);
}

std::vector<fs::path> cgroupParentDirs(const std::string& parent) {
  const fs::path root = "/sys/fs/cgroup";
  std::vector<fs::path> out;
  std::error_code ec;
  if (fs::is_directory(root / parent, ec)) out.push_back(root / parent);
  for (const auto& h : fs::directory_iterator(root, ec))
    if (fs::is_directory(h.path() / parent, ec)) out.push_back(h.path() / parent);
  return out;
}

std::vector<fs::path> cgroupsUnder(const std::string& parent) {
  std::vector<fs::path> out;
  std::error_code ec;
  for (const fs::path& p : cgroupParentDirs(parent))
    for (const auto& c : fs::directory_iterator(p, ec))
      if (c.is_directory()) out.push_back(c.path());
  return out;
}

std::vector<std::string> mountsUnder(const fs::path& dir) {
  std::vector<std::string> out;
  std::ifstream in("/proc/self/mountinfo");
  const std::string prefix = dir.string();
  for (std::string line; std::getline(in, line);) {
    std::istringstream fields(line);
    std::string id, parent, dev, root, point;
    fields >> id >> parent >> dev >> root >> point;
    if (point.rfind(prefix, 0) == 0) out.push_back(id + " " + point);
  }
  return out;
}

}  // namespace akad::test
