#include "sandbox/subproc.h"

#include <fcntl.h>
#include <linux/futex.h>
#include <linux/sched.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <string>

#include "common/unique_fd.h"
#include "sandbox/contain.h"
#include "sandbox/cpu.h"
#include "sandbox/fdpass.h"
#include "sandbox/helper_thread.h"
#include "sandbox/init_lender.h"
#include "sandbox/init_messages.h"
#include "sandbox/shared_clone.h"

namespace akad::box {
namespace {

struct Pipe {
  UniqueFd read, write;
};

Result<Pipe> makePipe(const char* what) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return errnoError(std::string("pipe2 for ") + what);
  return Pipe{UniqueFd(fds[0]), UniqueFd(fds[1])};
}

// akabox's links to the init: the init and the command hold one end of each (ContainContext),
// akabox the other (SandboxInit's members).
struct InitLinks {
  Pipe lifeline, report, go, out, err;
  UniqueFd channelParent, channelChild;  // unix socket: the release out, the seccomp listener back
};

Result<InitLinks> openInitLinks() {
  InitLinks k;
  auto lifeline = makePipe("the lifeline");
  if (!lifeline) return lifeline.error();
  auto rep = makePipe("the report channel");
  if (!rep) return rep.error();
  auto go = makePipe("the go signal");
  if (!go) return go.error();
  auto out = makePipe("stdout");
  if (!out) return out.error();
  auto err = makePipe("stderr");
  if (!err) return err.error();
  int sp[2];
  if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp) != 0) return errnoError("socketpair for the init's channel");
  k.lifeline = std::move(*lifeline);
  k.report = std::move(*rep);
  k.go = std::move(*go);
  k.out = std::move(*out);
  k.err = std::move(*err);
  k.channelParent.reset(sp[0]);
  k.channelChild.reset(sp[1]);
  return k;
}

unsigned long cloneFlags(bool mountNsHanded) {
  // Only what must exist at birth: the pid namespace (the init is its pid 1) and, where the
  // init builds it, the mount namespace. The init unshares its ipc and uts namespaces itself,
  // its cgroup namespace once it is inside its cgroup, and the command its user namespace
  // (user.h says why); the network namespace comes from akabox's thread (ns_thread.h), and
  // the mount namespace, with a template, is a copy of the template's, or the one akabox's
  // mount thread built (mnt_thread.h).
  return (mountNsHanded ? 0 : CLONE_NEWNS) | CLONE_NEWPID;
}

// How the init starts, decided once in SandboxInit::start for both sides.
struct InitShape {
  bool ipcUtsHanded = false;  // the release brings the ipc and uts namespaces
  bool shared = false;        // the init shares akabox's memory (shared_clone.h)
};

InitShape shapeInit(const SpawnRequest& req) {
  InitShape shape;
  shape.ipcUtsHanded = req.ipcUtsFromThread;
  // The init shares akabox's memory where it can (kCanShareMemory). A shared init stays out
  // of the sandbox's cgroup: a memory cgroup's OOM killer that picked it would kill every
  // process sharing its memory, akabox included. The command joins the cgroup instead
  // (command.cc), or the init does when it is the command itself (commandIsPid1: nothing
  // else can run in the sandbox before its exec).
  shape.shared = kCanShareMemory;
  return shape;
}

// What the init is told (ContainContext): the request, its ends of the links, and the shape.
void describeInit(ContainContext& c, const SpawnRequest& req, const InitLinks& k, const Placement& place, const InitShape& shape,
                  void* sharedStackBottom) {
  c.spec = req.spec;
  c.outsideUid = req.outsideUid;
  c.outsideGid = req.outsideGid;
  c.devices = req.devices;
  c.lifelineFd = k.lifeline.read.get();
  c.reportFd = k.report.write.get();
  c.goFd = k.go.read.get();
  c.channelFd = k.channelChild.get();
  c.stdinFd = req.stdinFd;
  c.stdoutFd = k.out.write.get();
  c.stderrFd = k.err.write.get();
  c.placement = place;
  // Decided here, not in the init: there the CPU set is the one akabox narrows.
  c.spin = spinningPays();
  c.ipcUtsHanded = shape.ipcUtsHanded;
  c.sharedStackBottom = sharedStackBottom;
  c.mountNsHanded = req.spec->mountTemplate || req.mountNsFromThread;
  const char* churn = std::getenv("AKABOX_TEST_HEAP_CHURN");
  c.testHeapChurn = churn && std::strcmp(churn, "1") == 0;
  if (!initJoinsCgroup(c)) c.commandCgroupFd = req.cloneIntoCgroupFd;
}

