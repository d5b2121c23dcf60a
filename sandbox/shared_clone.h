#pragma once
// Processes that share akabox's memory: the sandbox's init, and the command until it execs.
//
// A process cloned the usual way gets a copy of akabox's page tables, and every page either
// side then writes is copied on its first write; pages of the executable it runs are faulted
// in again (the kernel copies no page-table entries of file mappings): on a VM with slow page
// faults that was the largest part of a spawn (docs/akabox-performance.md). With CLONE_VM the init runs in akabox's memory instead, on a
// stack of its own, and the command, cloned from the init with CLONE_VM | CLONE_VFORK, does
// the same until its execve gives it its own.
//
// glibc knows nothing of such a process: it finds the thread pointer of the thread that
// cloned it, and with it that thread's errno, malloc cache and arena. So the init is cloned
// by a thread of akabox that does nothing else while the init lives (init_lender.h): the init
// borrows that thread's thread-local state, and the command borrows it from the init while
// the init waits for the command's exec. glibc's own fork, vfork and thread functions are not
// called there; sched_getcpu() reads the lending thread's restartable-sequence area, so the
// CPU is asked of the kernel instead.
//
// x86_64 only (the entry needs a few instructions of assembly); elsewhere akabox clones the
// init as before.

#include <linux/sched.h>

#include <cerrno>
#include <cstddef>

namespace akad::box {

#if defined(__x86_64__)
inline constexpr bool kCanShareMemory = true;
#else
inline constexpr bool kCanShareMemory = false;
#endif

// clone3(args): in the child, fn(arg) runs on the stack that args names and its return value
// becomes the child's exit status. Returns the child's pid, or -errno (errno is not set: the
// caller's thread-local state may be lent out). Only where kCanShareMemory.
long cloneOnStack(clone_args& args, int (*fn)(void*), void* arg);

// A system call that leaves errno alone, for a thread whose thread-local state is lent out:
// the result, or -errno.
inline long rawSyscall(long nr, long a = 0, long b = 0, long c = 0, long d = 0, long e = 0) {
#if defined(__x86_64__)
  long ret;
  register long r10 asm("r10") = d;
  register long r8 asm("r8") = e;
  asm volatile("syscall" : "=a"(ret) : "a"(nr), "D"(a), "S"(b), "d"(c), "r"(r10), "r"(r8) : "rcx", "r11", "memory");
  return ret;
#else
  (void)nr, (void)a, (void)b, (void)c, (void)d, (void)e;
  return -ENOSYS;  // not used where kCanShareMemory is false
#endif
}

// A stack for such a child: `size` bytes above a guard page, not reserved in advance (pages
// come as they are touched). Unmapped when it goes, which must be after the child is gone.
class ChildStack {
 public:
  ChildStack() = default;
  explicit ChildStack(size_t size);
  ~ChildStack();
  ChildStack(ChildStack&& o) noexcept;
  ChildStack& operator=(ChildStack&& o) noexcept;
  bool valid() const { return base_ != nullptr; }
  void* bottom() const { return static_cast<char*>(base_) + kGuard; }  // lowest usable byte
  size_t size() const { return size_; }
  // Forgets the mapping without unmapping it: the process's exit takes it with the rest.
  void leave() {
    base_ = nullptr;
    size_ = 0;
  }
  static constexpr size_t kGuard = 4096;

 private:
  void* base_ = nullptr;
  size_t size_ = 0;
};

}  // namespace akad::box
