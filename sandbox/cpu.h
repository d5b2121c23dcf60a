#pragma once
// CPU placement of the spawn path: where akabox, its init and the command run while the
// sandbox is set up, and whether there are CPUs to spare for polling.
//
// A new task starts on its parent's CPU, and a scheduler that packs tasks onto few CPUs (as
// some VMs' do) leaves it there: the init's half of the set-up and akabox's would
// run one after the other while another CPU idles. So akabox supervises as SCHED_BATCH (the
// same share of CPU time, but a batch task never preempts on a wake-up), set before clone3 so
// that the new init does not push akabox off its CPU either; and right after clone3 akabox
// takes its own CPU out of the init's set, which moves the init if it was queued there. Where
// the scheduler spread them already, that is a mask update. akabox's wake-ups (the listener,
// the output pipes, the report, the init's exit) then do not cut into the init's and the
// command's work either. The init takes akabox's policy and CPU set back before it starts the
// command (contain.cc). Best effort: a call that fails changes nothing. akabox's helper
// threads start off its CPU for the same reason (helper_thread.h).

#include <sched.h>

namespace akad::box {

// akabox's scheduling policy and CPU set as they were before akabox changed them for the
// set-up, each only if it was read and changed.
struct Placement {
  bool restorePolicy = false;
  int policy = 0;
  sched_param param{};
  bool restoreCpus = false;
  cpu_set_t cpus{};
};

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

// The CPUs akabox may run on (its affinity mask), read once.
int usableCpus();

// Whether waiting for a hand-over (the init for akabox's messages, akabox for its helper
// threads) should poll for a moment before it sleeps: with four CPUs or more, a waiter's CPU
// is otherwise idle, and waking an idle virtual CPU costs tens of microseconds per hand-over;
// with two, polling would take the CPU the other side needs. AKABOX_SPIN=1 or 0 overrides the
// choice (the tests use it to run the polling paths on a two-CPU machine).
bool spinningPays();

// akabox's side, before clone3: SCHED_BATCH for akabox, and in `initCpus` its CPU set without
// the CPU it runs on (valid where the result's restoreCpus is set). The policy handed back is
// the caller's, read at akabox's first call: a second attempt (a stale mount template, run.cc)
// finds akabox in SCHED_BATCH already, and its command would get that.
Placement placeForSetup(cpu_set_t& initCpus);

// The init's side, before it starts the command: akabox's scheduling policy back.
void restoreSchedulingPolicy(const Placement& p);

// The init's side, right before it starts the command: it pins itself to the CPU it runs on,
// so that the command starts there (a new task otherwise goes to the idlest CPU, and waking an
// idle virtual CPU costs more than the init's short wait for the exec). True if pinned; if not,
// the init takes akabox's whole CPU set back. Only with p.restoreCpus.
bool pinToCurrentCpu(const Placement& p);

}  // namespace akad::box