// clone3's arguments: the namespaces the init is born with, its cgroup on v2 (unless the
// command joins it instead), its pidfd.
void describeClone(InitLaunch& l, const SpawnRequest& req) {
  clone_args& args = l.args;
  args.flags = cloneFlags(l.ctx.mountNsHanded) | CLONE_PIDFD;
  if (req.cloneIntoCgroupFd >= 0 && initJoinsCgroup(l.ctx)) {
    args.flags |= CLONE_INTO_CGROUP;
    args.cgroup = static_cast<uint64_t>(req.cloneIntoCgroupFd);
  }
  args.pidfd = reinterpret_cast<uint64_t>(&l.pidfd);
  args.exit_signal = SIGCHLD;
}

// An init that shares akabox's memory, cloned by a lending thread (init_lender.h): the
// lender started ahead, or one started here. akabox waits while the thread clones the init:
// the thread then runs on akabox's CPU at once instead of queueing behind the namespace thread
// on another, and moves the init off akabox's CPU right after clone3 (cpu.h). Its signals are
// all blocked, and so are the init's, which also inherits akabox's SCHED_BATCH; the command
// unblocks its own (command.cc).
Result<pid_t> cloneSharedInit(InitLaunch& l, InitLender* lender, const Placement& place, const cpu_set_t& initCpus) {
  clone_args& args = l.args;
  args.flags |= CLONE_VM;
  args.stack = reinterpret_cast<uint64_t>(l.stack.bottom());
  args.stack_size = l.stack.size();
  l.moveInit = place.restoreCpus;
  l.initCpus = initCpus;
  if (lender) {
    lender->launch(&l);
  } else if (const int e = startHelperThread(&lendToInit, &l, false); e != 0) {
    return errnoError("pthread_create (the thread that starts the sandbox's init)", e);
  }
  while (__atomic_load_n(&l.ready, __ATOMIC_ACQUIRE) == 0)
    (void)::syscall(SYS_futex, &l.ready, FUTEX_WAIT_PRIVATE, 0, nullptr, nullptr, 0);
  const long pid = l.result;
  if (pid < 0) return errnoError("clone3(new pid and mount namespaces)", static_cast<int>(-pid));
  return static_cast<pid_t>(pid);
}

// An init with memory of its own (where it cannot share akabox's, kCanShareMemory): clone3
// from here, and off akabox's CPU right after.
Result<pid_t> cloneOwnInit(InitLaunch& l, const Placement& place, const cpu_set_t& initCpus) {
  const long pid = ::syscall(SYS_clone3, &l.args, sizeof(l.args));
  const int cloneErr = errno;
  if (pid > 0 && place.restoreCpus) (void)::sched_setaffinity(static_cast<pid_t>(pid), sizeof(initCpus), &initCpus);
  if (pid < 0) return errnoError("clone3(new pid and mount namespaces)", cloneErr);
  if (pid == 0) runSandboxInit(l.ctx);
  return static_cast<pid_t>(pid);
}

}  // namespace

Result<std::unique_ptr<SandboxInit>> SandboxInit::start(const SpawnRequest& req) {
  std::unique_ptr<SandboxInit> self(new SandboxInit());
  self->req_ = req;
  ::sigprocmask(SIG_SETMASK, nullptr, &self->oldMask_);
  auto links = openInitLinks();
  if (!links) return links.error();
  if (auto st = self->catchCancelSignals(); !st) return st.error();
  cpu_set_t initCpus;
  const Placement place = placeForSetup(initCpus);
  const InitShape shape = shapeInit(req);
  self->ipcUtsHanded_ = shape.ipcUtsHanded;

  self->launch_ = std::make_unique<InitLaunch>();
  InitLaunch& l = *self->launch_;
  InitLender* lender = shape.shared && req.lender && req.lender->available() ? req.lender : nullptr;
  if (shape.shared) {
    l.stack = lender ? lender->takeStack() : ChildStack(kInitStackBytes);
    if (!l.stack.valid()) return errnoError("mmap (the sandbox init's stack)");
  }
  // The mount thread allocates and takes locks while the init starts (mnt_thread.h): only an
  // init that shares akabox's memory may start beside it.
  if (req.mountNsFromThread && !shape.shared) return Error{"internal: a mount namespace from akabox's thread needs an init that shares its memory"};
  describeInit(l.ctx, req, *links, place, shape, shape.shared ? l.stack.bottom() : nullptr);
  describeClone(l, req);

  self->t0_ = monotonicS();
  auto pid = shape.shared ? cloneSharedInit(l, lender, place, initCpus) : cloneOwnInit(l, place, initCpus);
  if (!pid) return pid.error();
  if (shape.shared) self->lenderJob_ = l.job;
  self->pid_ = *pid;
  self->pidFd_.reset(l.pidfd);
  self->lifeline_ = std::move(links->lifeline.write);
  self->go_ = std::move(links->go.write);
  self->report_ = std::move(links->report.read);
  self->stdout_ = std::move(links->out.read);
  self->stderr_ = std::move(links->err.read);
  self->channel_ = std::move(links->channelParent);
  for (int fd : {self->stdout_.get(), self->stderr_.get()}) ::fcntl(fd, F_SETFL, O_NONBLOCK);
  return self;
}

