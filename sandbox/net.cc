#include "sandbox/net.h"

#include <fcntl.h>
#include <linux/futex.h>
#include <net/if.h>
#include <sched.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "sandbox/cpu.h"

namespace akad::box {
namespace {

// New namespaces for the calling thread alone: the network namespace, and with `all` the ipc
// and uts namespaces too, opened into the given descriptors. System calls only (net.h says
// why). Returns the step that failed, with errno set, or null.
const char* unshareNamespaces(bool all, int& net, int& ipc, int& uts) {
  if (::unshare(CLONE_NEWNET | (all ? CLONE_NEWIPC | CLONE_NEWUTS : 0)) != 0)
    return all ? "unshare(CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS)" : "unshare(CLONE_NEWNET)";
  // The first lookup in /proc/thread-self is the dear one; the rest go from its directory.
  int dir = ::open("/proc/thread-self/ns", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir < 0) return "open /proc/thread-self/ns";
  net = ::openat(dir, "net", O_RDONLY | O_CLOEXEC);
  if (all && net >= 0) ipc = ::openat(dir, "ipc", O_RDONLY | O_CLOEXEC);
  if (all && ipc >= 0) uts = ::openat(dir, "uts", O_RDONLY | O_CLOEXEC);
  const int err = errno;
  ::close(dir);
  errno = err;
  if (net < 0) return "open /proc/thread-self/ns/net";
  if (all && (ipc < 0 || uts < 0)) return "open /proc/thread-self/ns/ipc and uts";
  return nullptr;
}

// A fresh network namespace has only a loopback interface, and it is down: up it goes, in
// the calling thread's namespace. Returns the step that failed, with errno set, or null.
const char* bringLoopbackUp() {
  int s = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (s < 0) return "socket(AF_INET) for configuring lo";
  ifreq ifr{};
  std::memcpy(ifr.ifr_name, "lo", 3);
  bool up = ::ioctl(s, SIOCGIFFLAGS, &ifr) == 0;
  if (up) {
    ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
    up = ::ioctl(s, SIOCSIFFLAGS, &ifr) == 0;
  }
  int err = errno;
  ::close(s);
  if (!up) {
    errno = err;
    return "ioctl(SIOCSIFFLAGS, lo up)";
  }
  return nullptr;
}

void setAndWake(int& word) {
  __atomic_store_n(&word, 1, __ATOMIC_RELEASE);
  ::syscall(SYS_futex, &word, FUTEX_WAKE_PRIVATE, 1, nullptr, nullptr, 0);
}

}  // namespace

NetworkNamespaceMaker::~NetworkNamespaceMaker() {
  if (running_) waitFor(done_, false);
  for (int fd : {fd_, ipcFd_, utsFd_})
    if (fd >= 0) ::close(fd);
}

void NetworkNamespaceMaker::waitFor(int& word, bool spin) {
  if (spin) {
    const double until = monotonicS() + 0.001;
    for (int i = 0; __atomic_load_n(&word, __ATOMIC_ACQUIRE) == 0; ++i) {
      cpuRelax();
      if ((i & 63) == 0 && monotonicS() >= until) break;
    }
  }
  while (__atomic_load_n(&word, __ATOMIC_ACQUIRE) == 0)
    ::syscall(SYS_futex, &word, FUTEX_WAIT_PRIVATE, 0, nullptr, nullptr, 0);
}

Status NetworkNamespaceMaker::start() {
  pthread_attr_t attr;
  if (int rc = ::pthread_attr_init(&attr); rc != 0) return errnoError("pthread_attr_init", rc);
  (void)::pthread_attr_setstacksize(&attr, 64 * 1024);  // a few system calls deep
  (void)::pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  // Off akabox's CPU, where a new thread would otherwise start and stay on a scheduler that
  // packs tasks (subproc.cc, "Placement"): it would only take turns with akabox.
  cpu_set_t mine, others;
  if (cpusBesidesThisOne(mine, others)) (void)::pthread_attr_setaffinity_np(&attr, sizeof(others), &others);
  sigset_t all, old;
  sigfillset(&all);
  ::pthread_sigmask(SIG_SETMASK, &all, &old);
  pthread_t thread;
  int rc = ::pthread_create(&thread, &attr, &NetworkNamespaceMaker::run, this);
  ::pthread_sigmask(SIG_SETMASK, &old, nullptr);
  ::pthread_attr_destroy(&attr);
  if (rc != 0) return errnoError("pthread_create (network namespace)", rc);
  running_ = true;
  return {};
}

void* NetworkNamespaceMaker::run(void* arg) {
  auto* self = static_cast<NetworkNamespaceMaker*>(arg);
  const char* failed = unshareNamespaces(true, self->fd_, self->ipcFd_, self->utsFd_);
  if (failed) {
    self->failedStep_ = failed;
    self->err_ = errno;
  }
  setAndWake(self->opened_);
  if (!failed) {
    if (const char* loFailed = bringLoopbackUp()) {
      self->loFailedStep_ = loFailed;
      self->loErr_ = errno;
    }
  }
  setAndWake(self->done_);
  return nullptr;  // the thread ends; the descriptor keeps the namespace
}

Result<SandboxNamespaces> NetworkNamespaceMaker::makeHere() {
  UniqueFd own(::open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC));
  if (!own.valid()) return errnoError("open /proc/thread-self/ns/net (akabox's own network namespace)");
  int fd = -1, unused = -1;
  const char* failed = unshareNamespaces(false, fd, unused, unused);
  if (!failed) failed = bringLoopbackUp();
  const int err = errno;
  SandboxNamespaces made;
  made.net.reset(fd);
  // Back home first, whatever happened: akabox must not stay in the sandbox's namespace.
  if (::setns(own.get(), CLONE_NEWNET) != 0) return errnoError("setns back to akabox's own network namespace");
  if (failed) return errnoError(std::string("network namespace: ") + failed, err);
  return made;
}

Result<SandboxNamespaces> NetworkNamespaceMaker::take(bool spin) {
  if (running_) waitFor(opened_, spin);
  if (failedStep_) return errnoError(std::string("network namespace: ") + failedStep_, err_);
  if (fd_ < 0) return Error{"network namespace: not started"};
  SandboxNamespaces ns;
  ns.net.reset(fd_);
  ns.ipc.reset(ipcFd_);
  ns.uts.reset(utsFd_);
  fd_ = ipcFd_ = utsFd_ = -1;
  return ns;
}

Status NetworkNamespaceMaker::loopbackUp(bool spin) {
  if (!running_) return {};
  waitFor(done_, spin);
  running_ = false;
  if (loFailedStep_) return errnoError(std::string("network namespace: ") + loFailedStep_, loErr_);
  return {};
}

}  // namespace akad::box
