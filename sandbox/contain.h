#pragma once
// The ordered containment steps, run in the sandbox's processes after clone: the init
// (pid 1 of the new pid namespace, still real root, builds the namespaces' contents;
// runSandboxInit in contain.cc lists its steps) and the command (drops to the sandbox uid,
// sheds privileges, installs seccomp, execs; runCommand in command.cc). The steps themselves
// are in contain_steps.h's files, one mechanism each in user.cc, mnt.cc, caps.cc, rlimits.cc.

#include <sched.h>
#include <sys/types.h>

#include <vector>

#include "common/result.h"
#include "sandbox/cpu.h"
#include "sandbox/devices.h"
#include "sandbox/spec.h"

namespace akad::box {

// What the cloned init needs; every fd here is inherited from akabox and close-on-exec.
struct ContainContext {
  const SandboxSpec* spec = nullptr;
  uid_t outsideUid = 0;
  gid_t outsideGid = 0;
  std::vector<DevicePassthrough> devices;
  int lifelineFd = -1;  // read end of a pipe akabox never writes: EOF means akabox is gone
  int reportFd = -1;    // write end of the report pipe (init_messages.h's ReportMessage)
  // Unix socket to akabox: the init receives its EntryMessage on it, and the command sends
  // the seccomp listener fd back.
  int channelFd = -1;
  // Read end of a pipe on which akabox writes one byte once the cgroup's limits are in
  // place; the command reads it just before it execs.
  int goFd = -1;
  int stdinFd = -1;     // host file for stdin (--stdin, else the host's /dev/null)
  int stdoutFd = -1;    // write ends of the capture pipes
  int stderrFd = -1;
  // The init is born with akabox's SCHED_BATCH and off akabox's CPU (cpu.h says why);
  // before it starts the command it takes back akabox's scheduling policy and CPU set.
  Placement placement;
  // Spare CPUs (cpu.h's spinningPays()): the init polls for akabox's hand-overs for a
  // moment before it sleeps.
  bool spin = false;
  // The ipc and uts namespaces come with the release (made by akabox's namespace thread,
  // ns_thread.h); otherwise the init unshares them itself at its start.
  bool ipcUtsHanded = false;
  // Set when the init shares akabox's memory (shared_clone.h): the lowest byte of its stack.
  // It then starts the command sharing that memory too, on the part of this stack below its
  // own frames, and stays out of the sandbox's cgroup unless it is the command itself: the
  // command joins, born into it on cgroup v2 (commandCgroupFd, the cgroup's directory) or
  // writing itself into the `tasks` files on v1.
  void* sharedStackBottom = nullptr;
  int commandCgroupFd = -1;
  // The mount namespace comes from akabox before the release (SandboxInit::handMountNamespace):
  // the template's, which the init copies, or, without a template, the one akabox's mount
  // thread built, which it enters and where it mounts /proc (mnt_thread.h). The init is born
  // without a mount namespace of its own then.
  bool mountNsHanded = false;
  // For tests only (AKABOX_TEST_HEAP_CHURN=1): before it takes the mount namespace akabox
  // hands it, the init allocates and frees heap blocks for 300 ms, so that an attempt dropped
  // meanwhile finds it inside malloc (init_messages.h's `drop`).
  bool testHeapChurn = false;
};

// Whether the init itself joins the sandbox's cgroup (and roots the cgroup namespace there):
// when it has memory of its own, or when it is the command (contain.h's ContainContext).
inline bool initJoinsCgroup(const ContainContext& c) { return !c.sharedStackBottom || c.spec->commandIsPid1; }

// pid 1 of the sandbox: sets up, forks the command, reaps, reports the command's status.
[[noreturn]] void runSandboxInit(const ContainContext& c);

// Steps, one file each.
Status dropCapabilities();                       // caps.cc (also no_new_privs)
Status applyRlimits(const SandboxSpec& spec);    // rlimits.cc

}  // namespace akad::box
