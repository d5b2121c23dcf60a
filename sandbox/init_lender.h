#pragma once
// The thread that lends an init sharing akabox's memory its thread-local state
// (shared_clone.h): it clones the init, and stays until the init is gone to close the spent
// seccomp listener. InitLender starts one ahead, at main(), so that it is warmed up by the
// time the init is due; SandboxInit::start (subproc.cc) starts one itself otherwise.

#include <linux/sched.h>
#include <sched.h>
#include <stddef.h>
#include <stdint.h>

#include "common/result.h"
#include "sandbox/contain.h"
#include "sandbox/shared_clone.h"

namespace akad::box {

// The shared init's stack, which the command also uses until its exec (command.cc): the
// deepest set-up path, the mount build, needs some tens of KiB; untouched pages cost nothing.
constexpr size_t kInitStackBytes = 1 << 20;

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
  LenderJob* job = nullptr;  // the lending thread's, published with `ready`
  bool moveInit = false;  // to `initCpus` at once (cpu.h)
  cpu_set_t initCpus{};
};

// The lending thread's body (a helper thread's entry point, `arg` an InitLaunch): it clones
// the init on the launch's stack, publishes the outcome in `ready`, and from then on touches
// nothing of the launch; it waits for the init's end and for its LenderJob, closes the
// listener it is handed, and ends.
void* lendToInit(void* arg);

// The lender started ahead: as soon as akabox knows it will start an init that shares its
// memory, beside the rest of its start-up, rather than when the init is due. Meanwhile it gets
// ready what the init would otherwise pay for after clone3: its malloc arena (a new thread's
// first malloc maps one: four system calls) with some pages of it touched, and the init's
// stack with its top pages in memory (docs/akabox-performance.md has the figures). One lender
// starts one init; without one (or once it is used, or while it still warms up)
// SandboxInit::start makes its thread itself. main() starts it first thing, so that it is
// ready by then, where that pays (initLenderPays()).
class InitLender {
 public:
  InitLender() = default;
  // An unused lender's thread is told to end.
  ~InitLender();
  InitLender(const InitLender&) = delete;
  InitLender& operator=(const InitLender&) = delete;

  Status start();
  // Started, unused, and warmed up: a lender still warming up is passed over rather than
  // waited for.
  bool available() const { return running_ && !used_ && __atomic_load_n(&warm_, __ATOMIC_ACQUIRE) != 0; }
  // Waits for the warm-up and takes the stack the thread made (invalid if its mmap failed).
  ChildStack takeStack();
  // Hands the thread the init to start; it touches nothing of this object afterwards.
  void launch(InitLaunch* l);

 private:
  static void* run(void* self);

  bool running_ = false;
  bool used_ = false;
  ChildStack stack_;  // made by the thread, published with `warm_`
  InitLaunch* launch_ = nullptr;  // written before `job_`
  alignas(4) int warm_ = 0;
  alignas(4) int job_ = 0;  // 1: launch, 2: end
};

// Whether main() starts an InitLender before parsing: the init will share akabox's memory
// (kCanShareMemory) and there are CPUs to spare (spinningPays()). On two CPUs the lender's start and warm-up took the CPU the init then
// needed, and were not done in time.
bool initLenderPays();

}  // namespace akad::box
