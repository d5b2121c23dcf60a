#include "sandbox/cpu.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>

namespace akad::box {

int usableCpus() {
  static const int n = [] {
    cpu_set_t cpus;
    return ::sched_getaffinity(0, sizeof(cpus), &cpus) == 0 ? CPU_COUNT(&cpus) : 1;
  }();
  return n;
}

bool spinningPays() {
  static const bool pays = [] {
    const char* force = std::getenv("AKABOX_SPIN");
    if (force && (std::strcmp(force, "0") == 0 || std::strcmp(force, "1") == 0)) return force[0] == '1';
    return usableCpus() >= 4;
  }();
  return pays;
}

Placement placeForSetup(cpu_set_t& initCpus) {
  struct Caller {
    int policy = -1;
    sched_param param{};
  };
  static const Caller caller = [] {
    Caller c;
    c.policy = ::sched_getscheduler(0);
    if (c.policy >= 0 && ::sched_getparam(0, &c.param) != 0) c.policy = -1;
    return c;
  }();
  Placement place;
  place.policy = caller.policy;
  place.param = caller.param;
  if (caller.policy >= 0) {
    sched_param batch{};
    place.restorePolicy = ::sched_setscheduler(0, SCHED_BATCH, &batch) == 0;
  }
  place.restoreCpus = cpusBesidesThisOne(place.cpus, initCpus);
  return place;
}

void restoreSchedulingPolicy(const Placement& p) {
  if (p.restorePolicy) (void)::sched_setscheduler(0, p.policy, &p.param);
}

bool pinToCurrentCpu(const Placement& p) {
  if (!p.restoreCpus) return false;
  bool pinned = false;
  cpu_set_t here;
  CPU_ZERO(&here);
  // Asked of the kernel: sched_getcpu() reads a thread's restartable-sequence area, which for
  // an init that shares akabox's memory is that of the thread it borrowed it from.
  unsigned current = 0;
  const int cpu = ::syscall(SYS_getcpu, &current, nullptr, nullptr) == 0 ? static_cast<int>(current) : -1;
  if (cpu >= 0 && cpu < CPU_SETSIZE) {
    CPU_SET(cpu, &here);
    pinned = ::sched_setaffinity(0, sizeof(here), &here) == 0;
  }
  if (!pinned) (void)::sched_setaffinity(0, sizeof(p.cpus), &p.cpus);
  return pinned;
}

}  // namespace akad::box
