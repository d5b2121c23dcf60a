#include "sandbox/subproc.h"

#include <fcntl.h>
#include <linux/futex.h>
#include <linux/sched.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>

#include "common/unique_fd.h"
#include "sandbox/contain.h"
#include "sandbox/cpu.h"
#include "sandbox/fdpass.h"
#include "sandbox/shared_clone.h"

namespace akad::box {

// The lending thread's last job, on its own stack (lendToInit): `state` 1 once `fd` (the
// listener to close, or -1) is set.
struct LenderJob {
  alignas(4) int state = 0;
  int fd = -1;
};

// What the init starts from; it lives with the SandboxInit, since an init that shares akabox's
// memory reads it there until its end.
struct InitLaunch {
  ContainContext ctx;
  clone_args args{};
  ChildStack stack;  // the shared init's; its lending thread unmaps it once the init is gone
  int pidfd = -1;    // clone3 writes it
  long result = 0;   // the init's pid, or -errno
  uint32_t ready = 0;  // futex word: 1 once `result` is set
  struct LenderJob* job = nullptr;  // the lending thread's, published with `ready`
  bool moveInit = false;  // to `initCpus` at once (subproc.cc's placement)
  cpu_set_t initCpus{};
};

namespace {

// The shared init's stack, which the command also uses until its exec (contain.cc): the
// deepest set-up path, the mount build, needs some tens of KiB; untouched pages cost nothing.
constexpr size_t kInitStackBytes = 1 << 20;

struct Pipe {
  UniqueFd read, write;
};

Result<Pipe> makePipe(const char* what) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return errnoError(std::string("pipe2 for ") + what);
  return Pipe{UniqueFd(fds[0]), UniqueFd(fds[1])};
}

// The one descriptor a message on `sock` carries (the command's seccomp listener); anything
// more is closed.
UniqueFd receiveFd(int sock) {
  char byte;
  iovec iov{&byte, 1};
  RightsBuffer control{};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control.bytes;
  msg.msg_controllen = sizeof(control.bytes);
  if (::recvmsg(sock, &msg, MSG_CMSG_CLOEXEC) <= 0) return UniqueFd();
  std::vector<UniqueFd> fds = takeRights(msg);
  return fds.empty() ? UniqueFd() : std::move(fds.front());
}

int initMain(void* ctx) { runSandboxInit(*static_cast<const ContainContext*>(ctx)); }

// The thread whose thread-local state the shared init borrows (shared_clone.h): it clones the
// init, hands akabox the outcome, and from then on touches nothing of its own (raw system
// calls: no errno) until the init has exited; then it closes the seccomp listener akabox
// hands it once it has reaped the init, and ends, leaving the init's stack mapped (akabox
// exits right after the run, and unmapping it took 0.5 ms of TLB flushes on the development
// VM, while akabox's exit waited for this thread). The
// init's parent is this thread, so its death signal (PR_SET_PDEATHSIG) fires when the thread
// ends, which is after the init's; akabox's other threads reap it as before.
void* lendToInit(void* arg) {
  auto* l = static_cast<InitLaunch*>(arg);
  ChildStack stack = std::move(l->stack);
  LenderJob job;
  l->job = &job;
  const long pid = cloneOnStack(l->args, &initMain, &l->ctx);
  if (pid > 0 && l->moveInit) (void)rawSyscall(SYS_sched_setaffinity, pid, sizeof(l->initCpus), reinterpret_cast<long>(&l->initCpus));
  __atomic_store_n(&l->result, pid, __ATOMIC_RELEASE);
  __atomic_store_n(&l->ready, 1u, __ATOMIC_RELEASE);
  (void)rawSyscall(SYS_futex, reinterpret_cast<long>(&l->ready), FUTEX_WAKE_PRIVATE, 1);
  // `l` may be gone from here on (a failed start destroys the SandboxInit at once).
  if (pid > 0) {
    // Waits for the exit without reaping (WNOWAIT). Once akabox has reaped the init, or if
    // the pid is not a child any more, that is ECHILD: gone as well.
    siginfo_t info{};
    long rc;
    while ((rc = rawSyscall(SYS_waitid, P_PID, pid, reinterpret_cast<long>(&info), WEXITED | WNOWAIT | __WALL, 0)) == -EINTR) {
    }
    // The init is gone; akabox hands over the seccomp listener it reaped it with (or nothing):
    // its close frees the filter's BPF program, 0.4 ms on the development VM (a text poke and
    // TLB flushes), beside akabox's accounting rather than before it. akabox's exit waits
    // for this thread.
    int state;
    while ((state = __atomic_load_n(&job.state, __ATOMIC_ACQUIRE)) == 0)
      (void)rawSyscall(SYS_futex, reinterpret_cast<long>(&job.state), FUTEX_WAIT_PRIVATE, 0);
    if (job.fd >= 0) (void)rawSyscall(SYS_close, job.fd);
    // An init that did not exit by itself was killed (akabox drops an attempt whose template
    // turned out stale, or fails after the start), perhaps inside malloc, holding the lock of
    // the arena it used: this thread's. A thread that ends hands its arena to the next new
    // thread, which would then wait on that lock for ever (the next attempt's init did). So
    // this thread keeps it: it sleeps until akabox exits.
    if (rc != 0 || info.si_code != CLD_EXITED) {
      stack.leave();
      for (;;) (void)rawSyscall(SYS_pause);
    }
  }
  stack.leave();  // a failed clone3 leaves it too: the next attempt maps its own
  return nullptr;
}

// What the lender warms up ahead (InitLender): heap pages in its arena, and the top of the
// init's stack (the build is some tens of KiB deep). A free under 64 KiB does not trim the
// arena's heap, so the pages stay for the init.
constexpr size_t kWarmHeapBytes = 32 * 1024;
constexpr size_t kWarmStackBytes = 64 * 1024;
constexpr int kLenderLaunch = 1, kLenderEnd = 2;

unsigned long cloneFlags(bool mountNsHanded) {
  // Only what must exist at birth: the pid namespace (the init is its pid 1) and, where the
  // init builds it, the mount namespace. The init unshares its ipc and uts namespaces itself,
  // its cgroup namespace once it is inside its cgroup, and the command its user namespace
  // (user.h says why); the network namespace comes from akabox's thread (net.h), and the
  // mount namespace, with a template, is a copy of the template's, or the one akabox's mount
  // thread built (mnt_thread.h).
  return (mountNsHanded ? 0 : CLONE_NEWNS) | CLONE_NEWPID;
}

// The init is tiny, so the OOM killer already prefers the command; shielding the init as
// well (oom_score_adj -1000) needs CAP_SYS_RESOURCE, which some hosts withhold even from
// root: best effort. akabox writes it once it holds the command's seccomp listener: the
// command sent it, so it exists, and as a vfork child it has its own value, which a write to
// its parent's leaves alone (the kernel copies the value to processes sharing the memory
// only for CLONE_VM without CLONE_VFORK). Done here, while the command runs, rather than by
// the init, which shares the command's CPU and would do it after the command's end. An init
// that shares akabox's memory is outside the sandbox's cgroup, out of reach of its OOM
// killer; the shield then guards against the system's, and the kernel gives the value to
// akabox too (to every process sharing the memory but a vfork child).
void shieldInitFromOom(pid_t initPid) {
  const std::string path = "/proc/" + std::to_string(initPid) + "/oom_score_adj";
  UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CLOEXEC));
  if (fd.valid()) (void)!::write(fd.get(), "-1000", 5);
}

