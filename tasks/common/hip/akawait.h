// akawait.h - how the hip harness's driver and worker wait on the channel's go/done words
// (akachannel.h's Header).
//
// A GPU call takes tens of microseconds, and waking a thread asleep on a futex costs about as
// much in a virtual machine (an interrupt through the hypervisor), with jitter on top. So both
// sides spin on the word while a group's calls run, give the core away between looks (yield)
// once a wait has lasted a while, and only nap on the futex after seconds without news (the
// driver generating a batch of large inputs, a kernel that hangs). Every millisecond or so the
// wait looks at the socket: a peer that has gone ends it.
#pragma once

#include "akachannel.h"

#include <chrono>
#include <sched.h>
#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace akawait {

inline void cpuRelax() {
#if defined(__x86_64__)
  _mm_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

constexpr int64_t kSpinNs = 2000000;         // pure spinning, then spinning with sched_yield
constexpr int64_t kNapAfterNs = 10000000000;  // then naps on the futex
constexpr int64_t kNapNs = 20000000;

// Waits while `word` holds `seen`; returns its new value, or false (in *gone) when the peer on
// `sock` hung up first.
inline uint32_t awaitChange(std::atomic<uint32_t>& word, uint32_t seen, int sock, bool* gone) {
  using Clock = std::chrono::steady_clock;
  *gone = false;
  uint32_t v = word.load(std::memory_order_acquire);
  if (v != seen) return v;
  const auto start = Clock::now();
  auto nextLook = start;
  for (uint64_t i = 0;; ++i) {
    v = word.load(std::memory_order_acquire);
    if (v != seen) return v;
    if (i % 64 != 0) {
      cpuRelax();
      continue;
    }
    const auto now = Clock::now();
    const int64_t waited = std::chrono::duration_cast<std::chrono::nanoseconds>(now - start).count();
    if (now >= nextLook) {
      nextLook = now + std::chrono::milliseconds(1);
      if (akachan::peerGone(sock)) {
        v = word.load(std::memory_order_acquire);
        if (v != seen) return v;
        *gone = true;
        return v;
      }
    }
    if (waited > kNapAfterNs) akachan::futexWait(word, seen, kNapNs);
    else if (waited > kSpinNs) sched_yield();
    else cpuRelax();
  }
}

}  // namespace akawait