Status SandboxInit::catchCancelSignals() {
  // SIGTERM/SIGINT/SIGHUP to akabox cancel the sandbox cleanly instead of leaving it behind.
  sigset_t cancel;
  sigemptyset(&cancel);
  for (int s : {SIGTERM, SIGINT, SIGHUP}) sigaddset(&cancel, s);
  UniqueFd sigFd(::signalfd(-1, &cancel, SFD_CLOEXEC | SFD_NONBLOCK));
  if (!sigFd.valid()) return errnoError("signalfd");
  ::sigprocmask(SIG_BLOCK, &cancel, &oldMask_);
  cancelSignals_ = std::move(sigFd);
  return {};
}

SandboxInit::~SandboxInit() {
  killAndReap();
  handListenerToLender({});  // a lending thread still waiting gets nothing to close
  ::sigprocmask(SIG_SETMASK, &oldMask_, nullptr);
}

void SandboxInit::killAndReap() {
  if (pid_ < 0 || reaped_) return;
  ::syscall(SYS_pidfd_send_signal, pidFd_.get(), SIGKILL, nullptr, 0);
  reap();
}

int SandboxInit::reap() {
  int status = 0;
  while (::waitpid(pid_, &status, __WALL) < 0 && errno == EINTR) {
  }
  reaped_ = true;
  return status;
}

Status SandboxInit::handMountNamespace(UniqueFd ns) {
  EntryMessage m;
  m.hasMountNs = 1;
  std::vector<int> fds{ns.get()};
  return sendEntry(m, fds, {});
}

Status SandboxInit::release(SandboxEntry entry) {
  EntryMessage m;
  if (ipcUtsHanded_ && !entry.ns.task.valid() && (!entry.ns.ipc.valid() || !entry.ns.uts.valid()))
    return Error{"the sandbox's ipc and uts namespaces are missing from the release"};
  // Without ipcUtsHanded_ the init made its own.
  std::vector<int> fds = releaseDescriptors(m, entry.ns, ipcUtsHanded_, entry.cgroupJoin);
  policy_ = entry.policy;
  std::string filter = policy_ ? policy_->serialize() : std::string();
  if (filter.size() > kMaxFilterBytes) return Error{"the seccomp filter is too large to hand to the sandbox's init"};
  m.policyBytes = static_cast<uint32_t>(filter.size());
  return sendEntry(m, fds, filter);
}

Status SandboxInit::sendEntry(const EntryMessage& m, const std::vector<int>& fds, const std::string& filter) {
  if (fds.size() > kMaxPassedFds) return Error{"too many descriptors for the sandbox's init"};
  iovec iov[2] = {{const_cast<EntryMessage*>(&m), sizeof(m)}, {const_cast<char*>(filter.data()), filter.size()}};
  // An init that already failed has closed its end; its report says why, so that is not
  // akabox's error.
  if (sendWithRights(channel_.get(), iov, 2, fds, MSG_NOSIGNAL) < 0 && errno != EPIPE && errno != ECONNRESET)
    return errnoError("sendmsg(to the sandbox's init)");
  return {};
}

bool SandboxInit::drop(double timeoutS) {
  EntryMessage m;
  m.drop = 1;
  if (!sendEntry(m, {}, {})) return false;
  pollfd p{pidFd_.get(), POLLIN, 0};
  for (const double until = monotonicS() + timeoutS;;) {
    const double left = until - monotonicS();
    if (left <= 0) return false;
    const int rc = ::poll(&p, 1, static_cast<int>(left * 1000) + 1);
    if (rc > 0) break;
    if (rc < 0 && errno != EINTR) return false;
  }
  return WIFEXITED(reap());  // at a step of its own (a failed one too), not inside malloc
}

Status SandboxInit::go() {
  char byte = 'g';
  // A sandbox that already failed has no reader left; its report says why.
  if (::write(go_.get(), &byte, 1) != 1 && errno != EPIPE) return errnoError("write(go signal to the sandbox)");
  go_.reset();
  return {};
}

void SandboxInit::handListenerToLender(UniqueFd listener) {
  if (lenderJob_ == nullptr) return;  // no lending thread: closed here
  lenderJob_->fd = listener.release();
  __atomic_store_n(&lenderJob_->state, 1, __ATOMIC_RELEASE);
  ::syscall(SYS_futex, &lenderJob_->state, FUTEX_WAKE_PRIVATE, 1, nullptr, nullptr, 0);
  lenderJob_ = nullptr;
}

}  // namespace akad::box