// The thread's whole work: wait for the init's end, drop the namespace. Its two descriptors
// come packed in the argument and it allocates nothing: a first malloc or free on a new
// thread sets up a malloc arena for it (four system calls), and as akabox's last thread it
// is on the way to akabox's exit (the std::thread it was showed them there).
void* dropMountNamespace(void* arg) {
  const auto fds = reinterpret_cast<uintptr_t>(arg);
  const int ns = static_cast<int>(fds & 0xffffffffu), done = static_cast<int>(fds >> 32);
  pollfd p{done, POLLIN, 0};
  while (::poll(&p, 1, -1) < 0 && errno == EINTR) {
  }
  ::close(ns);  // the teardown: every mount of the sandbox, then an expedited RCU grace period
  ::close(done);
  return nullptr;
}

// The init's exit tears its mount namespace down (every mount of the sandbox unmounted, then
// an expedited RCU grace period) before the init becomes a zombie, the pidfd wakes akabox and
// the cgroup can go: about a fifth of a millisecond of every spawn. Holding a reference to
// the namespace moves that work out of the init's exit; a thread drops the reference once
// the init is gone, while akabox reads the accounting, removes the cgroup and writes the
// result. The thread owns both descriptors; a process exits only when all its threads have,
// so the namespace is gone before akabox's caller sees akabox exit. The namespace thread
// (net.h), which waits for a last job anyway, takes it if there is one.
void releaseMountNamespaceWhenDone(pid_t initPid, int initPidFd, NetworkNamespaceMaker* namespaceThread) {
  UniqueFd ns(::open(("/proc/" + std::to_string(initPid) + "/ns/mnt").c_str(), O_RDONLY | O_CLOEXEC));
  UniqueFd done(::fcntl(initPidFd, F_DUPFD_CLOEXEC, 3));
  if (!ns.valid() || !done.valid()) return;  // no shortcut: the init's exit does the work
  if (namespaceThread && namespaceThread->lastJob(ns.get(), done.get())) {
    (void)ns.release();
    (void)done.release();
    return;
  }
  // Off akabox's CPU: woken there, the thread would wait behind akabox's accounting (both
  // are SCHED_BATCH) and do the teardown in akabox's exit after all, while the CPU the
  // init left idles.
  const uintptr_t packed = static_cast<uintptr_t>(static_cast<uint32_t>(ns.get())) |
                           (static_cast<uintptr_t>(static_cast<uint32_t>(done.get())) << 32);
  const bool started = startHelperThread(&dropMountNamespace, reinterpret_cast<void*>(packed), true) == 0;
  // The thread owns them now; without a thread they close here, and the init's exit does
  // the work as before.
  if (started) {
    (void)ns.release();
    (void)done.release();
  }
}

}  // namespace

