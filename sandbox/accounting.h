#pragma once
// The result of one run (isolate's meta file, as JSON): its fields are an interface,
// documented in docs/akabox.md; keep them stable.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace akad::box {

enum class SandboxStatus { Exited, Signaled, WallTimeout, CpuTimeout, Oom, OutputLimit, SetupFailed };
const char* statusName(SandboxStatus s);

struct SandboxResult {
  SandboxStatus status = SandboxStatus::SetupFailed;
  std::optional<int> exitCode;  // when the command exited
  std::optional<int> signal;    // when it was killed by a signal
  double wallS = 0, cpuS = 0, userS = 0, sysS = 0;
  uint64_t peakMemoryBytes = 0;
  bool oomKilled = false;
  std::optional<uint64_t> pidsPeak;
  uint64_t stdoutBytes = 0, stderrBytes = 0;
  bool truncated = false;
  std::vector<std::string> seccompViolations;
  bool seccompViolationsReported = false;
  std::string cgroupBackend;
  std::string message;
  int exitStatus = 125;  // akabox's own exit status for this result
};

nlohmann::json resultToJson(const SandboxResult& r);
// One line for humans on stderr when no result destination is given.
std::string resultSummary(const SandboxResult& r);
// A result for a failure before or during set-up.
SandboxResult setupFailure(const std::string& message, int exitStatus = 125);

}  // namespace akad::box
