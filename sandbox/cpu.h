#pragma once
// CPU placement, clock and busy-wait helpers for the spawn path (subproc.cc, "Placement";
// subproc.h's spinningPays()).

#include <sched.h>
#include <time.h>

namespace akad::box {

// Reads the calling thread's CPU set into `all` and the same set without the CPU it runs on
// into `others`. False (and nothing to move) when there is only one CPU, or either cannot be
// read.
inline bool cpusBesidesThisOne(cpu_set_t& all, cpu_set_t& others) {
  const int here = ::sched_getcpu();
  if (here < 0 || here >= CPU_SETSIZE || ::sched_getaffinity(0, sizeof(all), &all) != 0) return false;
  if (CPU_COUNT(&all) < 2 || !CPU_ISSET(here, &all)) return false;
  others = all;
  CPU_CLR(here, &others);
  return true;
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

}  // namespace akad::box
