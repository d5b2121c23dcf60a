#pragma once
// Test harness: temporary directories, the real akad binary as a child process, and running
// the real akactl. Every process started here is killed and reaped by its owner.

#include <sys/types.h>

#include <csignal>

#include <chrono>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "common/result.h"

namespace akad::test {

namespace fs = std::filesystem;

fs::path akadBinary();
fs::path akactlBinary();

// A fresh directory under /tmp (short: socket paths are limited to 107 bytes), removed with
// everything in it on destruction.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const fs::path& path() const { return path_; }
  fs::path operator/(const std::string& name) const { return path_ / name; }

 private:
  fs::path path_;
};

// tasks/cpu/softmax, tasks/cpu/vecadd, tasks/hip2hip/gemm: minimal valid tasks (the daemon
// validates every task it is asked to run) that build nothing. Returns the tasks root.
fs::path writeFakeTasks(const fs::path& root);

// True while `pid` exists (and is not a zombie of ours that was already reaped).
bool processExists(pid_t pid);
// VmRSS of a process in KiB, from /proc/PID/status; -1 if unreadable.
long residentKiB(pid_t pid);

// The lines of a message (an error that names one problem a line), without their newlines.
std::vector<std::string> linesOf(const std::string& text);

struct CommandResult {
  int exitCode = -1;  // exit status, or 128+signal
  std::string out;
  std::string err;
};

// A child process with stdout/stderr captured to files; killed (SIGKILL) and reaped on destruction.
class ChildProcess {
 public:
  static Result<std::unique_ptr<ChildProcess>> spawn(const std::vector<std::string>& argv,
                                                     const std::vector<std::string>& extraEnv = {});
  ~ChildProcess();
  pid_t pid() const { return pid_; }
  // Waits for exit up to `timeout`; nullopt-like -1 exit code if it is still running.
  CommandResult wait(std::chrono::milliseconds timeout = std::chrono::seconds(30));
  bool running();
  void signal(int signo);
  std::string stdoutText() const;
  std::string stderrText() const;

 private:
  ChildProcess() = default;
  pid_t pid_ = -1;
  bool reaped_ = false;
  int status_ = 0;
  std::unique_ptr<TempDir> io_;
};

CommandResult runCommand(const std::vector<std::string>& argv, const std::vector<std::string>& extraEnv = {},
                         std::chrono::milliseconds timeout = std::chrono::seconds(30));

// The real akad on a socket and state dir of the caller's choosing.
class DaemonProcess {
 public:
  struct Paths {
    fs::path socket;
    fs::path stateDir;
    fs::path tasksDir;
  };
  // Starts akad and waits until it answers daemon.ping (or exits, or 10 s pass).
  static Result<std::unique_ptr<DaemonProcess>> start(const Paths& paths,
                                                      const std::vector<std::string>& extraArgs = {});
  ~DaemonProcess();  // SIGKILL + reap if still running
  pid_t pid() const { return child_->pid(); }
  const Paths& paths() const { return paths_; }
  // Sends `signo` and waits for the exit; returns the exit code (128+signal if killed).
  int stop(int signo = SIGTERM);
  std::string log() const { return child_->stderrText(); }
  long residentKiB() const { return test::residentKiB(pid()); }

 private:
  Paths paths_;
  std::unique_ptr<ChildProcess> child_;
};

// Runs akactl --socket <socket> args...
CommandResult akactl(const fs::path& socket, const std::vector<std::string>& args);

// The directories named `parent` (a sandbox cgroup parent) in every cgroup hierarchy: the v2
// root and each v1 controller's or the hybrid `unified` mount under /sys/fs/cgroup.
std::vector<fs::path> cgroupParentDirs(const std::string& parent);
// Cgroups left under those directories.
std::vector<fs::path> cgroupsUnder(const std::string& parent);

// Mounts in this (the host's) mount namespace at or under `dir`, as "ID PATH": the daemon's
// mount templates are binds of namespace files there, and the ID tells a remade one apart.
std::vector<std::string> mountsUnder(const fs::path& dir);

}  // namespace akad::test
