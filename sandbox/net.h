#pragma once
// The sandbox's network namespace (--net none): only a loopback interface, up; and, made by
// the same thread, its ipc and uts namespaces.

#include <pthread.h>

#include "common/result.h"
#include "common/unique_fd.h"

namespace akad::box {

// The namespaces the thread hands over. ipc and uts only from the thread (makeHere() makes
// the network namespace alone; the init then unshares those two itself).
struct SandboxNamespaces {
  UniqueFd net, ipc, uts;
};

// Creating a network namespace is the costliest single step of a spawn (every protocol
// registers its per-namespace state: 0.55-0.75 ms), so akabox starts it on a thread of its
// own as soon as the spec is parsed, and the rest of the set-up runs beside it: akabox's
// checks, clone3, the cgroup, the seccomp policy, and in the init the mount namespace. The
// thread unshares the namespaces for itself alone (namespaces are per thread), opens them
// and hands them over, then brings lo up: the init enters them with setns() on release while
// the thread is still at it, and only the command's execve waits for lo (akabox sends the go
// signal after loopbackUp()). The ipc namespace (its mqueue mount is most of its cost) and
// the uts namespace come along in the same unshare: the init, whose set-up is the longer
// side, then only enters them (GPU machine: the thread had a tenth of a millisecond to spare).
//
// The thread may still run when akabox calls clone3, which copies no other thread and runs
// none of glibc's fork handlers; so it calls no allocator and takes no lock a copy could
// inherit held: plain system calls, and its outcome as a step name and an errno.
class NetworkNamespaceMaker {
 public:
  NetworkNamespaceMaker() = default;
  ~NetworkNamespaceMaker();
  NetworkNamespaceMaker(const NetworkNamespaceMaker&) = delete;
  NetworkNamespaceMaker& operator=(const NetworkNamespaceMaker&) = delete;

  // Starts the thread (with every signal blocked: signals are for akabox's main thread).
  Status start();
  bool running() const { return running_; }
  // Waits for the namespaces and returns them, or what failed. With `spin`, it polls for up
  // to a millisecond before it sleeps (subproc.h's spinningPays()).
  Result<SandboxNamespaces> take(bool spin);
  // Waits for the thread to be done with lo; what failed there, if anything. Nothing to wait
  // for without the thread.
  Status loopbackUp(bool spin);

  // Without the thread: makes the namespace from the calling thread, which steps into it and
  // straight back into its own. For two CPUs without a mount template, where the thread would
  // take turns with the init's mount build (the longest part), while akabox's own share of
  // the set-up leaves room for it.
  static Result<SandboxNamespaces> makeHere();

 private:
  static void* run(void* self);
  // Waits until `word` (a futex) is set.
  static void waitFor(int& word, bool spin);
  // The thread is detached and reports through two words: `opened_` once the namespaces are
  // open (or their making failed), `done_` once lo is up (or that failed). Its own exit takes a
  // tenth of a millisecond more, which nobody needs to wait for. After setting `done_`, the
  // thread touches nothing of this object.
  alignas(4) int opened_ = 0;
  alignas(4) int done_ = 0;
  bool running_ = false;
  int fd_ = -1, ipcFd_ = -1, utsFd_ = -1;
  int err_ = 0;
  const char* failedStep_ = nullptr;  // written before `opened_`
  int loErr_ = 0;
  const char* loFailedStep_ = nullptr;  // written before `done_`
};

}  // namespace akad::box
