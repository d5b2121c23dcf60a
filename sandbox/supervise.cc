#include "sandbox/subproc.h"

// SandboxInit::supervise: from the release to the init's reaping. akabox copies the output,
// answers the command's seccomp notifications, enforces the wall-clock, CPU-time and output
// limits and akabox's own cancel signals, and reaps the init.

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <string>

#include "common/unique_fd.h"
#include "sandbox/cpu.h"
#include "sandbox/fdpass.h"
#include "sandbox/helper_thread.h"
#include "sandbox/init_messages.h"

namespace akad::box {
namespace {

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
// (ns_thread.h), which waits for a last job anyway, takes it if there is one.
void releaseMountNamespaceWhenDone(pid_t initPid, int initPidFd, NamespaceThread* namespaceThread) {
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

// The supervision loop's state: what is still open, what the command's end looks like so
// far, and the limits that can end it. One poll per round; each ready descriptor has its
// step below.
class Supervisor {
 public:
  Supervisor(SandboxInit& init, SandboxCgroup& cgroup)
      : init_(init), cgroup_(cgroup), spec_(*init.req_.spec),
        wallDeadline_(spec_.wallTimeS > 0 ? init.t0_ + spec_.wallTimeS : 0),
        cpuLimitNs_(static_cast<uint64_t>(spec_.cpuTimeS * 1e9)), ncpu_(std::max(1L, ::sysconf(_SC_NPROCESSORS_ONLN))) {}

  // Until the init is gone and its output and reports are drained.
  Status watch();
  // Reaps the init and completes the exit from its status.
  Result<SandboxExit> reap();

 private:
  int enforceLimitsAndTimeout();
  void killInit(KillReason why);
  void readReport();
  void readCancelSignal();
  void takeListener();
  void answerListener(short revents);

  SandboxInit& init_;
  SandboxCgroup& cgroup_;
  const SandboxSpec& spec_;
  SandboxExit ex_;
  UniqueFd listener_, spentListener_;
  bool initDone_ = false, outOpen_ = true, errOpen_ = true, repOpen_ = true;
  // Once the init reports the command's end it exits at once; with CPUs to spare
  // (spinningPays) akabox polls without sleeping for at most this long meanwhile, instead of
  // being woken on an idle CPU when the pidfd fires. On two CPUs it sleeps: there the init's
  // exit took longer while akabox polled on the other CPU (docs/akabox-performance.md).
  double spinUntil_ = 0;
  const double wallDeadline_;
  const uint64_t cpuLimitNs_;
  const long ncpu_;
};

void Supervisor::killInit(KillReason why) {
  if (ex_.killedFor == KillReason::None) ex_.killedFor = why;
  ::syscall(SYS_pidfd_send_signal, init_.pidFd_.get(), SIGKILL, nullptr, 0);
}

// Kills the sandbox past its wall-clock or CPU-time limit; the poll's timeout until the next
// check (-1: none).
int Supervisor::enforceLimitsAndTimeout() {
  int timeoutMs = -1;
  const double now = monotonicS();
  if (!initDone_ && ex_.killedFor == KillReason::None) {
    if (wallDeadline_ > 0) {
      if (now >= wallDeadline_) killInit(KillReason::WallTime);
      else timeoutMs = static_cast<int>((wallDeadline_ - now) * 1000) + 1;
    }
    if (cpuLimitNs_) {
      uint64_t used = cgroup_.cpuUsageNs().value_or(0);
      if (used >= cpuLimitNs_) {
        killInit(KillReason::CpuTime);
      } else {
        // CPU time grows at most ncpu times as fast as wall time: sleep no longer than that.
        int ms = static_cast<int>((cpuLimitNs_ - used) / 1000000 / static_cast<uint64_t>(ncpu_));
        ms = std::clamp(ms, 5, 100);
        timeoutMs = timeoutMs < 0 ? ms : std::min(timeoutMs, ms);
      }
    }
  }
  if (initDone_) timeoutMs = timeoutMs < 0 ? 2000 : std::min(timeoutMs, 2000);
  else if (now < spinUntil_) timeoutMs = 0;
  return timeoutMs;
}

void Supervisor::readReport() {
  ReportMessage m;
  ssize_t got = ::read(init_.report_.get(), &m, sizeof(m));
  if (got <= 0) {
    repOpen_ = false;
    return;
  }
  if (got != sizeof(m)) return;
  m.text[sizeof(m.text) - 1] = '\0';
  switch (m.kind) {
    case ReportMessage::SetupFailed:
      // The first failure is the cause; a later one (the command, once the init is gone)
      // would only be its consequence.
      if (!ex_.setupError) {
        ex_.setupError = m.text;
        ex_.setupExitCode = 125;
      }
      break;
    case ReportMessage::ExecFailed: ex_.setupError = m.text; ex_.setupExitCode = m.value == ENOENT ? 127 : 126; break;
    case ReportMessage::CommandExited: ex_.commandExited = true; ex_.exitCode = m.value; break;
    case ReportMessage::CommandSignaled: ex_.commandSignaled = true; ex_.signal = m.value; break;
  }
  if ((m.kind == ReportMessage::CommandExited || m.kind == ReportMessage::CommandSignaled) && spinningPays())
    spinUntil_ = monotonicS() + 0.002;
}

void Supervisor::readCancelSignal() {
  signalfd_siginfo si{};
  if (::read(init_.cancelSignals_.get(), &si, sizeof(si)) == sizeof(si)) {
    ex_.cancelSignal = static_cast<int>(si.ssi_signo);
    killInit(KillReason::Cancelled);
  }
}

void Supervisor::takeListener() {
  if (UniqueFd fd = receiveFd(init_.channel_.get()); fd.valid()) {
    listener_ = std::move(fd);
    // The command sends its listener after the init's mount namespace is final, and akabox
    // has nothing else to do while the command runs.
    releaseMountNamespaceWhenDone(init_.pid_, init_.pidFd_.get(), init_.req_.namespaceThread);
    shieldInitFromOom(init_.pid_);
  }
  init_.channel_.reset();  // one listener per sandbox
}

void Supervisor::answerListener(short revents) {
  // A listener with no process left under its filter is closed only once the init is reaped
  // (reap): the last reference to the filter frees its BPF program, and the kernel's deferred
  // free (a text poke and TLB flushes) then runs beside the command's exit.
  bool gone;
  if ((revents & POLLIN) && init_.policy_)
    gone = !ex_.violations.handle(listener_.get(), *init_.policy_);
  else
    gone = (revents & (POLLHUP | POLLERR | POLLNVAL)) != 0;
  if (gone) spentListener_ = std::move(listener_);
}

Status Supervisor::watch() {
  while (!initDone_ || outOpen_ || errOpen_ || repOpen_) {
    const int timeoutMs = enforceLimitsAndTimeout();
    pollfd pfds[7];
    int n = 0;
    auto add = [&](int fd, bool on) -> int {
      if (!on || fd < 0) return -1;
      pfds[n] = pollfd{fd, POLLIN, 0};
      return n++;
    };
    int iPid = add(init_.pidFd_.get(), !initDone_);
    int iOut = add(init_.stdout_.get(), outOpen_);
    int iErr = add(init_.stderr_.get(), errOpen_);
    int iRep = add(init_.report_.get(), repOpen_);
    int iSig = add(init_.cancelSignals_.get(), true);
    int iSock = add(init_.channel_.get(), init_.channel_.valid());
    int iLis = add(listener_.get(), listener_.valid());
    int rc = ::poll(pfds, static_cast<nfds_t>(n), timeoutMs);
    if (rc < 0 && errno != EINTR) return errnoError("poll");
    if (rc == 0 && initDone_) break;  // writers are gone with the pid namespace; do not hang
    auto ready = [&](int i) { return i >= 0 && (pfds[i].revents & (POLLIN | POLLHUP | POLLERR)); };

    OutputCapture& output = *init_.req_.output;
    if (ready(iOut) && !output.drain(init_.stdout_.get(), OutputCapture::Stream::Out)) outOpen_ = false;
    if (ready(iErr) && !output.drain(init_.stderr_.get(), OutputCapture::Stream::Err)) errOpen_ = false;
    if (output.truncated() && !initDone_) killInit(KillReason::OutputLimit);
    if (ready(iRep)) readReport();
    if (ready(iSig)) readCancelSignal();
    if (ready(iSock)) takeListener();
    if (iLis >= 0 && pfds[iLis].revents) answerListener(pfds[iLis].revents);
    if (ready(iPid)) initDone_ = true;
  }
  return {};
}

Result<SandboxExit> Supervisor::reap() {
  int status = 0;
  if (::wait4(init_.pid_, &status, __WALL, &ex_.usage) < 0) return errnoError("wait4(sandbox init)");
  init_.reaped_ = true;
  init_.handListenerToLender(spentListener_.valid() ? std::move(spentListener_) : std::move(listener_));
  ex_.wallS = monotonicS() - init_.t0_;
  if (spec_.commandIsPid1 && !ex_.setupError) {
    if (WIFEXITED(status)) { ex_.commandExited = true; ex_.exitCode = WEXITSTATUS(status); }
    else if (WIFSIGNALED(status)) { ex_.commandSignaled = true; ex_.signal = WTERMSIG(status); }
  }
  if (!ex_.commandExited && !ex_.commandSignaled && !ex_.setupError) {
    if (WIFSIGNALED(status)) {
      // We (or the OOM killer) killed the init before it could report: the whole sandbox died.
      ex_.commandSignaled = true;
      ex_.signal = WTERMSIG(status);
    } else if (ex_.killedFor == KillReason::None) {
      ex_.setupError = "the sandbox's init exited (status " + std::to_string(WIFEXITED(status) ? WEXITSTATUS(status) : -1) +
                       ") without reporting the command's status";
    }
  }
  return std::move(ex_);
}

Result<SandboxExit> SandboxInit::supervise(SandboxCgroup& cgroup) {
  Supervisor s(*this, cgroup);
  if (auto st = s.watch(); !st) return st.error();
  return s.reap();
}

}  // namespace akad::box
