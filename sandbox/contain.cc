#include "sandbox/contain.h"

#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <charconv>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "common/unique_fd.h"
#include "sandbox/contain_steps.h"
#include "sandbox/cpu.h"
#include "sandbox/helper_thread.h"
#include "sandbox/mnt.h"
#include "sandbox/mnt_template.h"

namespace akad::box {

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

Status writeOwnFile(const char* path, const char* text) {
  int fd = ::open(path, O_WRONLY | O_CLOEXEC);
  if (fd < 0) return errnoError(std::string("open ") + path);
  ssize_t n = ::write(fd, text, std::strlen(text));
  ::close(fd);
  return n < 0 ? errnoError(std::string("write ") + path) : Status{};
}

// Every disposition back to the default: ignored ones survive exec (a caller that ignores
// SIGPIPE or SIGCHLD would hand that to the command; SIGCHLD ignored would also make the
// init's children vanish unreaped). The init does it once its mounts are done, while it waits
// for akabox's release; the command inherits the defaults through vfork. The pid namespace's
// init ignores every default-action signal but SIGKILL from akabox anyway.
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

namespace {

// ContainContext::testHeapChurn: blocks past malloc's per-thread cache, so that each call
// takes the arena's lock.
void churnHeap(double seconds) {
  for (const double until = monotonicS() + seconds; monotonicS() < until;) {
    void* volatile p = std::malloc(64 * 1024);
    std::free(p);
  }
}

}  // namespace

void setUpMountNamespace(const ContainContext& c) {
  const SandboxSpec& s = *c.spec;
  if (c.mountNsHanded) {
    if (c.testHeapChurn) churnHeap(0.3);
    auto t = receiveEntry(c.channelFd, c.spin);
    if (!t) must(c, t.error(), "waiting for akabox");
    if (!t->mountNs.valid()) must(c, Error{"akabox sent no mount namespace"}, "waiting for akabox");
    if (s.mountTemplate) must(c, enterMountTemplate(s, c.devices, t->mountNs.get()), "mount namespace (template)");
    else must(c, enterBuiltMountNamespace(t->mountNs.get()), "mount namespace");
  } else {
    must(c, buildMountNamespace(s, c.devices, {}), "mount namespace");
  }
}

namespace {

// The death signal is armed only now; if akabox died before, the lifeline shows EOF.
Status checkParentAlive(int lifelineFd) {
  pollfd p{lifelineFd, POLLIN, 0};
  if (::poll(&p, 1, 0) > 0 && (p.revents & (POLLHUP | POLLIN))) return Error{"akabox went away before the sandbox was started"};
  ::close(lifelineFd);
  return {};
}

// The sandbox's own session, without a controlling terminal (the caller's /dev/tty stays out
// of reach), made while the init waits for akabox: a new session is a new scheduler
// autogroup, which the command's set-up then no longer pays for. The command inherits it.
Status startSession() { return sysOk(::setsid() < 0 ? -1 : 0, "setsid"); }

// The ipc namespace (its mqueue mount is a fifth of clone3's cost) and the uts namespace are
// not made in clone3, on the serial path: akabox's namespace thread makes them beside
// everything else and the release brings them (ns_thread.h); where the mount thread builds the
// root (the init then waits for it anyway) and with --net host, the init makes them here.
void makeIpcAndUtsNamespaces(const ContainContext& c) {
  const SandboxSpec& s = *c.spec;
  must(c, sysOk(::unshare(CLONE_NEWIPC | CLONE_NEWUTS), "unshare(CLONE_NEWIPC | CLONE_NEWUTS)"), "ipc and uts namespaces");
  must(c, sysOk(::sethostname(s.hostname.data(), s.hostname.size()), "sethostname"), "uts namespace");
}

// akabox's release: the network namespace (and the ipc and uts namespaces when it made them),
// the cgroup's `tasks` files (v1) and the command's seccomp filter. Meanwhile akabox prepared
// the cgroup and the seccomp policy, and its thread the network namespace: the cores worked in
// parallel.
Entry awaitRelease(const ContainContext& c) {
  auto e = receiveEntry(c.channelFd, c.spin);
  if (!e) must(c, e.error(), "waiting for akabox");
  if (c.ipcUtsHanded && !e->ipcUts) must(c, Error{"akabox sent no ipc and uts namespaces"}, "waiting for akabox");
  return std::move(*e);
}

// Into the namespaces and the cgroup the release brings. An init that shares akabox's memory
// leaves the cgroup to the command (contain.h); only inside the sandbox's cgroup does a new
// cgroup namespace root itself there.
void enterSandbox(const ContainContext& c, Entry& entry) {
  const bool initInCgroup = initJoinsCgroup(c);
  must(c, enterPrepared(entry, c.spec->hostname, initInCgroup), "entering the sandbox's namespaces and cgroup");
  if (initInCgroup) must(c, sysOk(::unshare(CLONE_NEWCGROUP), "unshare(CLONE_NEWCGROUP)"), "cgroup namespace");
}

// vfork, or its like for an init that shares akabox's memory (startSharedCommand): the
// command borrows the init's memory until it execs, instead of copying the page tables and
// faulting every page in again. The init sleeps until then, and the command never returns
// from runCommand: it execs or _exits. What it changes is its own: credentials, namespaces,
// fds, signal dispositions, rlimits and the seccomp filter are per process (no CLONE_THREAD,
// FILES, FS or SIGHAND); its heap allocations stay behind in the init's memory (akabox's, when
// shared).
pid_t startCommand(const ContainContext& c, Entry& entry, bool pinned) {
  if (c.sharedStackBottom) return startSharedCommand(c, entry, pinned);
  volatile bool pinnedCopy = pinned;  // read by the vfork child: kept in memory, not a register
  const pid_t cmd = ::vfork();
  if (cmd < 0) must(c, errnoError("vfork"), "starting the command");
  if (cmd == 0) runCommand(c, entry.policy.get(), pinnedCopy);
  return cmd;
}

// The init is tiny, so the OOM killer already prefers the command; shielding the init as well
// needs CAP_SYS_RESOURCE, which some hosts withhold even from root: best effort, and only now
// that the command has exec'd (it would inherit the value through vfork). The init is on the
// command's CPU, so this runs once the command ends, on the way to its report. When the
// command hands akabox a seccomp listener, akabox writes it instead while the command runs
// (supervise.cc, shieldInitFromOom).
void shieldFromOomUnlessAkaboxDoes(const Entry& entry) {
  if (!(entry.policy && entry.policy->reportsViolations())) (void)writeOwnFile("/proc/self/oom_score_adj", "-1000");
}

}  // namespace

// The containment steps in order (nsjail's containProc is the model). The init is pid 1 of
// the new pid namespace and still real root; it builds the namespaces' contents, then starts
// the command, whose own steps are runCommand's (command.cc).
[[noreturn]] void runSandboxInit(const ContainContext& c) {
  // If akabox dies, so does the init, and with it every process of the pid namespace.
  must(c, sysOk(::prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0), "prctl(PR_SET_PDEATHSIG)"), "parent-death signal");
  must(c, checkParentAlive(c.lifelineFd), "start");
  must(c, startSession(), "new session");
  // The sandbox's directories and files get exactly the modes set-up asks for, whatever
  // umask akabox's caller runs with (a 077 umask would make /etc unreadable inside).
  ::umask(0);
  if (!c.ipcUtsHanded) makeIpcAndUtsNamespaces(c);

  // While akabox's thread may still be making the network namespace: the mount namespace is
  // the longer side of the set-up and comes first.
  setUpMountNamespace(c);
  defaultSignalDispositions();
  Entry entry = awaitRelease(c);
  enterSandbox(c, entry);
  // akabox's scheduling policy and CPU set back, for the command (cpu.h says why the init had
  // others).
  restoreSchedulingPolicy(c.placement);
  if (c.spec->commandIsPid1) runCommand(c, entry.policy.get(), c.placement.restoreCpus);
  // The init stays on this CPU (it only reaps) and the command starts there; the command takes
  // the whole CPU set back first thing.
  const bool pinned = pinToCurrentCpu(c.placement);
  const pid_t cmd = startCommand(c, entry, pinned);
  shieldFromOomUnlessAkaboxDoes(entry);
  reapUntilCommandExits(c, cmd);
}

}  // namespace akad::box
