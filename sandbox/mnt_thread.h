#pragma once
// Without a mount template, the sandbox's mount namespace is built on a thread of akabox's
// from the moment the spec is known: the thread unshares a mount namespace for itself alone
// (a thread with its own root and working directory, CLONE_FS), pivots into a fresh tmpfs
// root, binds and copies what the sandbox gets, detaches the host's tree and makes the root
// read-only: the whole of mnt.h's build but /proc, which must be mounted from inside the
// sandbox's pid namespace. akabox hands the namespace's file to the init, which enters it
// (setns, no copy: nothing else uses it) and mounts /proc.
//
// Built in the init, after clone3, the namespace was the longest part of the set-up
// (docs/akabox-performance.md has the figures). On the thread it starts
// before clone3, while akabox is still opening files and making the cgroup, on a CPU that is
// idle then; and /etc's files, half of the build, are copied on a second thread beside the
// pivot and the binds (etc_copy.h's EtcCopy).
//
// The namespace is handed over as soon as it can be entered (take()), before the end of the
// build: /etc's copies, the old root's detach (an expedited RCU grace period) and the root's
// read-only remount run beside the init's entry and the command's set-up, which is trusted
// code up to its execve. akabox sends the go signal that the execve waits for only after
// finish(), so the command never runs with the host's tree attached or the root writable.
//
// Only with CPUs to spare (cpu.h's spinningPays(): four or more). On two, the threads take
// turns with akabox and the init, and spawns were slower.
// And only where the init shares akabox's memory (shared_clone.h): the thread allocates and
// takes locks, and a copy of akabox made while it runs (a classic init) could inherit a lock
// held.

#include <vector>

#include "common/result.h"
#include "common/unique_fd.h"
#include "sandbox/devices.h"
#include "sandbox/spec.h"

namespace akad::box {

class MountNamespaceThread {
 public:
  MountNamespaceThread() = default;
  // Waits for the thread (it reads the spec and the devices).
  ~MountNamespaceThread();
  MountNamespaceThread(const MountNamespaceThread&) = delete;
  MountNamespaceThread& operator=(const MountNamespaceThread&) = delete;

  // Starts the build, off the caller's CPU. `spec` and `devices` must outlive this object.
  Status start(const SandboxSpec& spec, const std::vector<DevicePassthrough>& devices);
  bool running() const { return started_; }
  // Waits until the namespace can be entered and returns its file, or what failed. With
  // `spin`, it polls for up to a millisecond before it sleeps (cpu.h's spinningPays()).
  Result<UniqueFd> take(bool spin);
  // Waits for the end of the build (after take()): the sandbox's command may run only once
  // this has returned success.
  Status finish(bool spin);

 private:
  static void* run(void* self);

  const SandboxSpec* spec_ = nullptr;
  const std::vector<DevicePassthrough>* devices_ = nullptr;
  bool started_ = false;
  // The thread's words (futexes), in order: `unshared_` once its namespace exists (`tid_` and
  // `unshareFailed_` written before), `enterable_` once it can be entered (mnt.h's
  // MountBuild::enterable; set after `done_` by a build that fails first), `done_` once the
  // build is done (`built_` before); then it waits for `opened_`, akabox's word that it holds
  // the namespace's file (until then the thread's own hold keeps the namespace), and sets
  // `gone_`, after which it touches nothing of this object.
  int tid_ = 0;
  bool unshareFailed_ = false;
  // For tests only (AKABOX_TEST_SLOW_DETACH=1): the thread sleeps 100 ms once the namespace
  // is enterable, so that a command let run before finish() would see the host's tree.
  bool slowDetach_ = false;
  Status built_;
  alignas(4) int unshared_ = 0;
  alignas(4) int enterable_ = 0;
  alignas(4) int done_ = 0;
  alignas(4) int opened_ = 0;
  alignas(4) int gone_ = 0;
};

// Whether a spawn builds its mount namespace on the thread: no template, CPUs to spare, an init
// that shares akabox's memory, and nothing mounted on or under /proc (mnt.h).
bool mountNamespaceOnThread(const SandboxSpec& spec);

}  // namespace akad::box
