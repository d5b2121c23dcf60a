#pragma once
// The device cgroup: which device nodes the sandbox may open or create. cgroup v1 takes rules
// in devices.deny/devices.allow; cgroup v2 has no controller for it, only a
// BPF_PROG_TYPE_CGROUP_DEVICE program attached to the cgroup.

#include <sys/types.h>

#include <string>
#include <vector>

#include "common/result.h"
#include "common/unique_fd.h"

namespace akad::box {

struct DeviceRule {
  char type = 'c';     // 'c' character, 'b' block
  int64_t major = -1;  // -1: any
  int64_t minor = -1;  // -1: any

  // v1 rule text, e.g. "c 1:3 rwm".
  std::string v1Text() const;
};

// A device node the spec passes through: its host path, where it appears inside, its rule.
struct DevicePassthrough {
  std::string hostPath;
  std::string sandboxPath;  // same path when under /dev, else /dev/<basename>
  DeviceRule rule;
};

// null, zero, full, random, urandom, tty, ptmx and the devpts ptys: what every sandbox gets.
std::vector<DeviceRule> standardDeviceRules();

// stat()s the node and returns its passthrough; errors if it is missing or not a device.
Result<DevicePassthrough> resolveDevice(const std::string& path);

// Builds the allow-list program (raw BPF instructions) and loads it with bpf(2). The error
// says when the kernel lacks cgroup BPF, so set-up fails instead of running unprotected.
Result<UniqueFd> loadDeviceProgram(const std::vector<DeviceRule>& allowed);

// Attaches a loaded program to a cgroup v2 directory with BPF_F_ALLOW_MULTI, so programs of
// ancestor cgroups (the daemon's, systemd's) still apply too.
Status attachDeviceProgram(int cgroupDirFd, int progFd, const std::string& cgroupPath);

}  // namespace akad::box
