// The sandboxed command's own set-up, from the clone that starts it to its exec: stdio, the
// user namespace, capabilities, rlimits, signals, descriptors, the working directory, the
// seccomp filter, the go signal, exec.

#include <fcntl.h>
#include <linux/sched.h>
#include <sched.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "sandbox/contain_steps.h"
#include "sandbox/fdpass.h"
#include "sandbox/mnt.h"
#include "sandbox/shared_clone.h"
#include "sandbox/user.h"

namespace akad::box {
namespace {

Status wireStdio(const ContainContext& c) {
  if (::dup2(c.stdinFd, 0) < 0 || ::dup2(c.stdoutFd, 1) < 0 || ::dup2(c.stderrFd, 2) < 0) return errnoError("dup2 stdio");
  return {};
}

// Only 0, 1, 2 and our two close-on-exec channels stay open: a descriptor inherited from
// akabox's caller would be a way out of the sandbox.
// Closes every descriptor from 3 up but those in `keep` (negative entries are ignored).
Status closeOtherFds(std::vector<int> keep) {
  std::sort(keep.begin(), keep.end());
  unsigned from = 3;
  for (int fd : keep) {
    if (fd < static_cast<int>(from)) continue;
    if (static_cast<unsigned>(fd) > from && ::syscall(SYS_close_range, from, static_cast<unsigned>(fd) - 1, 0) != 0)
      return errnoError("close_range");
    from = static_cast<unsigned>(fd) + 1;
  }
  if (::syscall(SYS_close_range, from, ~0U, 0) != 0) return errnoError("close_range");
  return {};
}

// The cgroup's limits are written while the command sets itself up; they must be in place
// before it execs, so it waits here for akabox's go. A read that returns nothing means akabox
// is gone or failed; it kills the sandbox itself then.
void waitForGo(const ContainContext& c) {
  char go = 0;
  ssize_t n;
  do n = ::read(c.goFd, &go, 1);
  while (n < 0 && errno == EINTR);
  if (n != 1) ::_exit(125);
  ::close(c.goFd);
}

// The mask akabox blocked its cancel signals with (for its signalfd), which the command
// inherited, goes.
Status unblockSignals() {
  sigset_t none;
  sigemptyset(&none);
  if (::sigprocmask(SIG_SETMASK, &none, nullptr) != 0) return errnoError("sigprocmask");
  return {};
}

Status sendListener(int sock, int notifyFd) {
  char byte = 'n';
  iovec iov{&byte, 1};
  if (sendWithRights(sock, &iov, 1, {notifyFd}, 0) != 1) return errnoError("sendmsg(seccomp listener)");
  return {};
}

std::vector<std::string> buildEnv(const SandboxSpec& spec) {
  std::map<std::string, std::string> env = {
      {"PATH", "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"},
      {"HOME", spec.workspace.empty() ? "/tmp" : "/workspace"},
      {"LANG", "C.UTF-8"}};
  for (const auto& [k, v] : spec.env) env[k] = v;
  std::vector<std::string> out;
  for (const auto& [k, v] : env) out.push_back(k + "=" + v);
  return out;
}

// execvpe searches the caller's PATH, not the new environment's; search the sandbox's own.
[[noreturn]] void execCommand(const ContainContext& c, char* const argv[], char* const envp[]) {
  const std::string& cmd = c.spec->command[0];
  int err = ENOENT;
  if (cmd.find('/') != std::string::npos) {
    ::execve(cmd.c_str(), argv, envp);
    err = errno;
  } else {
    std::string path = "/usr/local/bin:/usr/bin:/bin";
    for (char* const* e = envp; *e; ++e)
      if (std::strncmp(*e, "PATH=", 5) == 0) path = *e + 5;
    size_t start = 0;
    bool sawEacces = false;
    while (start <= path.size()) {
      size_t end = path.find(':', start);
      if (end == std::string::npos) end = path.size();
      std::string dir = path.substr(start, end - start);
      std::string full = (dir.empty() ? "." : dir) + "/" + cmd;
      ::execve(full.c_str(), argv, envp);
      if (errno == EACCES) sawEacces = true;
      else if (errno != ENOENT && errno != ENOTDIR) { err = errno; break; }
      start = end + 1;
    }
    if (err == ENOENT && sawEacces) err = EACCES;
  }
  report(c.reportFd, ReportMessage::ExecFailed, err, "cannot execute '" + cmd + "': " + std::strerror(err));
  ::_exit(err == ENOENT ? 127 : 126);
}

}  // namespace

// The sandboxed command: from real root inside the new namespaces to an unprivileged,
// capability-less, seccomp-filtered process. The order matters: the user namespace needs the
// uid change first, capabilities can only be dropped while we still hold CAP_SETPCAP there,
// and seccomp comes last so set-up itself is never filtered. It changes into its working
// directory as the sandbox's user (so the directory must be reachable by that user), right
// before the filter.
[[noreturn]] void runCommand(const ContainContext& c, const SeccompPolicy* policy, bool restoreCpus) {
  const SandboxSpec& s = *c.spec;
  if (restoreCpus) (void)::sched_setaffinity(0, sizeof(c.placement.cpus), &c.placement.cpus);
  // A process group of its own, in the session the init made (runSandboxInit).
  if (!s.commandIsPid1) must(c, sysOk(::setpgid(0, 0), "setpgid"), "process group");
  must(c, wireStdio(c), "stdio");
  must(c, enterUserNamespace(s.uid, s.gid, c.outsideUid, c.outsideGid), "user namespace");
  must(c, dropCapabilities(), "dropping capabilities");
  must(c, applyRlimits(s), "rlimits");
  must(c, unblockSignals(), "signals");
  ::umask(022);
  must(c, closeOtherFds({c.reportFd, c.channelFd, c.goFd}), "closing inherited descriptors");

  std::vector<std::string> envStrings = buildEnv(s);
  std::vector<char*> envp, argv;
  for (auto& e : envStrings) envp.push_back(e.data());
  envp.push_back(nullptr);
  std::vector<std::string> args = s.command;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);

