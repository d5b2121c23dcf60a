#include "sandbox/init_lender.h"

#include <linux/futex.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include <cstdlib>
#include <cstring>

#include "sandbox/cpu.h"
#include "sandbox/helper_thread.h"
#include "sandbox/subproc.h"

namespace akad::box {
namespace {

int initMain(void* ctx) { runSandboxInit(*static_cast<const ContainContext*>(ctx)); }

// What the lender warms up ahead (InitLender): heap pages in its arena, and the top of the
// init's stack (the build is some tens of KiB deep). A free under 64 KiB does not trim the
// arena's heap, so the pages stay for the init.
constexpr size_t kWarmHeapBytes = 32 * 1024;
constexpr size_t kWarmStackBytes = 64 * 1024;
constexpr int kLenderLaunch = 1, kLenderEnd = 2;

// The thread whose thread-local state the shared init borrows (shared_clone.h): it clones the
// init, hands akabox the outcome, and from then on touches nothing of its own (raw system
// calls: no errno) until the init has exited; then it closes the seccomp listener akabox
// hands it once it has reaped the init, and ends, leaving the init's stack mapped (akabox
// exits right after the run, and unmapping it took 0.5 ms of TLB flushes on the development
// VM, while akabox's exit waited for this thread). The
// init's parent is this thread, so its death signal (PR_SET_PDEATHSIG) fires when the thread
// ends, which is after the init's; akabox's other threads reap it as before.
}  // namespace

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

bool initLenderPays() { return kCanShareMemory && spinningPays(); }

}  // namespace akad::box
