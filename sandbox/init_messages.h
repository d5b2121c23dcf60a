#pragma once
// The messages between akabox and the sandbox's processes: the release that akabox sends the
// init over their channel (with descriptors attached), and the reports the init and the
// command send back on the report pipe.

#include <linux/filter.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "common/unique_fd.h"
#include "sandbox/ns_thread.h"

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
// namespace thread, ns_thread.h: its network namespace, and with nsTaskIpcUts its ipc and uts
// namespaces too); else the network namespace's file if hasNetns and the ipc and uts
// namespaces' files if hasIpcUts; then cgroupJoinCount cgroup `tasks` files. policyBytes
// bytes follow the struct: the seccomp filter the command installs
// (SeccompPolicy::serialize), or none.
// `drop` instead ends an attempt that akabox gave up before its release (a stale mount
// template, run.cc): the init exits at once, with nothing attached. An init that shares
// akabox's memory must end that way, not by SIGKILL: killed inside malloc, it would leave a
// lock of akabox's heap held for good, and akabox's next fork() (the template's build) would
// wait on it forever.
struct EntryMessage {
  uint8_t drop = 0;
  uint8_t hasMountNs = 0;
  uint8_t hasNsTask = 0;
  uint8_t nsTaskIpcUts = 0;
  uint8_t hasNetns = 0;
  uint8_t hasIpcUts = 0;  // the ipc and the uts namespace, in that order
  uint8_t cgroupJoinCount = 0;
  uint32_t policyBytes = 0;
};
// The namespace and cgroup `tasks` descriptors of a release, in the order above, counted
// into `m`: akabox's release to the init. With `ipcUts` false the ipc and uts namespaces stay
// out: the init made its own.
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

}  // namespace akad::box
