#pragma once
// One akabox run from a validated spec to its result: policy, devices, cgroup, the supervised
// sandbox, accounting, clean-up. Everything it creates is gone when it returns.

#include "common/result.h"
#include "sandbox/accounting.h"
#include "sandbox/spec.h"

namespace akad::box {

class NetworkNamespaceMaker;

// `early`: a network namespace thread main() already started before parsing (net.h), used if
// the spec wants one and dropped otherwise.
SandboxResult runSandbox(const SandboxSpec& spec, NetworkNamespaceMaker* early = nullptr);

// Whether main() may start the network namespace before parsing: `akabox run` whose flags
// alone say --net none (no --net, no --spec) and that runSandbox would make it on a thread.
bool networkNamespaceEarly(int argc, char** argv);

// Writes the result JSON to spec.resultPath / spec.resultFd, or the summary line to stderr.
Status deliverResult(const SandboxSpec& spec, const SandboxResult& result);

// `akabox cleanup`: kills and removes every cgroup left under `parent`.
Result<int> cleanupLeftovers(const std::string& parent, CgroupBackendChoice backend);

}  // namespace akad::box
