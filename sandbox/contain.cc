#include "sandbox/contain.h"

#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cstring>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/unique_fd.h"
#include "sandbox/cpu.h"
#include "sandbox/fdpass.h"
#include "sandbox/mnt.h"
#include "sandbox/mnt_template.h"
#include "sandbox/shared_clone.h"
#include "sandbox/user.h"

namespace akad::box {
namespace {

void report(int fd, ReportMessage::Kind kind, int value, const std::string& text) {
  ReportMessage m;
  m.kind = kind;
  m.value = value;
  std::strncpy(m.text, text.c_str(), sizeof(m.text) - 1);
  (void)!::write(fd, &m, sizeof(m));
}

// A failed step ends the sandbox here; akabox reports the message as setup-failed.
void must(const ContainContext& c, const Status& st, const char* step) {
  if (st) return;
  report(c.reportFd, ReportMessage::SetupFailed, 0, std::string(step) + ": " + st.error().message);
  ::_exit(125);
}

Status sysOk(int rc, const std::string& what) { return rc == 0 ? Status{} : errnoError(what); }

Status writeOwnFile(const char* path, const char* text) {
  int fd = ::open(path, O_WRONLY | O_CLOEXEC);
  if (fd < 0) return errnoError(std::string("open ") + path);
  ssize_t n = ::write(fd, text, std::strlen(text));
  ::close(fd);
  return n < 0 ? errnoError(std::string("write ") + path) : Status{};
}

// The death signal is armed only now; if akabox died before, the lifeline shows EOF.
Status checkParentAlive(int lifelineFd) {
  pollfd p{lifelineFd, POLLIN, 0};
  if (::poll(&p, 1, 0) > 0 && (p.revents & (POLLHUP | POLLIN))) return Error{"akabox went away before the sandbox was started"};
  ::close(lifelineFd);
  return {};
}

// What akabox prepared while the init started (an EntryMessage's descriptors and filter).
struct Entry {
  UniqueFd mountNs;
  SandboxNamespaces ns;
  bool ipcUts = false;  // ns brings the ipc and uts namespaces too
  std::vector<UniqueFd> cgroupJoin;
  std::unique_ptr<SeccompPolicy> policy;  // null: no filter
};

// Waits for akabox to release the init (or, on the early command's link, for the command's
// copy of that release) and takes what it hands over. With `spin`, it polls for up to a
// millisecond first: the message then arrives without waking this CPU. If `closed` is given,
// a sender that closed its end instead is not an error: *closed says so.
Result<Entry> receiveEntry(int channelFd, bool spin, const char* from = "akabox", bool* closed = nullptr) {
  EntryMessage m;
  std::unique_ptr<char[]> filter(new char[kMaxFilterBytes]);  // not zero-filled: only what arrives is read
  iovec iov[2] = {{&m, sizeof(m)}, {filter.get(), kMaxFilterBytes}};
  RightsBuffer control{};
  msghdr msg{};
  msg.msg_iov = iov;
  msg.msg_iovlen = 2;
  msg.msg_control = control.bytes;
  msg.msg_controllen = sizeof(control.bytes);
  ssize_t got = -1;
  int err = EAGAIN;
  for (const double until = spin ? monotonicS() + 0.001 : 0; spin && monotonicS() < until;) {
    got = ::recvmsg(channelFd, &msg, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
    if (got >= 0) break;
    err = errno;
    if (err != EAGAIN && err != EINTR) break;
  }
  if (got < 0 && (err == EAGAIN || err == EINTR)) {
    do got = ::recvmsg(channelFd, &msg, MSG_CMSG_CLOEXEC);
    while (got < 0 && errno == EINTR);
  }
  if (got < 0) return errnoError(std::string("recvmsg(waiting for ") + from + ")");
  if (got == 0 && closed) {
    *closed = true;
    return Entry{};
  }
  if (got < static_cast<ssize_t>(sizeof(m))) return Error{std::string(from) + " went away before releasing the sandbox"};
  std::vector<UniqueFd> fds = takeRights(msg);
  Entry e;
  const size_t expected = static_cast<size_t>(m.hasMountNs + m.hasNsTask + m.hasNetns + 2 * m.hasIpcUts + m.cgroupJoinCount);
  size_t i = 0;
  auto next = [&] { return i < fds.size() ? std::move(fds[i++]) : UniqueFd(); };
  if (m.hasMountNs) e.mountNs = next();
  if (m.hasNsTask) e.ns.task = next();
  if (m.hasNetns) e.ns.net = next();
  if (m.hasIpcUts) {
    e.ns.ipc = next();
    e.ns.uts = next();
  }
  e.ipcUts = m.hasNsTask ? m.nsTaskIpcUts != 0 : m.hasIpcUts != 0;
  while (i < fds.size()) e.cgroupJoin.push_back(next());
  if (fds.size() != expected || (msg.msg_flags & MSG_CTRUNC))
    return Error{std::string("the release message from ") + from + " carries " + std::to_string(fds.size()) + " descriptors, not " +
                 std::to_string(expected)};
  if ((msg.msg_flags & MSG_TRUNC) || static_cast<size_t>(got) - sizeof(m) != m.policyBytes)
    return Error{std::string("the release message from ") + from + " does not carry the " + std::to_string(m.policyBytes) +
                 " bytes of its seccomp filter"};
  if (m.policyBytes) {
    e.policy = SeccompPolicy::deserialize(std::string_view(filter.get(), m.policyBytes), "from akabox");
    if (!e.policy) return Error{"the seccomp filter from akabox is malformed"};
  }
  return e;
}

// Writing "0" to a `tasks` file (cgroup v1) moves the writing thread itself, which skips the
// kernel's global migration lock (cgroup.h says why).
Status joinCgroup(std::vector<UniqueFd>& tasksFiles) {
  for (auto& fd : tasksFiles) {
    ssize_t n = ::write(fd.get(), "0", 1);
    int err = errno;
    fd.reset();
    if (n != 1) return errnoError("write 0 to the sandbox cgroup's tasks file", err);
  }
  tasksFiles.clear();
  return {};
}

// Enters the network namespace, the ipc and uts namespaces (naming the host `hostname`) and,
// with `cgroup`, (v1) the cgroup akabox prepared; without, the `tasks` files stay in `e` for
// the command.
Status enterPrepared(Entry& e, const std::string& hostname, bool cgroup) {
  SandboxNamespaces& ns = e.ns;
  if (ns.task.valid()) {
    // All at once, from the task that made them (akabox's namespace thread).
    const int which = CLONE_NEWNET | (e.ipcUts ? CLONE_NEWIPC | CLONE_NEWUTS : 0);
    if (::setns(ns.task.get(), which) != 0)
      return errnoError(e.ipcUts ? "setns(network, ipc and uts namespaces)" : "setns(network namespace)");
  } else {
    if (ns.net.valid() && ::setns(ns.net.get(), CLONE_NEWNET) != 0) return errnoError("setns(network namespace)");
    if (e.ipcUts) {
      if (::setns(ns.ipc.get(), CLONE_NEWIPC) != 0) return errnoError("setns(ipc namespace)");
      if (::setns(ns.uts.get(), CLONE_NEWUTS) != 0) return errnoError("setns(uts namespace)");
    }
  }
  if (e.ipcUts && ::sethostname(hostname.data(), hostname.size()) != 0) return errnoError("sethostname");
  ns = SandboxNamespaces{};
  return cgroup ? joinCgroup(e.cgroupJoin) : Status{};
}

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

// Every disposition back to the default: ignored ones survive exec (a caller that ignores
// SIGPIPE or SIGCHLD would hand that to the command; SIGCHLD ignored would also make the
// init's children vanish unreaped). The init does it once its mounts are done, while it waits
// for akabox's release (the early command: before its fork); the command inherits the
// defaults through vfork or fork. The pid namespace's init ignores every default-action
// signal but SIGKILL from akabox anyway.
//
// Only those that are not at their default already: the kernel lists the ignored and the
// caught ones in /proc/self/status (usually SIGPIPE alone, which akabox ignores), and 64
// sigaction calls took some 60 us of the init's set-up on the development VM, where a system
// call costs a microsecond. If the list cannot be read, every one is reset.
void defaultSignalDispositions() {
  uint64_t changed = ~uint64_t{0};
  char buf[2048];
  const int fd = ::open("/proc/self/status", O_RDONLY | O_CLOEXEC);
  if (fd >= 0) {
    const ssize_t n = ::read(fd, buf, sizeof(buf));
    ::close(fd);
    const std::string_view status(buf, n > 0 ? static_cast<size_t>(n) : 0);
    // 16 hexadecimal digits after the key.
    auto mask = [&](std::string_view key) -> std::optional<uint64_t> {
      const size_t at = status.find(key);
      if (at == std::string_view::npos || status.size() - at - key.size() < 16) return std::nullopt;
      const char* first = status.data() + at + key.size();
      uint64_t v = 0;
      const auto [end, ec] = std::from_chars(first, first + 16, v, 16);
      if (ec != std::errc() || end != first + 16) return std::nullopt;
      return v;
    };
    const auto ignored = mask("\nSigIgn:\t"), caught = mask("\nSigCgt:\t");
    if (ignored && caught) changed = *ignored | *caught;
  }
  for (int s = 1; s < NSIG && s <= 64; ++s)
    if (changed & (uint64_t{1} << (s - 1))) ::signal(s, SIG_DFL);
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

// The command's copy of akabox's release for the init, over their link: the network
// namespace (if any) and the cgroup `tasks` files (v1), which the init enters and joins as
// well, so that pid 1 sits in the sandbox's network namespace and cgroup like the rest (its
// /proc/1/net would otherwise show the host's network to the sandbox). No filter: the init
// installs none.
Status forwardToInit(int linkFd, const Entry& e) {
  EntryMessage m;
  std::vector<int> fds = releaseDescriptors(m, e.ns, false, e.cgroupJoin);
  iovec iov{&m, sizeof(m)};
  if (sendWithRights(linkFd, &iov, 1, fds, MSG_NOSIGNAL) < 0) return errnoError("sendmsg(to the sandbox's init)");
  return {};
}

// The command's wait for the init's next word on their link: 'r' once the init's mount
// namespace is rooted where the sandbox's root will be, 'm' once its mounts are complete.
// With spare CPUs it polls for up to a millisecond first (as receiveEntry does).
Status waitForInit(int linkFd, char word, bool spin) {
  char got = 0;
  ssize_t n = -1;
  for (const double until = spin ? monotonicS() + 0.001 : 0; spin && monotonicS() < until;) {
    n = ::recv(linkFd, &got, 1, MSG_DONTWAIT);
    if (n >= 0 || (errno != EAGAIN && errno != EINTR)) break;
  }
  if (n < 0) {
    do n = ::read(linkFd, &got, 1);
    while (n < 0 && errno == EINTR);
  }
  // The init closed its end: it failed and reported why (or was killed with the sandbox), so
  // the command has nothing to add.
  if (n == 0) ::_exit(125);
  if (n != 1 || got != word) return errnoError("the init's word on the command's link", n < 0 ? errno : EPROTO);
  return {};
}

// How the command meets the init when it starts beside the init's mount work.
struct EarlyStart {
  int linkFd = -1;  // the init's words arrive here
  int procFd = -1;  // the host's /proc: the sandbox's is not mounted yet
  bool spin = false;
};

// The sandboxed command: from real root inside the new namespaces to an unprivileged,
// capability-less, seccomp-filtered process. The order matters: the user namespace needs the
// uid change first, capabilities can only be dropped while we still hold CAP_SETPCAP there,
// and seccomp comes last so set-up itself is never filtered. It changes into its working
// directory as the sandbox's user (so the directory must be reachable by that user), right
// before the filter. Started early (runEarlyCommand), it does all of that while the init is
// still mounting, and waits for the init's word that the mounts are complete before the
// chdir; if the policy lets chdir and recvfrom through, the filter goes in before that wait,
// so that its install, the costliest step of set-up, runs beside the init's mounts, and after
// it come only the wait, chdir, handing over the listener and exec.
[[noreturn]] void runCommand(const ContainContext& c, const SeccompPolicy* policy, bool restoreCpus, EarlyStart early) {
  const SandboxSpec& s = *c.spec;
  if (restoreCpus) (void)::sched_setaffinity(0, sizeof(c.placement.cpus), &c.placement.cpus);
  // A process group of its own, in the session the init made (runSandboxInit).
  if (!s.commandIsPid1) must(c, sysOk(::setpgid(0, 0), "setpgid"), "process group");
  must(c, wireStdio(c), "stdio");
  must(c, enterUserNamespace(s.uid, s.gid, c.outsideUid, c.outsideGid, early.procFd), "user namespace");
  must(c, dropCapabilities(), "dropping capabilities");
  must(c, applyRlimits(s), "rlimits");
  must(c, unblockSignals(), "signals");
  ::umask(022);
  must(c, closeOtherFds({c.reportFd, c.channelFd, c.goFd, early.linkFd}), "closing inherited descriptors");

  std::vector<std::string> envStrings = buildEnv(s);
  std::vector<char*> envp, argv;
  for (auto& e : envStrings) envp.push_back(e.data());
  envp.push_back(nullptr);
  std::vector<std::string> args = s.command;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);

  const std::string cwd = commandCwd(s);
  auto settle = [&] {
    if (early.linkFd >= 0) must(c, waitForInit(early.linkFd, 'm', early.spin), "waiting for the sandbox's mounts");
    must(c, sysOk(::chdir(cwd.c_str()), "chdir('" + cwd + "')"), "working directory");
  };
  const bool filterFirst = early.linkFd >= 0 && policy && policy->allowsLateSetup();
  if (!filterFirst) settle();
  if (policy) {
    int listener = -1;
    if (int err = policy->install(&listener); err != 0) must(c, errnoError("seccomp_load", err), "seccomp");
    if (listener >= 0) must(c, sendListener(c.channelFd, listener), "seccomp listener");
  }
  if (filterFirst) settle();
  waitForGo(c);
  execCommand(c, argv.data(), envp.data());
}

// The command, started by the init at once (no template, CPUs to spare): it joins the init's
// mount namespace as soon as the init has rooted it, takes akabox's release itself, hands the
// init copies of what it carries, enters the network namespace and cgroup, and sets itself
// up while the init mounts the rest.
[[noreturn]] void runEarlyCommand(const ContainContext& c, EarlyStart early) {
  UniqueFd init(static_cast<int>(::syscall(SYS_pidfd_open, 1, 0)));  // pid 1 of this pid namespace
  if (!init.valid()) must(c, errnoError("pidfd_open(the sandbox's init)"), "starting the command");
  // The init's word comes early (right after its pivot_root), usually before akabox's release.
  must(c, waitForInit(early.linkFd, 'r', early.spin), "waiting for the sandbox's mount namespace");
  // Its root and working directory become the namespace's root: the sandbox's.
  must(c, sysOk(::setns(init.get(), CLONE_NEWNS), "setns(the init's mount namespace)"), "mount namespace");
  init.reset();
  auto e = receiveEntry(c.channelFd, c.spin);
  if (!e) must(c, e.error(), "waiting for akabox");
  must(c, forwardToInit(early.linkFd, *e), "handing the release to the init");
  must(c, enterPrepared(*e, c.spec->hostname, true), "entering the sandbox's cgroup and network namespace");
  // Only now, inside the sandbox's cgroup, does a new cgroup namespace root itself there.
  must(c, sysOk(::unshare(CLONE_NEWCGROUP), "unshare(CLONE_NEWCGROUP)"), "cgroup namespace");
  const Placement& p = c.placement;
  if (p.restorePolicy) (void)::sched_setscheduler(0, p.policy, &p.param);
  runCommand(c, e->policy.get(), p.restoreCpus, early);
}

// The init's last part: reap everything (orphans are re-parented to it) until the command
// itself exits, report how it ended, and exit, which makes the kernel kill whatever the
// command left behind.
[[noreturn]] void reapUntilCommandExits(const ContainContext& c, pid_t cmd) {
  for (int fd : {c.stdinFd, c.stdoutFd, c.stderrFd, c.channelFd, c.goFd})
    if (fd >= 0) ::close(fd);
  for (;;) {
    int status = 0;
    pid_t p = ::waitpid(-1, &status, __WALL);
    if (p < 0) {
      if (errno == EINTR) continue;
      ::_exit(125);
    }
    if (p != cmd) continue;
    if (WIFEXITED(status)) report(c.reportFd, ReportMessage::CommandExited, WEXITSTATUS(status), "");
    else if (WIFSIGNALED(status)) report(c.reportFd, ReportMessage::CommandSignaled, WTERMSIG(status), "");
    ::_exit(0);
  }
}

// The command of an init that shares akabox's memory: cloned with CLONE_VM | CLONE_VFORK, it
// runs on the init's stack below the init's frames (the init sleeps until the command's exec
// or exit, as vfork's parent does), joins the sandbox's cgroup (born into it on v2) and roots
// a cgroup namespace there, then sets itself up as any command does.
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
  runCommand(c, sc.entry->policy.get(), sc.pinned, {});
}

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

}  // namespace

[[noreturn]] void runSandboxInit(const ContainContext& c) {
  const SandboxSpec& s = *c.spec;
  // If akabox dies, so does the init, and with it every process of the pid namespace.
  must(c, sysOk(::prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0), "prctl(PR_SET_PDEATHSIG)"), "parent-death signal");
  must(c, checkParentAlive(c.lifelineFd), "start");
  // The sandbox's own session, without a controlling terminal (the caller's /dev/tty stays out
  // of reach), made here while the init waits for akabox: a new session is a new scheduler
  // autogroup, 0.03-0.04 ms that the command's set-up no longer pays. The command inherits it.
  must(c, sysOk(::setsid() < 0 ? -1 : 0, "setsid"), "new session");
  // The sandbox's directories and files get exactly the modes set-up asks for, whatever
  // umask akabox's caller runs with (a 077 umask would make /etc unreadable inside).
  ::umask(0);
  // The ipc namespace (its mqueue mount is a fifth of clone3's cost) and the uts namespace
  // are not made in clone3, on the serial path: akabox's namespace thread makes them beside
  // everything else and the release brings them (net.h); where the mount thread builds the
  // root (the init then waits for it anyway), with --net host and with the early command, the
  // init makes them here.
  if (!c.ipcUtsHanded) {
    must(c, sysOk(::unshare(CLONE_NEWIPC | CLONE_NEWUTS), "unshare(CLONE_NEWIPC | CLONE_NEWUTS)"), "ipc and uts namespaces");
    must(c, sysOk(::sethostname(s.hostname.data(), s.hostname.size()), "sethostname"), "uts namespace");
  }
  // Meanwhile akabox prepares the cgroup and the seccomp policy, and its thread the network
  // namespace (net.h): the cores work in parallel.
  auto receive = [&] {
    auto e = receiveEntry(c.channelFd, c.spin);
    if (!e) must(c, e.error(), "waiting for akabox");
    return std::move(*e);
  };
  // `rooted` runs once the init's root is the sandbox's new root; only the build calls it (the
  // early command, its one user, never has a template).
  auto buildMounts = [&](const std::function<void()>& rooted) {
    if (c.mountNsHanded) {
      Entry t = receive();
      if (!t.mountNs.valid()) must(c, Error{"akabox sent no mount namespace"}, "waiting for akabox");
      if (s.mountTemplate) must(c, enterMountTemplate(s, c.devices, t.mountNs.get()), "mount namespace (template)");
      else must(c, enterBuiltMountNamespace(t.mountNs.get()), "mount namespace");
    } else {
      must(c, buildMountNamespace(s, c.devices, rooted), "mount namespace");
    }
  };
  const Placement& p = c.placement;

