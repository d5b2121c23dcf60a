#include "sandbox/mnt_thread.h"

#include <fcntl.h>
#include <linux/close_range.h>
#include <sched.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

#include "sandbox/cpu.h"
#include "sandbox/helper_thread.h"
#include "sandbox/mnt.h"
#include "sandbox/shared_clone.h"
#include "sandbox/subproc.h"

namespace akad::box {

bool mountNamespaceOnThread(const SandboxSpec& spec) {
  return kCanShareMemory && !spec.mountTemplate && spinningPays() && !mountsUnderProc(spec);
}

MountNamespaceThread::~MountNamespaceThread() {
  if (!started_) return;
  setWordAndWake(opened_);
  waitForWord(gone_, false);
}

Status MountNamespaceThread::start(const SandboxSpec& spec, const std::vector<DevicePassthrough>& devices) {
  spec_ = &spec;
  devices_ = &devices;
  const char* slow = std::getenv("AKABOX_TEST_SLOW_DETACH");
  slowDetach_ = slow && std::string(slow) == "1";
  // The build is the deepest of akabox's set-up paths (some tens of KiB of stack; the shared
  // init's stack is 1 MiB for it). Untouched pages cost nothing.
  const int rc = startHelperThread(&MountNamespaceThread::run, this, true, 1 << 20);
  if (rc != 0) return errnoError("pthread_create (mount namespace)", rc);
  started_ = true;
  return {};
}

void* MountNamespaceThread::run(void* arg) {
  auto* self = static_cast<MountNamespaceThread*>(arg);
  // A mount namespace, root, working directory and umask for this thread alone; akabox's
  // other threads keep theirs (pivot_root moves only the tasks whose root is this
  // namespace's).
  Status st;
  self->tid_ = static_cast<int>(::syscall(SYS_gettid));
  if (::unshare(CLONE_NEWNS) != 0) {
    st = errnoError("unshare(CLONE_NEWNS)");
    self->unshareFailed_ = true;
  }
  // akabox opens the namespace's file itself, while it waits (0.03 ms less on this thread).
  setWordAndWake(self->unshared_);
  if (st) {
    // The sandbox's directories and files get exactly the modes the build asks for.
    ::umask(0);
    if (::syscall(SYS_close_range, 3U, ~0U, CLOSE_RANGE_UNSHARE) != 0) {
      // A table of descriptors of its own, with none of akabox's: the init, cloned while
      // this thread copies /etc, must not inherit a file open for writing on the root (the
      // root's read-only remount would fail with EBUSY), nor any host directory.
      st = errnoError("close_range(CLOSE_RANGE_UNSHARE)");
    } else {
      MountBuild how{false, true, [self] {
                       setWordAndWake(self->enterable_);
                       if (self->slowDetach_) ::usleep(100 * 1000);
                     }};
      st = buildMountNamespace(*self->spec_, *self->devices_, {}, how);
    }
  }
  self->built_ = std::move(st);
  setWordAndWake(self->done_);
  // A build that failed before it was enterable: take() finds `done_` and the failure.
  if (__atomic_load_n(&self->enterable_, __ATOMIC_RELAXED) == 0) setWordAndWake(self->enterable_);
  // The namespace lives on through akabox's file once it has one; the thread then ends.
  waitForWord(self->opened_, false);
  setWordAndWake(self->gone_);
  return nullptr;
}

Result<UniqueFd> MountNamespaceThread::take(bool spin) {
  if (!started_) return Error{"mount namespace: not started"};
  waitForWord(unshared_, spin);
  UniqueFd ns;
  int openErr = 0;
  if (!unshareFailed_) {
    ns.reset(::open(("/proc/self/task/" + std::to_string(tid_) + "/ns/mnt").c_str(), O_RDONLY | O_CLOEXEC));
    openErr = errno;
  }
  setWordAndWake(opened_);
  waitForWord(enterable_, spin);
  if (__atomic_load_n(&done_, __ATOMIC_ACQUIRE) != 0 && !built_) return Error{"mount namespace: " + built_.error().message};
  if (!ns.valid()) return errnoError("mount namespace: open /proc/self/task/" + std::to_string(tid_) + "/ns/mnt", openErr);
  return ns;
}

Status MountNamespaceThread::finish(bool spin) {
  if (!started_) return {};
  waitForWord(done_, spin);
  if (!built_) return Error{"mount namespace: " + built_.error().message};
  return {};
}

}  // namespace akad::box
