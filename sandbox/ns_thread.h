#pragma once
// akabox's namespace thread: it makes the sandbox's network namespace (--net none, lo brought
// up, net.h) and, where the init's set-up is the longer side, its ipc and uts namespaces; it
// holds them until the init has entered them, and its last job is to drop akabox's hold on the
// sandbox's mount namespace once the init is gone (supervise.cc).

#include <pthread.h>

#include "common/result.h"
#include "common/unique_fd.h"

namespace akad::box {

// The namespaces as handed over: a pidfd of the thread itself (`task`), which holds them for
// as long as it lives and which the init enters with one setns(). Where the kernel has no
// thread pidfds (before 6.9), the thread's files: the network namespace's and, when it made
// them (withIpcAndUts), the ipc and uts namespaces'.
struct SandboxNamespaces {
  UniqueFd task;
  UniqueFd net, ipc, uts;
};

// Creating a network namespace is the costliest single step of a spawn (every protocol
// registers its per-namespace state), so akabox starts it on a thread of its
// own before parsing where the command line allows (else as soon as the spec is parsed), on
// every host (on two CPUs too: started before parsing, it is done before the init's mount
// build, with which it used to take turns), and the rest of the set-up runs beside it: akabox's
// checks, clone3, the cgroup, the seccomp policy, and in the init the mount namespace. The
// thread unshares the namespaces for itself alone (namespaces are per thread), opens them
// and hands them over, then brings lo up: the init enters them with setns() on release while
// the thread is still at it, and only the command's execve waits for lo (akabox sends the go
// signal after loopbackUp()). The ipc namespace (its mqueue mount is most of its cost) and
// the uts namespace come along, made right after it, where the init's set-up is the longer
// side (a template to copy; on two CPUs its own mount build): it then only enters them. Where
// the mount thread builds the root (mnt_thread.h), the network namespace is the longer side and
// the init makes its own (withIpcAndUts).
//
// The thread does not open its namespaces' files (that would put four opens after the unshare,
// on the thread's side of the set-up): akabox takes a pidfd of the thread while it works, the init enters the
// thread's namespaces through it, and so the thread stays alive. It then has one more job,
// given with lastJob(): drop akabox's reference to the sandbox's mount namespace once the
// init is gone (supervise.cc says why that is a thread's work), and exit. Without a job it
// exits when the maker goes.
//
// The thread may still run when akabox calls clone3, which copies no other thread and runs
// none of glibc's fork handlers; so it calls no allocator and takes no lock a copy could
// inherit held: plain system calls, and its outcome as a step name and an errno.
class NamespaceThread {
 public:
  NamespaceThread() = default;
  ~NamespaceThread();
  NamespaceThread(const NamespaceThread&) = delete;
  NamespaceThread& operator=(const NamespaceThread&) = delete;

  // Starts the thread (with every signal blocked: signals are for akabox's main thread).
  Status start();
  // Whether the thread makes the ipc and uts namespaces too (after the network namespace),
  // decided once the spec is known: not when akabox's mount thread builds the root, for then
  // the init waits for the mount namespace anyway and makes its own in that time, and the
  // network namespace, the longest part of the set-up there, is ready sooner.
  // take() and finish() decide yes if nobody did.
  void withIpcAndUts(bool make);
  bool running() const { return running_; }
  // Waits for the namespaces and returns them, or what failed. With `spin`, it polls for up
  // to a millisecond before it sleeps (cpu.h's spinningPays()).
  Result<SandboxNamespaces> take(bool spin);
  // Waits for the thread to be done with lo; what failed there, if anything. Nothing to wait
  // for without the thread.
  Status loopbackUp(bool spin);

  // The thread's last job: once `done` (the init's pidfd) fires, close `ns` and `done`, then
  // exit. The thread owns both descriptors once this returns true; false (no thread, or its
  // job already given) leaves them to the caller.
  bool lastJob(int ns, int done);
  // No last job: the thread exits (also the destructor's work).
  void finish();

 private:
  static void* run(void* self);
  // Posts the thread's job (kDropJob or kNoJob, ns_thread.cc) and wakes it; then the thread is on
  // its own.
  void postJob(int job);
  // akabox's word `ipcUtsDecided_` tells the thread whether to make ipc and uts.
  // The thread is detached and reports through three words: `tid_` at its start, `opened_`
  // once its namespaces are made (or their making failed), `done_` once lo is up (or that
  // failed). With `done_` it also publishes `job_`, a word on its own stack that lives as long
  // as the thread: after `done_` the thread touches nothing of this object, which may go
  // before the thread has read its job.
  alignas(4) int tid_ = 0;
  alignas(4) int ipcUtsDecided_ = 0;  // `ipcUts_` written before
  bool ipcUts_ = true;
  alignas(4) int opened_ = 0;
  alignas(4) int done_ = 0;
  struct Job;
  Job* job_ = nullptr;
  bool jobPosted_ = false;
  bool running_ = false;
  int err_ = 0;
  const char* failedStep_ = nullptr;  // written before `opened_`
  int loErr_ = 0;
  const char* loFailedStep_ = nullptr;  // written before `done_`
};

}  // namespace akad::box
