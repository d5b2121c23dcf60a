// Per-process limits. Memory is limited by the cgroup only: RLIMIT_AS would break CUDA,
// which reserves tens of GiB of address space at cuInit.

#include <sys/resource.h>

#include <cmath>

#include "sandbox/contain.h"

namespace akad::box {
namespace {
Status setLimit(int resource, const char* name, rlim_t soft, rlim_t hard) {
  rlimit r{soft, hard};
  if (::setrlimit(resource, &r) != 0) return errnoError(std::string("setrlimit(") + name + ")");
  return {};
}
}  // namespace

Status applyRlimits(const SandboxSpec& spec) {
  if (auto st = setLimit(RLIMIT_CORE, "RLIMIT_CORE", 0, 0); !st) return st;
  if (spec.outputLimitBytes)
    if (auto st = setLimit(RLIMIT_FSIZE, "RLIMIT_FSIZE", spec.outputLimitBytes, spec.outputLimitBytes); !st) return st;
  if (spec.cpuTimeS > 0) {
    // Per process only; the whole sandbox is watched through the cgroup. This is the
    // backstop for a single process if akabox's watch were late.
    auto secs = static_cast<rlim_t>(std::ceil(spec.cpuTimeS)) + 1;
    if (auto st = setLimit(RLIMIT_CPU, "RLIMIT_CPU", secs, secs + 1); !st) return st;
  }
  return {};
}

}  // namespace akad::box
