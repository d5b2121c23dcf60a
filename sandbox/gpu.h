#pragma once
// GPU passthrough: `--gpu ID` becomes that GPU's device nodes (bound into /dev and allowed in
// the device cgroup, nothing else of any other GPU) plus the *_VISIBLE_DEVICES variables, which
// are a convenience only: isolation comes from the device cgroup.

#include "common/result.h"
#include "sandbox/gpu_discovery.h"
#include "sandbox/spec.h"

namespace akad::box {

Status applyGpuPassthrough(SandboxSpec& spec, const gpu::DiscoveryRoots& roots = {});

}  // namespace akad::box
