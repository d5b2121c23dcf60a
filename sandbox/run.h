#pragma once
// One akabox run from a validated spec to its result: policy, devices, cgroup, the supervised
// sandbox, accounting, clean-up. Everything it creates is gone when it returns.

#include "common/result.h"
#include "sandbox/accounting.h"
#include "sandbox/spec.h"

namespace akad::box {

SandboxResult runSandbox(const SandboxSpec& spec);

// Writes the result JSON to spec.resultPath / spec.resultFd, or the summary line to stderr.
Status deliverResult(const SandboxSpec& spec, const SandboxResult& result);

// `akabox cleanup`: kills and removes every cgroup left under `parent`.
Result<int> cleanupLeftovers(const std::string& parent, CgroupBackendChoice backend);

}  // namespace akad::box
