#pragma once
// One akabox run from a validated spec to its result: policy, devices, cgroup, the supervised
// sandbox, accounting, clean-up. Everything it creates is gone when it returns.

#include "common/result.h"
#include "sandbox/accounting.h"
#include "sandbox/spec.h"

namespace akad::box {

class NetworkNamespaceMaker;

// `netns`: the network namespace thread's maker (net.h), main()'s, which outlives the
// result's delivery (a thread that makes a spare is joined after it); started already if
// main() could tell from the command line, and stopped if the spec has another network.
SandboxResult runSandbox(const SandboxSpec& spec, NetworkNamespaceMaker* netns = nullptr);

// Starts the network namespace thread before parsing if the flags alone say that runSandbox
// would: `akabox run` with --net none (no --net, no --spec) where runSandbox makes it on a
// thread.
void startNetworkNamespaceEarly(int argc, char** argv, NetworkNamespaceMaker& netns);

// Writes the result JSON to spec.resultPath / spec.resultFd, or the summary line to stderr.
Status deliverResult(const SandboxSpec& spec, const SandboxResult& result);

// `akabox cleanup`: kills and removes every cgroup left under `parent`.
Result<int> cleanupLeftovers(const std::string& parent, CgroupBackendChoice backend);

}  // namespace akad::box
