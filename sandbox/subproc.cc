#include "sandbox/subproc.h"

#include <fcntl.h>
#include <linux/sched.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "common/unique_fd.h"
#include "sandbox/contain.h"

namespace akad::box {
namespace {

double nowS() {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

struct Pipe {
  UniqueFd read, write;
};

Result<Pipe> makePipe(const char* what) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return errnoError(std::string("pipe2 for ") + what);
  return Pipe{UniqueFd(fds[0]), UniqueFd(fds[1])};
}

int receiveFd(int sock) {
  char byte;
  iovec iov{&byte, 1};
  char control[CMSG_SPACE(sizeof(int))] = {};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof(control);
  if (::recvmsg(sock, &msg, MSG_CMSG_CLOEXEC) <= 0) return -1;
  for (cmsghdr* cm = CMSG_FIRSTHDR(&msg); cm; cm = CMSG_NXTHDR(&msg, cm)) {
    if (cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS) {
      int fd;
      std::memcpy(&fd, CMSG_DATA(cm), sizeof(int));
      return fd;
    }
  }
  return -1;
}

unsigned long cloneFlags(const SandboxSpec& spec) {
  // The user namespace is created later by the command itself (user.h says why); the cgroup
  // namespace by the init once it is inside its cgroup.
  unsigned long f = CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWIPC | CLONE_NEWUTS;
  if (spec.net == NetMode::None) f |= CLONE_NEWNET;
  return f;
}

}  // namespace

Result<SandboxExit> runSupervised(const SpawnRequest& req) {
  const SandboxSpec& spec = *req.spec;
  auto lifeline = makePipe("the lifeline");
  if (!lifeline) return lifeline.error();
  auto rep = makePipe("the report channel");
  if (!rep) return rep.error();
  auto out = makePipe("stdout");
  if (!out) return out.error();
  auto err = makePipe("stderr");
  if (!err) return err.error();
  int sp[2];
  if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp) != 0) return errnoError("socketpair for the seccomp listener");
  UniqueFd notifyParent(sp[0]), notifyChild(sp[1]);

  // SIGTERM/SIGINT/SIGHUP to akabox cancel the sandbox cleanly instead of leaving it behind.
  sigset_t cancel;
  sigemptyset(&cancel);
  for (int s : {SIGTERM, SIGINT, SIGHUP}) sigaddset(&cancel, s);
  sigset_t oldMask;
  ::sigprocmask(SIG_BLOCK, &cancel, &oldMask);
  UniqueFd sigFd(::signalfd(-1, &cancel, SFD_CLOEXEC | SFD_NONBLOCK));
  if (!sigFd.valid()) return errnoError("signalfd");

  SandboxExit ex;
  const double t0 = nowS();
  int pidfd = -1;
  clone_args args{};
  args.flags = cloneFlags(spec) | CLONE_PIDFD;
  if (req.cgroup->cloneIntoFd() >= 0) {
    args.flags |= CLONE_INTO_CGROUP;
    args.cgroup = static_cast<uint64_t>(req.cgroup->cloneIntoFd());
  }
  args.pidfd = reinterpret_cast<uint64_t>(&pidfd);
  args.exit_signal = SIGCHLD;
  long pid = ::syscall(SYS_clone3, &args, sizeof(args));
  if (pid < 0) return errnoError("clone3(new mount, pid, ipc, uts, net namespaces)");
  if (pid == 0) {
    ContainContext c;
    c.spec = req.spec;
    c.policy = req.policy;
    c.outsideUid = req.outsideUid;
    c.outsideGid = req.outsideGid;
    c.devices = req.devices;
    c.lifelineFd = lifeline->read.get();
    c.cgroupJoinFiles = req.cgroup->selfJoinFiles();
    c.reportFd = rep->write.get();
    c.notifySockFd = notifyChild.get();
    c.stdinFd = req.stdinFd;
    c.stdoutFd = out->write.get();
    c.stderrFd = err->write.get();
    runSandboxInit(c);
  }
  UniqueFd pidFd(pidfd);
  lifeline->read.reset();
  rep->write.reset();
  out->write.reset();
  err->write.reset();
  notifyChild.reset();

  auto killInit = [&](KillReason why) {
    if (ex.killedFor == KillReason::None) ex.killedFor = why;
    ::syscall(SYS_pidfd_send_signal, pidFd.get(), SIGKILL, nullptr, 0);
  };


  for (int fd : {out->read.get(), err->read.get()}) ::fcntl(fd, F_SETFL, O_NONBLOCK);
  UniqueFd listener;
  bool initDone = false, outOpen = true, errOpen = true, repOpen = true;
  const double wallDeadline = spec.wallTimeS > 0 ? t0 + spec.wallTimeS : 0;
  const uint64_t cpuLimitNs = static_cast<uint64_t>(spec.cpuTimeS * 1e9);
  const long ncpu = std::max(1L, ::sysconf(_SC_NPROCESSORS_ONLN));

  while (!initDone || outOpen || errOpen || repOpen) {
    int timeoutMs = -1;
    const double now = nowS();
    if (!initDone && ex.killedFor == KillReason::None) {
      if (wallDeadline > 0) {
        if (now >= wallDeadline) killInit(KillReason::WallTime);
        else timeoutMs = static_cast<int>((wallDeadline - now) * 1000) + 1;
      }
      if (cpuLimitNs) {
        uint64_t used = req.cgroup->cpuUsageNs().value_or(0);
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

    pollfd pfds[7];
    int n = 0;
    auto add = [&](int fd, bool on) -> int {
      if (!on || fd < 0) return -1;
      pfds[n] = pollfd{fd, POLLIN, 0};
      return n++;
    };
    int iPid = add(pidFd.get(), !initDone);
    int iOut = add(out->read.get(), outOpen);
    int iErr = add(err->read.get(), errOpen);
    int iRep = add(rep->read.get(), repOpen);
    int iSig = add(sigFd.get(), true);
    int iSock = add(notifyParent.get(), notifyParent.valid());
    int iLis = add(listener.get(), listener.valid());
    int rc = ::poll(pfds, static_cast<nfds_t>(n), timeoutMs);
    if (rc < 0 && errno != EINTR) return errnoError("poll");
    if (rc == 0 && initDone) break;  // writers are gone with the pid namespace; do not hang
    auto ready = [&](int i) { return i >= 0 && (pfds[i].revents & (POLLIN | POLLHUP | POLLERR)); };

    if (ready(iOut) && !req.output->drain(out->read.get(), OutputCapture::Stream::Out)) outOpen = false;
    if (ready(iErr) && !req.output->drain(err->read.get(), OutputCapture::Stream::Err)) errOpen = false;
    if (req.output->truncated() && !initDone) killInit(KillReason::OutputLimit);
    if (ready(iRep)) {
      ReportMessage m;
      ssize_t got = ::read(rep->read.get(), &m, sizeof(m));
      if (got <= 0) {
        repOpen = false;
      } else if (got == sizeof(m)) {
        m.text[sizeof(m.text) - 1] = '\0';
        switch (m.kind) {
          case ReportMessage::SetupFailed: ex.setupError = m.text; ex.setupExitCode = 125; break;
          case ReportMessage::ExecFailed: ex.setupError = m.text; ex.setupExitCode = m.value == ENOENT ? 127 : 126; break;
          case ReportMessage::CommandExited: ex.commandExited = true; ex.exitCode = m.value; break;
          case ReportMessage::CommandSignaled: ex.commandSignaled = true; ex.signal = m.value; break;
        }
      }
    }
    if (ready(iSig)) {
      signalfd_siginfo si{};
      if (::read(sigFd.get(), &si, sizeof(si)) == sizeof(si)) {
        ex.cancelSignal = static_cast<int>(si.ssi_signo);
        killInit(KillReason::Cancelled);
      }
    }
    if (ready(iSock)) {
      int fd = receiveFd(notifyParent.get());
      if (fd >= 0) listener.reset(fd);
      notifyParent.reset();  // one listener per sandbox
    }
    if (iLis >= 0 && pfds[iLis].revents) {
      if ((pfds[iLis].revents & POLLIN) && req.policy) {
        if (!ex.violations.handle(listener.get(), *req.policy)) listener.reset();
      } else if (pfds[iLis].revents & (POLLHUP | POLLERR | POLLNVAL)) {
        listener.reset();
      }
    }
    if (ready(iPid)) initDone = true;
  }

  int status = 0;
  if (::wait4(static_cast<pid_t>(pid), &status, __WALL, &ex.usage) < 0) return errnoError("wait4(sandbox init)");
  ex.wallS = nowS() - t0;
  ::sigprocmask(SIG_SETMASK, &oldMask, nullptr);
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
