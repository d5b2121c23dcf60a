#pragma once
// The ordered containment steps, run in the sandbox's processes after clone: the init
// (pid 1 of the new pid namespace, still real root, builds the namespaces' contents) and the
// command (drops to the sandbox uid, sheds privileges, installs seccomp, execs).

#include <sched.h>
#include <sys/types.h>

#include <cstdint>
#include <vector>

#include "common/result.h"
#include "common/unique_fd.h"
#include "sandbox/devices.h"
#include "sandbox/net.h"
#include "sandbox/seccomp.h"
#include "sandbox/spec.h"

namespace akad::box {

// One record on the report pipe from the sandbox's init or command to akabox. Smaller than
// PIPE_BUF, so each write arrives whole.
struct ReportMessage {
  enum Kind : int32_t { SetupFailed = 1, ExecFailed = 2, CommandExited = 3, CommandSignaled = 4 };
  int32_t kind = 0;
  int32_t value = 0;  // exit code, signal number, or errno
  char text[480] = {};
};

// The message that releases the init (subproc.h's SandboxInit::release), sent over the
// channel with the descriptors attached in this order: a mount namespace if hasMountNs (a
// template's, or the one akabox's mount thread built); a pidfd of the task whose namespaces the init enters if hasNsTask (akabox's
// namespace thread, net.h: its network namespace, and with nsTaskIpcUts its ipc and uts
// namespaces too); else the network namespace's file if hasNetns and the ipc and uts
// namespaces' files if hasIpcUts; then cgroupJoinCount cgroup `tasks` files. policyBytes
// bytes follow the struct: the seccomp filter the command installs
// (SeccompPolicy::serialize), or none.
struct EntryMessage {
  uint8_t hasMountNs = 0;
  uint8_t hasNsTask = 0;
  uint8_t nsTaskIpcUts = 0;
  uint8_t hasNetns = 0;
  uint8_t hasIpcUts = 0;  // the ipc and the uts namespace, in that order
  uint8_t cgroupJoinCount = 0;
  uint32_t policyBytes = 0;
};
// The namespace and cgroup `tasks` descriptors of a release, in the order above, counted
// into `m`: akabox's release to the init, and the early command's copy of it to the init
// (contain.cc), which passes no ipc and uts namespaces (`ipcUts` false: the init made its own).
inline std::vector<int> releaseDescriptors(EntryMessage& m, const SandboxNamespaces& ns, bool ipcUts,
                                           const std::vector<UniqueFd>& cgroupJoin) {
  std::vector<int> fds;
  if (ns.task.valid()) {
    m.hasNsTask = 1;
    m.nsTaskIpcUts = ipcUts ? 1 : 0;
    fds.push_back(ns.task.get());
  } else {
    if (ns.net.valid()) {
      m.hasNetns = 1;
      fds.push_back(ns.net.get());
    }
    if (ipcUts && ns.ipc.valid() && ns.uts.valid()) {
      m.hasIpcUts = 1;
      fds.push_back(ns.ipc.get());
      fds.push_back(ns.uts.get());
    }
  }
  for (const auto& fd : cgroupJoin) fds.push_back(fd.get());
  m.cgroupJoinCount = static_cast<uint8_t>(cgroupJoin.size());
  return fds;
}
// A serialized filter: a header line and at most BPF_MAXINSNS instructions.
constexpr size_t kMaxFilterBytes = 128 + BPF_MAXINSNS * sizeof(sock_filter);

// akabox's scheduling policy and CPU set as they were before akabox changed them for the
// set-up (subproc.cc), each only if it was read and changed.
struct Placement {
  bool restorePolicy = false;
  int policy = 0;
  sched_param param{};
  bool restoreCpus = false;
  cpu_set_t cpus{};
};

// What the cloned init needs; every fd here is inherited from akabox and close-on-exec.
struct ContainContext {
  const SandboxSpec* spec = nullptr;
  uid_t outsideUid = 0;
  gid_t outsideGid = 0;
  std::vector<DevicePassthrough> devices;
  int lifelineFd = -1;  // read end of a pipe akabox never writes: EOF means akabox is gone
  int reportFd = -1;    // write end of the report pipe (subproc.h's ReportMessage)
  // Unix socket to akabox: the init receives its EntryMessage on it (the command does when it
  // starts early, contain.cc), and the command sends the seccomp listener fd back.
  int channelFd = -1;
  // Read end of a pipe on which akabox writes one byte once the cgroup's limits are in
  // place; the command reads it just before it execs.
  int goFd = -1;
  int stdinFd = -1;     // host file for stdin (--stdin, else the host's /dev/null)
  int stdoutFd = -1;    // write ends of the capture pipes
  int stderrFd = -1;
  // The init is born with akabox's SCHED_BATCH and off akabox's CPU (subproc.cc says why);
  // before it starts the command it takes back akabox's scheduling policy and CPU set.
  Placement placement;
  // Spare CPUs (spinningPays() in subproc.h): the init polls for akabox's hand-overs for a
  // moment before it sleeps.
  bool spin = false;
  // The command starts at once, beside the init's mount build: asked for, no template, not
  // pid 1, CPUs to spare (subproc.h's earlyCommandAsked; decided in SandboxInit::start).
  bool earlyCommand = false;
  // The ipc and uts namespaces come with the release (made by akabox's namespace thread,
  // net.h); otherwise the init unshares them itself at its start.
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
