#pragma once
// One akabox run from a validated spec to its result: policy, devices, cgroup, the supervised
// sandbox, accounting, clean-up. Everything it creates is gone when it returns.

#include "common/result.h"
#include "sandbox/accounting.h"
#include "sandbox/spec.h"

namespace akad::box {

class NamespaceThread;
class InitLender;

// Threads main() started before parsing: the namespace thread (ns_thread.h), used if the spec
// wants one and dropped otherwise, and the init's lender (init_lender.h), used if ready.
struct EarlyThreads {
  NamespaceThread* netns = nullptr;
  InitLender* lender = nullptr;
};
SandboxResult runSandbox(const SandboxSpec& spec, EarlyThreads early = {});

// Whether main() may start the network namespace before parsing: `akabox run` whose flags
// alone say --net none (no --net, no --spec).
bool networkNamespaceEarly(int argc, char** argv);

// Writes the result JSON to spec.resultPath / spec.resultFd, or the summary line to stderr.
Status deliverResult(const SandboxSpec& spec, const SandboxResult& result);

// `akabox cleanup`: kills and removes every cgroup left under `parent`.
Result<int> cleanupLeftovers(const std::string& parent, CgroupBackendChoice backend);

}  // namespace akad::box
