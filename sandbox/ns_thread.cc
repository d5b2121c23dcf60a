#include "sandbox/ns_thread.h"

#include <fcntl.h>
#include <linux/futex.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "sandbox/helper_thread.h"
#include "sandbox/net.h"

namespace akad::box {
namespace {

constexpr int kDropJob = 1, kNoJob = 2;

// pidfd_open's PIDFD_THREAD (Linux 6.9): a pidfd of one thread, not of its process. Newer
// than Debian 12's kernel headers.
constexpr unsigned kPidfdThread = O_EXCL;

}  // namespace

// The thread's last job, on its own stack. `state`: 0 while none is posted, kDropJob with
// `ns` and `done` set, kNoJob to just exit.
struct NamespaceThread::Job {
  alignas(4) int state = 0;
  int ns = -1, done = -1;
};

NamespaceThread::~NamespaceThread() { finish(); }

void NamespaceThread::finish() {
  if (!running_) return;
  withIpcAndUts(true);  // if not decided yet: the thread waits for the decision
  postJob(kNoJob);
}

void NamespaceThread::withIpcAndUts(bool make) {
  // Only akabox's main thread sets the word, so a plain read of it tells whether it did.
  if (!running_ || ipcUtsDecided_ != 0) return;
  ipcUts_ = make;
  setWordAndWake(ipcUtsDecided_);
}

Status NamespaceThread::start() {
  // Off akabox's CPU, where a new thread would otherwise start and stay on a scheduler that
  // packs tasks (cpu.h): it would only take turns with akabox.
  const int rc = startHelperThread(&NamespaceThread::run, this, true);
  if (rc != 0) return errnoError("pthread_create (network namespace)", rc);
  running_ = true;
  return {};
}

void* NamespaceThread::run(void* arg) {
  auto* self = static_cast<NamespaceThread*>(arg);
  Job job;
  self->job_ = &job;
  __atomic_store_n(&self->tid_, static_cast<int>(::syscall(SYS_gettid)), __ATOMIC_RELEASE);
  bool made = ::unshare(CLONE_NEWNET) == 0;
  if (!made) {
    self->failedStep_ = "unshare(CLONE_NEWNET)";
    self->err_ = errno;
  }
  // Then ipc and uts, if akabox wants them from here (withIpcAndUts(); decided long before
  // the network namespace is made).
  waitForWord(self->ipcUtsDecided_, false);
  if (made && self->ipcUts_) {
    made = ::unshare(CLONE_NEWIPC | CLONE_NEWUTS) == 0;
    if (!made) {
      self->failedStep_ = "unshare(CLONE_NEWIPC | CLONE_NEWUTS)";
      self->err_ = errno;
    }
  }
  setWordAndWake(self->opened_);
  if (made) {
    if (const char* loFailed = bringLoopbackUp()) {
      self->loFailedStep_ = loFailed;
      self->loErr_ = errno;
    }
  }
  setWordAndWake(self->done_);
  // `self` may be gone from here on. The namespaces live as long as this thread: wait for
  // the last job.
  int state;
  while ((state = __atomic_load_n(&job.state, __ATOMIC_ACQUIRE)) == 0)
    ::syscall(SYS_futex, &job.state, FUTEX_WAIT_PRIVATE, 0, nullptr, nullptr, 0);
  if (state == kDropJob) {
    pollfd p{job.done, POLLIN, 0};
    while (::poll(&p, 1, -1) < 0 && errno == EINTR) {
    }
    ::close(job.ns);  // the teardown: every mount of the sandbox, then an expedited RCU grace period
    ::close(job.done);
  }
  return nullptr;
}

void NamespaceThread::postJob(int state) {
  waitForWord(done_, false);  // job_ is published with done_
  __atomic_store_n(&job_->state, state, __ATOMIC_RELEASE);
  ::syscall(SYS_futex, &job_->state, FUTEX_WAKE_PRIVATE, 1, nullptr, nullptr, 0);
  running_ = false;  // the thread is on its own now
}

bool NamespaceThread::lastJob(int ns, int done) {
  if (!running_) return false;
  waitForWord(done_, false);
  job_->ns = ns;
  job_->done = done;
  postJob(kDropJob);
  return true;
}

Result<SandboxNamespaces> NamespaceThread::take(bool spin) {
  if (!running_) return Error{"network namespace: not started"};
  withIpcAndUts(true);
  SandboxNamespaces ns;
  // The pidfd while the thread works, if its id is out already (it is its first step).
  const int tid = __atomic_load_n(&tid_, __ATOMIC_ACQUIRE);
  if (tid > 0) ns.task.reset(static_cast<int>(::syscall(SYS_pidfd_open, tid, kPidfdThread)));
  waitForWord(opened_, spin);
  if (failedStep_) return errnoError(std::string("network namespace: ") + failedStep_, err_);
  if (!ns.task.valid()) ns.task.reset(static_cast<int>(::syscall(SYS_pidfd_open, tid_, kPidfdThread)));
  if (ns.task.valid()) return ns;
  // A kernel without thread pidfds (before 6.9): the thread's namespace files, then.
  const std::string dir = "/proc/self/task/" + std::to_string(tid_) + "/ns/";
  ns.net.reset(::open((dir + "net").c_str(), O_RDONLY | O_CLOEXEC));
  ns.ipc.reset(::open((dir + "ipc").c_str(), O_RDONLY | O_CLOEXEC));
  ns.uts.reset(::open((dir + "uts").c_str(), O_RDONLY | O_CLOEXEC));
  if (!ns.net.valid() || !ns.ipc.valid() || !ns.uts.valid()) return errnoError("network namespace: open " + dir + "{net,ipc,uts}");
  return ns;
}

Status NamespaceThread::loopbackUp(bool spin) {
  if (!running_) return {};
  waitForWord(done_, spin);
  if (loFailedStep_) return errnoError(std::string("network namespace: ") + loFailedStep_, loErr_);
  return {};
}

}  // namespace akad::box
