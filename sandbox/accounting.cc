#include "sandbox/accounting.h"

#include <cstdio>
#include <string>

namespace akad::box {

const char* statusName(SandboxStatus s) {
  switch (s) {
    case SandboxStatus::Exited: return "exited";
    case SandboxStatus::Signaled: return "signaled";
    case SandboxStatus::WallTimeout: return "wall-timeout";
    case SandboxStatus::CpuTimeout: return "cpu-timeout";
    case SandboxStatus::Oom: return "oom";
    case SandboxStatus::OutputLimit: return "output-limit";
    case SandboxStatus::SetupFailed: return "setup-failed";
  }
  return "setup-failed";
}

nlohmann::json resultToJson(const SandboxResult& r) {
  using nlohmann::json;
  auto round3 = [](double v) { return static_cast<double>(static_cast<long long>(v * 1000 + 0.5)) / 1000; };
  json j;
  j["status"] = statusName(r.status);
  j["exit_code"] = r.exitCode ? json(*r.exitCode) : json(nullptr);
  j["signal"] = r.signal ? json(*r.signal) : json(nullptr);
  j["wall_s"] = round3(r.wallS);
  j["cpu_s"] = round3(r.cpuS);
  j["user_s"] = round3(r.userS);
  j["sys_s"] = round3(r.sysS);
  j["peak_memory_bytes"] = r.peakMemoryBytes;
  j["oom_killed"] = r.oomKilled;
  j["pids_peak"] = r.pidsPeak ? json(*r.pidsPeak) : json(nullptr);
  j["stdout_bytes"] = r.stdoutBytes;
  j["stderr_bytes"] = r.stderrBytes;
  j["truncated"] = r.truncated;
  j["seccomp_violations"] = r.seccompViolations;
  j["seccomp_violations_reported"] = r.seccompViolationsReported;
  j["cgroup_backend"] = r.cgroupBackend;
  j["message"] = r.message;
  j["akabox_exit_status"] = r.exitStatus;
  return j;
}

// Formatted without a stream: this line ends every spawn that has no --result (text.h says
// why akabox has no streams).
std::string resultSummary(const SandboxResult& r) {
  std::string out = std::string("akabox: ") + statusName(r.status);
  if (r.exitCode) out += " exit_code=" + std::to_string(*r.exitCode);
  if (r.signal) out += " signal=" + std::to_string(*r.signal);
  char buf[128];
  std::snprintf(buf, sizeof(buf), " wall=%.3fs cpu=%.3fs mem=%lluK", r.wallS, r.cpuS,
                static_cast<unsigned long long>(r.peakMemoryBytes / 1024));
  out += buf;
  if (r.truncated) out += " truncated";
  if (!r.seccompViolations.empty()) {
    out += " seccomp_violations=";
    for (size_t i = 0; i < r.seccompViolations.size(); ++i) out += (i ? "," : "") + r.seccompViolations[i];
  }
  if (!r.message.empty()) out += " message=\"" + r.message + "\"";
  return out;
}

SandboxResult setupFailure(const std::string& message, int exitStatus) {
  SandboxResult r;
  r.status = SandboxStatus::SetupFailed;
  r.message = message;
  r.exitStatus = exitStatus;
  return r;
}

}  // namespace akad::box
