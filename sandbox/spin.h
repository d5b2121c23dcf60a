#pragma once
// Clock and busy-wait helpers for the spawn path's short polls (subproc.h's spinningPays()).

#include <time.h>

namespace akad::box {

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
