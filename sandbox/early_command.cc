// The early command (AKABOX_EARLY_COMMAND=1, off by default; subproc.h's earlyCommandFor):
// the init forks the command at once, and the command sets itself up (seccomp filter
// included) while the init builds the mount namespace. Both sides of that path are here: the
// init's (runInitWithEarlyCommand) and the command's until it joins runCommand.

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "sandbox/contain_steps.h"
#include "sandbox/fdpass.h"
#include "sandbox/helper_thread.h"

namespace akad::box {
namespace {

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

}  // namespace

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

namespace {

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
  restoreSchedulingPolicy(c.placement);
  runCommand(c, e->policy.get(), c.placement.restoreCpus, early);
}

}  // namespace

// The command starts at once and sets itself up while the init builds the mount namespace, so
// the two longest parts of set-up run side by side. A copy of a template is quick, and there
// the fork and the command's start on another CPU cost more than they save, as they do on two
// CPUs, where the command and the init would take turns: hence only without a template and
// with CPUs to spare (docs/akabox-performance.md).
[[noreturn]] void runInitWithEarlyCommand(const ContainContext& c) {
  const SandboxSpec& s = *c.spec;
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
  setUpMountNamespace(c, [&] { (void)!::send(initEnd.get(), "r", 1, MSG_NOSIGNAL); });
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

}  // namespace akad::box