  const std::string cwd = commandCwd(s);
  must(c, sysOk(::chdir(cwd.c_str()), "chdir('" + cwd + "')"), "working directory");
  if (policy) {
    int listener = -1;
    if (int err = policy->install(&listener); err != 0) must(c, errnoError("seccomp_load", err), "seccomp");
    if (listener >= 0) must(c, sendListener(c.channelFd, listener), "seccomp listener");
  }
  waitForGo(c);
  execCommand(c, argv.data(), envp.data());
}

// The command of an init that shares akabox's memory: cloned with CLONE_VM | CLONE_VFORK, it
// runs on the init's stack below the init's frames (the init sleeps until the command's exec
// or exit, as vfork's parent does), joins the sandbox's cgroup (born into it on v2) and roots
// a cgroup namespace there, then sets itself up as any command does.
namespace {
struct SharedCommand {
  const ContainContext* c;
  Entry* entry;
  bool pinned;
};

int sharedCommandMain(void* arg) {
  const auto& sc = *static_cast<SharedCommand*>(arg);
  const ContainContext& c = *sc.c;
  must(c, joinCgroup(sc.entry->cgroupJoin), "entering the sandbox's cgroup");
  must(c, sysOk(::unshare(CLONE_NEWCGROUP), "unshare(CLONE_NEWCGROUP)"), "cgroup namespace");
  runCommand(c, sc.entry->policy.get(), sc.pinned);
}

}  // namespace

pid_t startSharedCommand(const ContainContext& c, Entry& entry, bool pinned) {
  SharedCommand sc{&c, &entry, pinned};
  // 8 KiB below this frame: clear of it, of the calls below it and of the red zone.
  const auto top = (reinterpret_cast<uintptr_t>(&sc) - 8192) & ~uintptr_t{15};
  const auto bottom = reinterpret_cast<uintptr_t>(c.sharedStackBottom);
  clone_args args{};
  args.flags = CLONE_VM | CLONE_VFORK;
  if (c.commandCgroupFd >= 0) {
    args.flags |= CLONE_INTO_CGROUP;
    args.cgroup = static_cast<uint64_t>(c.commandCgroupFd);
  }
  args.exit_signal = SIGCHLD;
  args.stack = bottom;
  args.stack_size = top - bottom;
  const long pid = cloneOnStack(args, &sharedCommandMain, &sc);
  if (pid < 0) must(c, errnoError("clone3(the command)", static_cast<int>(-pid)), "starting the command");
  return static_cast<pid_t>(pid);
}

}  // namespace akad::box
