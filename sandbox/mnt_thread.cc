#include "sandbox/mnt_thread.h"

#include <fcntl.h>
#include <linux/close_range.h>
#include <sched.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "sandbox/cpu.h"
#include "sandbox/mnt.h"
#include "sandbox/shared_clone.h"
#include "sandbox/subproc.h"

namespace akad::box {

bool mountNamespaceOnThread(const SandboxSpec& spec) {
  return kCanShareMemory && !spec.mountTemplate && spinningPays() && !earlyCommandFor(spec) && !mountsUnderProc(spec);
}

MountNamespaceThread::~MountNamespaceThread() {
  if (started_) waitForWord(done_, false);
}

Status MountNamespaceThread::start(const SandboxSpec& spec, const std::vector<DevicePassthrough>& devices) {
  spec_ = &spec;
  devices_ = &devices;
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
  if (::unshare(CLONE_NEWNS) != 0) {
    st = errnoError("unshare(CLONE_NEWNS)");
  } else {
    // The sandbox's directories and files get exactly the modes the build asks for.
    ::umask(0);
    self->ns_.reset(::open("/proc/thread-self/ns/mnt", O_RDONLY | O_CLOEXEC));
    if (!self->ns_.valid()) {
      st = errnoError("open /proc/thread-self/ns/mnt");
    } else if (::syscall(SYS_close_range, 3U, ~0U, CLOSE_RANGE_UNSHARE) != 0) {
      // A table of descriptors of its own, with none of akabox's: the init, cloned while
      // this thread copies /etc, must not inherit a file open for writing on the root (the
      // root's read-only remount would fail with EBUSY), nor any host directory.
      st = errnoError("close_range(CLOSE_RANGE_UNSHARE)");
    } else {
      st = buildMountNamespace(*self->spec_, *self->devices_, {}, MountBuild{false, true});
    }
  }
  self->built_ = std::move(st);
  setWordAndWake(self->done_);
  // The thread ends here, and with it its hold on the namespace: the file keeps it.
  return nullptr;
}

Result<UniqueFd> MountNamespaceThread::take(bool spin) {
  if (!started_) return Error{"mount namespace: not started"};
  waitForWord(done_, spin);
  if (!built_) return Error{"mount namespace: " + built_.error().message};
  if (!ns_.valid()) return Error{"mount namespace: already taken"};
  return std::move(ns_);
}

}  // namespace akad::box
