#pragma once
// akabox's helper threads (the namespace thread, the init's lender, the mount thread and its
// /etc copiers, the one that drops the mount namespace): how one is started, and the futex
// words they hand their outcome over with.

#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stddef.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "sandbox/cpu.h"

namespace akad::box {

// Starts a helper thread, detached, with a 64 KiB stack unless told otherwise (most of their
// work is a few system calls deep) and every signal blocked (signals are for akabox's main
// thread). With `offThisCpu`, on the caller's CPUs but the one it runs on (cpu.h). 0, or the
// error number.
inline int startHelperThread(void* (*fn)(void*), void* arg, bool offThisCpu, size_t stackBytes = 64 * 1024) {
  pthread_attr_t attr;
  if (int rc = ::pthread_attr_init(&attr); rc != 0) return rc;
  (void)::pthread_attr_setstacksize(&attr, stackBytes);
  (void)::pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  cpu_set_t all, others;
  if (offThisCpu && cpusBesidesThisOne(all, others)) (void)::pthread_attr_setaffinity_np(&attr, sizeof(others), &others);
  sigset_t every, old;
  sigfillset(&every);
  ::pthread_sigmask(SIG_SETMASK, &every, &old);
  pthread_t thread;
  const int rc = ::pthread_create(&thread, &attr, fn, arg);
  ::pthread_sigmask(SIG_SETMASK, &old, nullptr);
  ::pthread_attr_destroy(&attr);
  return rc;
}

// CLOCK_MONOTONIC in seconds.
inline double monotonicS() {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

// Tells the CPU that this is a spin loop (frees the sibling hyper-thread, saves power).
inline void cpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

// A helper thread's word to akabox (a futex, 0 until set): set once, waking the waiter.
inline void setWordAndWake(int& word) {
  __atomic_store_n(&word, 1, __ATOMIC_RELEASE);
  ::syscall(SYS_futex, &word, FUTEX_WAKE_PRIVATE, 1, nullptr, nullptr, 0);
}

// Waits until `word` is set. With `spin`, it polls for up to a millisecond first (cpu.h's
// spinningPays()).
inline void waitForWord(int& word, bool spin) {
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

}  // namespace akad::box
