#pragma once
// Starting and watching the sandbox: clone into new namespaces and the parent/child handshake
// (the init builds its mount namespace while akabox prepares the cgroup and the network
// namespace, then waits until akabox releases it into them; subproc.cc), and the supervision
// loop that copies output, answers seccomp notifications, enforces the wall-clock, CPU-time
// and output limits and reaps the init (supervise.cc). The thread that clones an init sharing
// akabox's memory is init_lender.h's; where akabox and the init run, cpu.h.

#include <sched.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/types.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/result.h"
#include "common/unique_fd.h"
#include "sandbox/cgroup.h"
#include "sandbox/devices.h"
#include "sandbox/ns_thread.h"
#include "sandbox/output.h"
#include "sandbox/seccomp.h"
#include "sandbox/shared_clone.h"
#include "sandbox/spec.h"

namespace akad::box {

struct EntryMessage;  // init_messages.h
struct InitLaunch;    // init_lender.h
struct LenderJob;     // init_lender.h
class InitLender;     // init_lender.h

struct SpawnRequest {
  const SandboxSpec* spec = nullptr;
  OutputCapture* output = nullptr;
  uid_t outsideUid = 0;
  gid_t outsideGid = 0;
  std::vector<DevicePassthrough> devices;
  int stdinFd = -1;
  int cloneIntoCgroupFd = -1;  // v2: the init is born in this cgroup (CLONE_INTO_CGROUP)
  // akabox's namespace thread makes the ipc and uts namespaces too (ns_thread.h): the init can take
  // them with the release instead of making its own.
  bool ipcUtsFromThread = false;
  // That thread, if it runs: its last job is to drop akabox's hold on the sandbox's mount
  // namespace once the init is gone (supervise.cc); without it, a thread is started for that.
  NamespaceThread* namespaceThread = nullptr;
  // A lending thread started ahead, if there is one available (InitLender).
  InitLender* lender = nullptr;
  // akabox's mount thread builds the sandbox's mount namespace (mnt_thread.h): the init is
  // born without one of its own and enters that one when handed it (handMountNamespace()).
  bool mountNsFromThread = false;
};

// What the init enters when akabox releases it, before it starts the command.
struct SandboxEntry {
  const SeccompPolicy* policy = nullptr;  // the command's filter (sent as bytes), or none
  SandboxNamespaces ns;                   // the sandbox's network namespace (--net none), and
                                          // its ipc and uts namespaces if made with it (ns_thread.h)
  std::vector<UniqueFd> cgroupJoin;   // v1: the cgroup's `tasks` files, opened for writing
};

enum class KillReason { None, WallTime, CpuTime, OutputLimit, Cancelled };

struct SandboxExit {
  std::optional<std::string> setupError;  // a step in the sandbox failed (message says which)
  int setupExitCode = 125;                // 125, or 126/127 when the command cannot be executed
  bool commandExited = false;
  bool commandSignaled = false;
  int exitCode = 0;
  int signal = 0;
  KillReason killedFor = KillReason::None;
  int cancelSignal = 0;
  double wallS = 0;
  rusage usage{};  // of the init and every process it reaped
  SeccompViolations violations;
};

// The sandbox's init from clone3 to its reaping. Until it is reaped, destroying this kills it
// (SIGKILL through its pidfd; the kernel then kills its whole pid namespace) and reaps it, so
// a failure between start and supervise leaves no process behind.
class SandboxInit {
 public:
  ~SandboxInit();
  SandboxInit(const SandboxInit&) = delete;
  SandboxInit& operator=(const SandboxInit&) = delete;

  // clone3 into a new pid namespace, and a new mount namespace unless the spec copies a mount
  // template or akabox's mount thread builds it. The init makes its ipc and uts namespaces
  // unless the release brings them (SpawnRequest::ipcUtsFromThread), starts building its
  // mount namespace (or waits for the template or the thread's namespace,
  // handMountNamespace()) at once and then waits for release().
  static Result<std::unique_ptr<SandboxInit>> start(const SpawnRequest& req);

  // Hands the init its mount namespace before the release: a template, which it copies while
  // akabox prepares the rest, or the namespace akabox's mount thread built, which it enters.
  Status handMountNamespace(UniqueFd ns);

  // Hands the init its network namespace (with its ipc and uts namespaces when it expects
  // them), its cgroup and the command's seccomp filter; from here on it finishes its set-up
  // and starts the command. The policy must outlive
  // supervise().
  // An init that failed meanwhile is not an error here: supervise() reports its message.
  Status release(SandboxEntry entry);

  // The cgroup's limits are in place: the command may exec (it waits for this, contain.h).
  Status go();

  // Ends an attempt given up before its release: tells the init to exit (init_messages.h's
  // `drop`) and reaps it. False if it did not end within `timeoutS`; it is killed then, and
  // where it shared akabox's memory, akabox must not start another (its heap may be locked).
  bool drop(double timeoutS);

  // Runs the sandbox to its end. The error case is a failure of akabox's own side (poll,
  // wait4); failures inside the sandbox come back in SandboxExit::setupError.
  Result<SandboxExit> supervise(SandboxCgroup& cgroup);

 private:
  friend class Supervisor;  // supervise.cc
  SandboxInit() = default;
  // SIGTERM, SIGINT and SIGHUP to akabox come on cancelSignals_ from here on.
  Status catchCancelSignals();
  void killAndReap();
  // Waits for the init's end (it is ending or has ended); its wait status.
  int reap();
  // Once the init is reaped: the lending thread closes the listener (or just goes on, given
  // none); without a lending thread, the listener closes here.
  void handListenerToLender(UniqueFd listener);
  Status sendEntry(const EntryMessage& m, const std::vector<int>& fds, const std::string& filter);
  SpawnRequest req_;
  std::unique_ptr<InitLaunch> launch_;  // what the init runs from, while it runs
  LenderJob* lenderJob_ = nullptr;  // the lending thread's, until handed a job
  const SeccompPolicy* policy_ = nullptr;  // from release(): answers the filter's notifications
  pid_t pid_ = -1;
  bool reaped_ = false;
  bool ipcUtsHanded_ = false;  // the init takes its ipc and uts namespaces from release()
  double t0_ = 0;
  UniqueFd pidFd_;
  UniqueFd go_;            // write end of the go signal
  UniqueFd lifeline_;      // write end, never written: EOF tells the init akabox is gone
  UniqueFd report_;        // read end of the init's and the command's ReportMessages
  UniqueFd stdout_, stderr_;
  UniqueFd channel_;       // unix socket: entry fds to the init, the seccomp listener back
  UniqueFd cancelSignals_; // signalfd for SIGTERM, SIGINT, SIGHUP
  sigset_t oldMask_{};
};

}  // namespace akad::box
