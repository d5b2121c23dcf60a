#pragma once
// The sandbox's mount namespace: a fresh tmpfs root holding read-only binds of the system
// directories (or of a prepared root), the workspace, a minimal /dev, a fresh /proc and
// private tmpfs mounts; then the host's tree is detached and the root made read-only.

#include <vector>

#include "common/result.h"
#include "sandbox/devices.h"
#include "sandbox/spec.h"

namespace akad::box {

// Runs in the init (pid 1, real root) of fresh mount and pid namespaces.
Status buildMountNamespace(const SandboxSpec& spec, const std::vector<DevicePassthrough>& devices);

}  // namespace akad::box