int usableCpus() {
  static const int n = [] {
    cpu_set_t cpus;
    return ::sched_getaffinity(0, sizeof(cpus), &cpus) == 0 ? CPU_COUNT(&cpus) : 1;
  }();
  return n;
}

bool spinningPays() {
  static const bool pays = [] {
    const char* force = std::getenv("AKABOX_SPIN");
    if (force && (std::strcmp(force, "0") == 0 || std::strcmp(force, "1") == 0)) return force[0] == '1';
    return usableCpus() >= 4;
  }();
  return pays;
}

bool earlyCommandAsked() {
  const char* asked = std::getenv("AKABOX_EARLY_COMMAND");
  return asked && std::strcmp(asked, "1") == 0;
}

bool initLenderPays() { return kCanShareMemory && !earlyCommandAsked() && spinningPays(); }

bool earlyCommandFor(const SandboxSpec& spec) {
  return !spec.commandIsPid1 && !spec.mountTemplate && spinningPays() && earlyCommandAsked();
}

Result<std::unique_ptr<SandboxInit>> SandboxInit::start(const SpawnRequest& req) {
  std::unique_ptr<SandboxInit> self(new SandboxInit());
  self->req_ = req;
  ::sigprocmask(SIG_SETMASK, nullptr, &self->oldMask_);
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
  UniqueFd channelParent(sp[0]), channelChild(sp[1]);

  // SIGTERM/SIGINT/SIGHUP to akabox cancel the sandbox cleanly instead of leaving it behind.
  sigset_t cancel;
  sigemptyset(&cancel);
  for (int s : {SIGTERM, SIGINT, SIGHUP}) sigaddset(&cancel, s);
  UniqueFd sigFd(::signalfd(-1, &cancel, SFD_CLOEXEC | SFD_NONBLOCK));
  if (!sigFd.valid()) return errnoError("signalfd");
  ::sigprocmask(SIG_BLOCK, &cancel, &self->oldMask_);
  self->cancelSignals_ = std::move(sigFd);

  // Placement. A new task starts on its parent's CPU, and a scheduler that packs tasks onto
  // few CPUs (the development VM's does) leaves it there: the init's half of the set-up and
  // akabox's would run one after the other while another CPU idles. So akabox supervises as
  // SCHED_BATCH (the same share of CPU time, but a batch task never preempts on a wake-up),
  // set before clone3 so that the new init does not push akabox off its CPU either; and
  // right after clone3 akabox takes its own CPU out of the init's set, which moves the init
  // if it was queued there. Where the scheduler spread them already (the GPU machine), that
  // is a mask update. akabox's wake-ups (the listener, the output pipes, the report, the
  // init's exit) then do not cut into the init's and the command's work either. The init
  // takes akabox's policy and CPU set back before it starts the command (contain.cc).
  // Best effort: a call that fails changes nothing. The policy handed back is the caller's,
  // read at akabox's first start: a second attempt (a stale mount template, run.cc) finds
  // akabox in SCHED_BATCH already, and its command would get that.
  struct Caller {
    int policy = -1;
    sched_param param{};
  };
  static const Caller caller = [] {
    Caller c;
    c.policy = ::sched_getscheduler(0);
    if (c.policy >= 0 && ::sched_getparam(0, &c.param) != 0) c.policy = -1;
    return c;
  }();
  Placement place;
  place.policy = caller.policy;
  place.param = caller.param;
  if (caller.policy >= 0) {
    sched_param batch{};
    place.restorePolicy = ::sched_setscheduler(0, SCHED_BATCH, &batch) == 0;
  }
  cpu_set_t others;
  place.restoreCpus = cpusBesidesThisOne(place.cpus, others);
  // Decided here, not in the init: there the CPU set is the one akabox narrows below.
  const bool spin = spinningPays();
  // The early command (decided here, once, for both sides) starts before the release and
  // inherits the init's own ipc and uts namespaces (contain.cc), so with it the thread's are
  // not used.
  const SandboxSpec& s = *req.spec;
  const bool earlyCommand = earlyCommandFor(s) && !req.mountNsFromThread;
  const bool ipcUtsHanded = req.ipcUtsFromThread && !earlyCommand;
  self->ipcUtsHanded_ = ipcUtsHanded;

  // The init shares akabox's memory (shared_clone.h) unless it starts the command early,
  // which forks a copy of it. A shared init stays out of the sandbox's cgroup: a memory
  // cgroup's OOM killer that picked it would kill every process sharing its memory, akabox
  // included. The command joins the cgroup instead (contain.cc), or the init does when it is
  // the command itself (commandIsPid1: nothing else can run in the sandbox before its exec).
  self->launch_ = std::make_unique<InitLaunch>();
  InitLaunch& l = *self->launch_;
  const bool shared = kCanShareMemory && !earlyCommand;
  InitLender* lender = shared && req.lender && req.lender->available() ? req.lender : nullptr;
  if (shared) {
    l.stack = lender ? lender->takeStack() : ChildStack(kInitStackBytes);
    if (!l.stack.valid()) return errnoError("mmap (the sandbox init's stack)");
  }
  ContainContext& c = l.ctx;
  c.spec = req.spec;
  c.outsideUid = req.outsideUid;
  c.outsideGid = req.outsideGid;
  c.devices = req.devices;
  c.lifelineFd = lifeline->read.get();
  c.reportFd = rep->write.get();
  c.goFd = go->read.get();
  c.channelFd = channelChild.get();
  c.stdinFd = req.stdinFd;
  c.stdoutFd = out->write.get();
  c.stderrFd = err->write.get();
  c.placement = place;
  c.spin = spin;
  c.earlyCommand = earlyCommand;
  c.ipcUtsHanded = ipcUtsHanded;
  if (shared) c.sharedStackBottom = l.stack.bottom();
  // The mount thread allocates and takes locks while the init starts (mnt_thread.h): only an
  // init that shares akabox's memory may start beside it.
  if (req.mountNsFromThread && !shared) return Error{"internal: a mount namespace from akabox's thread needs an init that shares its memory"};
  c.mountNsHanded = req.spec->mountTemplate || req.mountNsFromThread;
  const bool initInCgroup = initJoinsCgroup(c);
  if (!initInCgroup) c.commandCgroupFd = req.cloneIntoCgroupFd;

  self->t0_ = monotonicS();
  clone_args& args = l.args;
  args.flags = cloneFlags(c.mountNsHanded) | CLONE_PIDFD;
  if (req.cloneIntoCgroupFd >= 0 && initInCgroup) {
    args.flags |= CLONE_INTO_CGROUP;
    args.cgroup = static_cast<uint64_t>(req.cloneIntoCgroupFd);
  }
  args.pidfd = reinterpret_cast<uint64_t>(&l.pidfd);
  args.exit_signal = SIGCHLD;
  long pid;
  if (shared) {
    args.flags |= CLONE_VM;
    args.stack = reinterpret_cast<uint64_t>(l.stack.bottom());
    args.stack_size = l.stack.size();
    // akabox waits while the lending thread clones the init: the thread then runs on
    // akabox's CPU at once instead of queueing behind the namespace thread on another, and
    // moves the init off akabox's CPU right after clone3, as below. Its signals are all
    // blocked, and so are the init's, which also inherits akabox's SCHED_BATCH; the command
    // unblocks its own (contain.cc).
    l.moveInit = place.restoreCpus;
    l.initCpus = others;
    if (lender) {
      lender->launch(&l);
    } else if (const int e = startHelperThread(&lendToInit, &l, false); e != 0) {
      return errnoError("pthread_create (the thread that starts the sandbox's init)", e);
    }
    while (__atomic_load_n(&l.ready, __ATOMIC_ACQUIRE) == 0)
      (void)::syscall(SYS_futex, &l.ready, FUTEX_WAIT_PRIVATE, 0, nullptr, nullptr, 0);
    pid = l.result;
    if (pid < 0) return errnoError("clone3(new pid and mount namespaces)", static_cast<int>(-pid));
    self->lenderJob_ = l.job;
  } else {
    pid = ::syscall(SYS_clone3, &args, sizeof(args));
    int cloneErr = errno;
    if (pid > 0 && place.restoreCpus) (void)::sched_setaffinity(static_cast<pid_t>(pid), sizeof(others), &others);
    if (pid < 0) return errnoError("clone3(new pid and mount namespaces)", cloneErr);
    if (pid == 0) runSandboxInit(c);
  }
  const int pidfd = l.pidfd;
  self->pid_ = static_cast<pid_t>(pid);
  self->pidFd_.reset(pidfd);
  self->lifeline_ = std::move(lifeline->write);
  self->go_ = std::move(go->write);
  self->report_ = std::move(rep->read);
  self->stdout_ = std::move(out->read);
  self->stderr_ = std::move(err->read);
  self->channel_ = std::move(channelParent);
  for (int fd : {self->stdout_.get(), self->stderr_.get()}) ::fcntl(fd, F_SETFL, O_NONBLOCK);
  return self;
}

