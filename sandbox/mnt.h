#pragma once
// The sandbox's mount namespace: a fresh tmpfs root holding read-only binds of the system
// directories (or of a prepared root), the workspace, a minimal /dev, a fresh /proc and
// private tmpfs mounts; then the host's tree is detached and the root made read-only.

#include <functional>
#include <string>
#include <vector>

#include "common/result.h"
#include "sandbox/devices.h"
#include "sandbox/spec.h"

namespace akad::box {

// Where a build runs, and so what it does: in the init (pid 1, real root) of fresh mount and
// pid namespaces, everything, in order; on akabox's mount thread (mnt_thread.h), in a mount
// namespace of the thread's own outside the sandbox's pid namespace, all but /proc's mount,
// which the init makes, and /etc's files are copied on a second thread beside the rest.
struct MountBuild {
  bool proc = true;
  bool etcBeside = false;  // on a thread of akabox's only: the init may not start threads
  // Runs once the namespace can be entered: its root is the new root, and the command's
  // working directory and /proc's mount point are there. With the working directory at the
  // root or the workspace, that is right after the pivot; the rest of the build (the system
  // directories, /dev, /tmp, the binds, /etc's copies, the host tree's detach, the read-only
  // root) then goes on beside what enters. Only trusted set-up may run in the namespace until
  // the build returns.
  std::function<void()> enterable;
};
// `rooted` runs once the process's root is the sandbox's new root (still empty).
Status buildMountNamespace(const SandboxSpec& spec, const std::vector<DevicePassthrough>& devices,
                           const std::function<void()>& rooted = {}, MountBuild how = {});
// In the init: enters a namespace that buildMountNamespace made without /proc, and mounts it.
Status enterBuiltMountNamespace(int nsFd);
// Whether the spec mounts anything on or under /proc, which only a build that mounts /proc
// before those mounts gets right.
bool mountsUnderProc(const SandboxSpec& spec);

// The pieces, shared with the kept templates (mnt_template.h).
//
// How a host path becomes a mount at `dst`: read-only unless rw, with `extra` MS_* flags.
using HostBinder = std::function<Status(const std::string& hostSrc, const std::string& dst, bool rw, unsigned long extra)>;
// In a fresh mount namespace: pivot into a new tmpfs root holding the system directories (or
// the prepared root) and /etc's essentials; the host's tree stays reachable until detachOldRoot.
// `rooted` runs right after the pivot, before anything is mounted in the new root; its failure
// ends the build. With `etcBeside`, /etc's files are copied on its threads, started right
// after `rooted` and complete once its finish() returns (etc_copy.h), which the caller must call
// before the root is made read-only.
class EtcCopy;
Status pivotToStaticRoot(const SandboxSpec& spec, const std::function<Status()>& rooted = {}, EtcCopy* etcBeside = nullptr);
Status detachOldRoot();
// /dev's tmpfs with the standard nodes (null, zero, full, random, urandom, tty), the
// symlinks (ptmx, fd, stdin, stdout, stderr), the pts and shm directories and a mount point
// for each passed-through device. A mount template holds it read-only, shared by its copies:
// it has nothing a sandbox writes to (/dev/shm and /dev/pts are mounted per sandbox).
Status makeStaticDev(const std::vector<DevicePassthrough>& devices);
// What every sandbox gets fresh, in this order: /dev (makeStaticDev, unless staticDevMade),
// its own devpts and /dev/shm, the devices, /proc (its directory only, without `proc`), /tmp,
// the spec's tmpfs mounts, the workspace (unless workspaceMade), the spec's binds.
struct PerSandboxMounts {
  bool staticDevMade = false;
  bool proc = true;
  bool workspaceMade = false;
};
Status mountPerSandbox(const SandboxSpec& spec, const std::vector<DevicePassthrough>& devices, const HostBinder& bind,
                       PerSandboxMounts how);
// The host paths pivotToStaticRoot copies or binds (or the prepared root itself).
std::vector<std::string> staticRootHostPaths(const SandboxSpec& spec);
// The host paths mountPerSandbox binds, in the order it binds them.
std::vector<std::string> perSandboxBindSources(const SandboxSpec& spec, const std::vector<DevicePassthrough>& devices);
// A directory (and its parents) or an empty file to mount on; an existing path is kept.
Status makeMountPoint(const std::string& dst, bool dir);

}  // namespace akad::box
