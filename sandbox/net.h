#pragma once
// The sandbox's network namespace (--net none): only a loopback interface, up.

#include <pthread.h>

#include "common/result.h"
#include "common/unique_fd.h"

namespace akad::box {

// Creating a network namespace is the costliest single step of a spawn (every protocol
// registers its per-namespace state: 0.55-0.75 ms), so akabox starts it on a thread of its
// own as soon as the spec is parsed, and the rest of the set-up runs beside it: akabox's
// checks, clone3, the cgroup, the seccomp policy, and in the init the mount namespace. The
// thread unshares a network namespace for itself alone (namespaces are per thread), brings
// lo up and opens the namespace; the init enters it with setns() on release.
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
  // Waits for the thread's outcome and returns the namespace, or what failed. With `spin`,
  // it polls for up to a millisecond before it sleeps (subproc.h's spinningPays()).
  Result<UniqueFd> take(bool spin);

  // Without the thread: makes the namespace from the calling thread, which steps into it and
  // straight back into its own. For two CPUs without a mount template, where the thread would
  // take turns with the init's mount build (the longest part), while akabox's own share of
  // the set-up leaves room for it.
  static Result<UniqueFd> makeHere();

 private:
  static void* run(void* self);
  void waitDone(bool spin);
  // The thread is detached and says it is done through this word (a futex): its own exit
  // takes a tenth of a millisecond more, which nobody needs to wait for. After setting it,
  // the thread touches nothing of this object.
  alignas(4) int done_ = 0;
  bool running_ = false;
  int fd_ = -1;
  int err_ = 0;
  const char* failedStep_ = nullptr;
};

}  // namespace akad::box