Status InitLender::start() {
  // Off akabox's CPU: it warms up beside akabox's own start-up.
  const int rc = startHelperThread(&InitLender::run, this, true);
  if (rc != 0) return errnoError("pthread_create (the thread that will start the sandbox's init)", rc);
  running_ = true;
  return {};
}

InitLender::~InitLender() {
  if (!running_ || used_) return;
  waitForWord(warm_, false);  // until then the thread writes stack_
  __atomic_store_n(&job_, kLenderEnd, __ATOMIC_RELEASE);
  ::syscall(SYS_futex, &job_, FUTEX_WAKE_PRIVATE, 1, nullptr, nullptr, 0);
}

void* InitLender::run(void* arg) {
  auto* self = static_cast<InitLender*>(arg);
  if (void* p = std::malloc(kWarmHeapBytes)) {
    std::memset(p, 0, kWarmHeapBytes);
    std::free(p);
  }
  ChildStack stack(kInitStackBytes);
  if (stack.valid()) {
    char* top = static_cast<char*>(stack.bottom()) + stack.size();
    constexpr int kPopulateWrite = 23;  // MADV_POPULATE_WRITE, Linux 5.14; newer than Debian 12's headers
    if (::madvise(top - kWarmStackBytes, kWarmStackBytes, kPopulateWrite) != 0)
      for (char* p = top - kWarmStackBytes; p < top; p += 4096) *reinterpret_cast<volatile char*>(p) = 0;
  }
  self->stack_ = std::move(stack);
  const bool spin = spinningPays();
  setWordAndWake(self->warm_);
  waitForWord(self->job_, spin);
  if (__atomic_load_n(&self->job_, __ATOMIC_ACQUIRE) != kLenderLaunch) return nullptr;
  return lendToInit(self->launch_);  // `self` may be gone from here on
}

