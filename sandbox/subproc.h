#pragma once
// Starting and watching the sandbox: clone into new namespaces, the parent/child handshake
// (the init waits until akabox has put it in its cgroup), and the supervision loop that copies
// output, answers seccomp notifications, enforces the wall-clock, CPU-time and output limits
// and reaps the init.

#include <sys/resource.h>
#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

#include "common/result.h"
#include "sandbox/cgroup.h"
#include "sandbox/devices.h"
#include "sandbox/output.h"
#include "sandbox/seccomp.h"
#include "sandbox/spec.h"

namespace akad::box {

struct SpawnRequest {
  const SandboxSpec* spec = nullptr;
  SeccompPolicy* policy = nullptr;
  SandboxCgroup* cgroup = nullptr;
  OutputCapture* output = nullptr;
  uid_t outsideUid = 0;
  gid_t outsideGid = 0;
  std::vector<DevicePassthrough> devices;
  int stdinFd = -1;
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

// Runs the sandbox to its end. The error case is a failure of akabox's own side (clone, pipes,
// joining the cgroup); failures inside the sandbox come back in SandboxExit::setupError.
Result<SandboxExit> runSupervised(const SpawnRequest& req);

}  // namespace akad::box