  // The early command (asked for, no template, CPUs to spare): the command starts at once and
  // sets itself up while the init builds the mount namespace, so the two longest parts of
  // set-up run side by side (GPU machine: 0.4 ms less per spawn). A copy of a template is
  // quick, and there the fork and the command's start on another CPU cost more than they save
  // (0.1 ms), as they do on two CPUs, where the command and the init would take turns.
  if (c.earlyCommand) {
    defaultSignalDispositions();  // before the fork: the command inherits them
    // The host's /proc is opened first: the command writes its user namespace's maps through
    // it before the sandbox's /proc exists. A fork, not a vfork: both go on.
    UniqueFd hostProc(::open("/proc", O_PATH | O_DIRECTORY | O_CLOEXEC));
    if (!hostProc.valid()) must(c, errnoError("open /proc"), "starting the command");
    int link[2];
    if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, link) != 0) must(c, errnoError("socketpair"), "starting the command");
    UniqueFd initEnd(link[0]), commandEnd(link[1]);
    const pid_t cmd = static_cast<pid_t>(::syscall(SYS_clone, SIGCHLD, nullptr, nullptr, nullptr, 0));
    if (cmd < 0) must(c, errnoError("clone"), "starting the command");
    if (cmd == 0) {
      initEnd.reset();
      runEarlyCommand(c, EarlyStart{commandEnd.get(), hostProc.get(), c.spin});
    }
    commandEnd.reset();
    hostProc.reset();
    // The command joins the mount namespace once its root is the sandbox's root.
    buildMounts([&] { (void)!::send(initEnd.get(), "r", 1, MSG_NOSIGNAL); });
    // The init is tiny, so the OOM killer already prefers the command; shielding the init too
    // needs CAP_SYS_RESOURCE, which some hosts withhold even from root: best effort.
    (void)writeOwnFile("/proc/self/oom_score_adj", "-1000");
    // Closed instead: the command failed first (its report says why); the init only reaps it.
    bool commandGone = false;
    auto forwarded = receiveEntry(initEnd.get(), false, "the command", &commandGone);
    if (!forwarded) must(c, forwarded.error(), "waiting for the command");
    if (!commandGone) {
      must(c, enterPrepared(*forwarded, s.hostname, true), "entering the sandbox's cgroup and network namespace");
      // The command execs only after this word: by then the init is where the sandbox is.
      (void)!::send(initEnd.get(), "m", 1, MSG_NOSIGNAL);
    }
    initEnd.reset();
    reapUntilCommandExits(c, cmd);
  }

  buildMounts({});
  // While akabox's thread may still be making the network namespace: the template's copy is
  // the longer side of the set-up and comes first (it usually arrives as the init starts).
  defaultSignalDispositions();
  Entry entry = receive();
  if (c.ipcUtsHanded && !entry.ipcUts) must(c, Error{"akabox sent no ipc and uts namespaces"}, "waiting for akabox");
  // An init that shares akabox's memory leaves the cgroup to the command (contain.h).
  const bool initInCgroup = initJoinsCgroup(c);
  must(c, enterPrepared(entry, s.hostname, initInCgroup), "entering the sandbox's namespaces and cgroup");
  // Only now, inside the sandbox's cgroup, does a new cgroup namespace root itself there.
  if (initInCgroup) must(c, sysOk(::unshare(CLONE_NEWCGROUP), "unshare(CLONE_NEWCGROUP)"), "cgroup namespace");
  // akabox's scheduling policy and CPU set back, for the command (subproc.cc says why the
  // init had others).
  if (p.restorePolicy) (void)::sched_setscheduler(0, p.policy, &p.param);
  if (s.commandIsPid1) runCommand(c, entry.policy.get(), p.restoreCpus, {});
  // The command starts on this CPU: a new task otherwise goes to the idlest CPU, and waking
  // an idle virtual CPU costs a tenth of a millisecond on the GPU machine, while the init
  // only sleeps until the command execs. The init stays there (it only reaps); the command
  // takes the whole CPU set back first thing.
  volatile bool pinned = false;  // read by the vfork child: kept in memory, not a register
  if (p.restoreCpus) {
    cpu_set_t here;
    CPU_ZERO(&here);
    // Asked of the kernel: sched_getcpu() reads a thread's restartable-sequence area, which
    // for an init that shares akabox's memory is that of the thread it borrowed it from.
    unsigned current = 0;
    const int cpu = ::syscall(SYS_getcpu, &current, nullptr, nullptr) == 0 ? static_cast<int>(current) : -1;
    if (cpu >= 0 && cpu < CPU_SETSIZE) {
      CPU_SET(cpu, &here);
      pinned = ::sched_setaffinity(0, sizeof(here), &here) == 0;
    }
    if (!pinned) (void)::sched_setaffinity(0, sizeof(p.cpus), &p.cpus);
  }

  // vfork, or its like for an init that shares akabox's memory (startSharedCommand): the
  // command borrows the init's memory until it execs, instead of copying the page tables and
  // faulting every page in again (fork cost about a quarter of a millisecond here). The init
  // sleeps until then, and the command never returns from runCommand: it execs or _exits.
  // What it changes is its own: credentials, namespaces, fds, signal dispositions, rlimits
  // and the seccomp filter are per process (no CLONE_THREAD, FILES, FS or SIGHAND); its heap
  // allocations stay behind in the init's memory (akabox's, when shared).
  pid_t cmd;
  if (c.sharedStackBottom) {
    cmd = startSharedCommand(c, entry, pinned);
  } else {
    cmd = ::vfork();
    if (cmd < 0) must(c, errnoError("vfork"), "starting the command");
    if (cmd == 0) runCommand(c, entry.policy.get(), pinned, {});
  }
  // Best effort, as above, and only now that the command has exec'd (it would inherit the
  // value through vfork). The init is on the command's CPU, so this runs once the command
  // ends, on the way to its report. When the command hands akabox a seccomp listener, akabox
  // writes it instead while the command runs (subproc.cc, shieldInitFromOom).
  if (!(entry.policy && entry.policy->reportsViolations())) (void)writeOwnFile("/proc/self/oom_score_adj", "-1000");
  reapUntilCommandExits(c, cmd);
}

}  // namespace akad::box