ChildStack InitLender::takeStack() {
  waitForWord(warm_, false);
  return std::move(stack_);
}

void InitLender::launch(InitLaunch* l) {
  used_ = true;
  launch_ = l;
  __atomic_store_n(&job_, kLenderLaunch, __ATOMIC_RELEASE);
  ::syscall(SYS_futex, &job_, FUTEX_WAKE_PRIVATE, 1, nullptr, nullptr, 0);
}

SandboxInit::~SandboxInit() {
  killAndReap();
  handListenerToLender({});  // a lending thread still waiting gets nothing to close
  ::sigprocmask(SIG_SETMASK, &oldMask_, nullptr);
}

void SandboxInit::killAndReap() {
  if (pid_ < 0 || reaped_) return;
  ::syscall(SYS_pidfd_send_signal, pidFd_.get(), SIGKILL, nullptr, 0);
  int status = 0;
  while (::waitpid(pid_, &status, __WALL) < 0 && errno == EINTR) {
  }
  reaped_ = true;
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

Result<SandboxExit> SandboxInit::supervise(SandboxCgroup& cgroup) {
  const SandboxSpec& spec = *req_.spec;
  SandboxExit ex;
  auto killInit = [&](KillReason why) {
    if (ex.killedFor == KillReason::None) ex.killedFor = why;
    ::syscall(SYS_pidfd_send_signal, pidFd_.get(), SIGKILL, nullptr, 0);
  };

  UniqueFd listener, spentListener;
  bool initDone = false, outOpen = true, errOpen = true, repOpen = true;
  // Once the init reports the command's end it exits at once; with CPUs to spare
  // (spinningPays) akabox polls without sleeping for at most this long meanwhile, instead of
  // being woken on an idle CPU (a tenth of a millisecond on the GPU machine) when the pidfd
  // fires. On two CPUs it sleeps: there the init's exit took 0.95 ms while akabox polled on
  // the other CPU, and 0.24 ms while it slept (the development VM, scheduler trace).
  double spinUntil = 0;
  const double wallDeadline = spec.wallTimeS > 0 ? t0_ + spec.wallTimeS : 0;
  const uint64_t cpuLimitNs = static_cast<uint64_t>(spec.cpuTimeS * 1e9);
  const long ncpu = std::max(1L, ::sysconf(_SC_NPROCESSORS_ONLN));

  while (!initDone || outOpen || errOpen || repOpen) {
    int timeoutMs = -1;
    const double now = monotonicS();
    if (!initDone && ex.killedFor == KillReason::None) {
      if (wallDeadline > 0) {
        if (now >= wallDeadline) killInit(KillReason::WallTime);
        else timeoutMs = static_cast<int>((wallDeadline - now) * 1000) + 1;
      }
      if (cpuLimitNs) {
        uint64_t used = cgroup.cpuUsageNs().value_or(0);
        if (used >= cpuLimitNs) {
          killInit(KillReason::CpuTime);
        } else {
          // CPU time grows at most ncpu times as fast as wall time: sleep no longer than that.
          int ms = static_cast<int>((cpuLimitNs - used) / 1000000 / static_cast<uint64_t>(ncpu));
          ms = std::clamp(ms, 5, 100);
          timeoutMs = timeoutMs < 0 ? ms : std::min(timeoutMs, ms);
        }
      }
    }
    if (initDone) timeoutMs = timeoutMs < 0 ? 2000 : std::min(timeoutMs, 2000);
    else if (now < spinUntil) timeoutMs = 0;

    pollfd pfds[7];
    int n = 0;
    auto add = [&](int fd, bool on) -> int {
      if (!on || fd < 0) return -1;
      pfds[n] = pollfd{fd, POLLIN, 0};
      return n++;
    };
    int iPid = add(pidFd_.get(), !initDone);
    int iOut = add(stdout_.get(), outOpen);
    int iErr = add(stderr_.get(), errOpen);
    int iRep = add(report_.get(), repOpen);
    int iSig = add(cancelSignals_.get(), true);
    int iSock = add(channel_.get(), channel_.valid());
    int iLis = add(listener.get(), listener.valid());
    int rc = ::poll(pfds, static_cast<nfds_t>(n), timeoutMs);
    if (rc < 0 && errno != EINTR) return errnoError("poll");
    if (rc == 0 && initDone) break;  // writers are gone with the pid namespace; do not hang
    auto ready = [&](int i) { return i >= 0 && (pfds[i].revents & (POLLIN | POLLHUP | POLLERR)); };

    if (ready(iOut) && !req_.output->drain(stdout_.get(), OutputCapture::Stream::Out)) outOpen = false;
    if (ready(iErr) && !req_.output->drain(stderr_.get(), OutputCapture::Stream::Err)) errOpen = false;
    if (req_.output->truncated() && !initDone) killInit(KillReason::OutputLimit);
    if (ready(iRep)) {
      ReportMessage m;
      ssize_t got = ::read(report_.get(), &m, sizeof(m));
      if (got <= 0) {
        repOpen = false;
      } else if (got == sizeof(m)) {
        m.text[sizeof(m.text) - 1] = '\0';
        switch (m.kind) {
          case ReportMessage::SetupFailed:
            // The first failure is the cause; a later one (the command, once the init is gone)
            // would only be its consequence.
            if (!ex.setupError) {
              ex.setupError = m.text;
              ex.setupExitCode = 125;
            }
            break;
          case ReportMessage::ExecFailed: ex.setupError = m.text; ex.setupExitCode = m.value == ENOENT ? 127 : 126; break;
          case ReportMessage::CommandExited: ex.commandExited = true; ex.exitCode = m.value; break;
          case ReportMessage::CommandSignaled: ex.commandSignaled = true; ex.signal = m.value; break;
        }
        if ((m.kind == ReportMessage::CommandExited || m.kind == ReportMessage::CommandSignaled) && spinningPays())
          spinUntil = monotonicS() + 0.002;
      }
    }
    if (ready(iSig)) {
      signalfd_siginfo si{};
      if (::read(cancelSignals_.get(), &si, sizeof(si)) == sizeof(si)) {
        ex.cancelSignal = static_cast<int>(si.ssi_signo);
        killInit(KillReason::Cancelled);
      }
    }
    if (ready(iSock)) {
      if (UniqueFd fd = receiveFd(channel_.get()); fd.valid()) {
        listener = std::move(fd);
        // The command sends its listener after the init's mount namespace is final, and
        // akabox has nothing else to do while the command runs.
        releaseMountNamespaceWhenDone(pid_, pidFd_.get(), req_.namespaceThread);
        shieldInitFromOom(pid_);
      }
      channel_.reset();  // one listener per sandbox
    }
    if (iLis >= 0 && pfds[iLis].revents) {
      // A listener with no process left under its filter is closed only once the init is
      // reaped (below): the last reference to the filter frees its BPF program, and the
      // kernel's deferred free (a text poke and TLB flushes, 0.24 ms of a worker on the 2-CPU
      // development VM) ran beside the command's exit.
      bool gone;
      if ((pfds[iLis].revents & POLLIN) && policy_)
        gone = !ex.violations.handle(listener.get(), *policy_);
      else
        gone = (pfds[iLis].revents & (POLLHUP | POLLERR | POLLNVAL)) != 0;
      if (gone) spentListener = std::move(listener);
    }
    if (ready(iPid)) initDone = true;
  }

  int status = 0;
  if (::wait4(pid_, &status, __WALL, &ex.usage) < 0) return errnoError("wait4(sandbox init)");
  reaped_ = true;
  handListenerToLender(spentListener.valid() ? std::move(spentListener) : std::move(listener));
  ex.wallS = monotonicS() - t0_;
  if (spec.commandIsPid1 && !ex.setupError) {
    if (WIFEXITED(status)) { ex.commandExited = true; ex.exitCode = WEXITSTATUS(status); }
    else if (WIFSIGNALED(status)) { ex.commandSignaled = true; ex.signal = WTERMSIG(status); }
  }
  if (!ex.commandExited && !ex.commandSignaled && !ex.setupError) {
    if (WIFSIGNALED(status)) {
      // We (or the OOM killer) killed the init before it could report: the whole sandbox died.
      ex.commandSignaled = true;
      ex.signal = WTERMSIG(status);
    } else if (ex.killedFor == KillReason::None) {
      ex.setupError = "the sandbox's init exited (status " + std::to_string(WIFEXITED(status) ? WEXITSTATUS(status) : -1) +
                      ") without reporting the command's status";
    }
  }
  return ex;
}

}  // namespace akad::box
