#pragma once
// Runs one command in an `akabox` sandbox: the daemon never sets up a sandbox itself, it execs
// akabox (a process of its own, so that no sandbox set-up happens in the multi-threaded
// daemon) with flags and reads the result JSON from a pipe.

#include <sys/types.h>

#include <atomic>
#include <mutex>
#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/result.h"

namespace akad {

struct SandboxBind {
  std::filesystem::path source;
  std::string target;
  bool writable = false;
};

// A private tmpfs (akabox --tmpfs); its pages count against the sandbox's memory.
struct SandboxTmpfs {
  std::string target;
  uint64_t size_bytes = 0;  // 0: the kernel's default
  bool huge_pages = false;
};

struct SandboxRequest {
  std::vector<std::string> command;
  std::filesystem::path workspace;  // bound read-write at /workspace, the working directory
  std::vector<SandboxBind> binds;
  std::vector<SandboxTmpfs> tmpfs;
  std::map<std::string, std::string> env;
  uint64_t memory_bytes = 2ull << 30;
  int pids = 256;
  double wall_s = 60;
  double cpu_s = 0;  // 0: no CPU-time limit
  uint64_t output_limit = 64ull << 20;
  bool network_host = false;
  std::string seccomp = "default";
  std::vector<std::string> gpus;  // GPU ids from discovery (akabox --gpu)
  std::filesystem::path stdout_file;
  std::filesystem::path stderr_file;
  std::string cgroup_parent;  // empty: defaultCgroupParent()
  // The host uid/gid the sandbox's user maps to (akabox --outside-uid/--outside-gid); 0:
  // akabox's default (the workspace's owner).
  uid_t outside_uid = 0;
  gid_t outside_gid = 0;
};

// The cgroup parent every sandbox of this daemon goes under (akad --cgroup-parent, default
// "akad"); `akabox cleanup` of it at start-up removes what a killed daemon left.
void setDefaultCgroupParent(const std::string& parent);
const std::string& defaultCgroupParent();

// Where akabox keeps this daemon's mount templates (akad --mount-templates; docs/akabox.md,
// "Mount templates"): every sandbox then runs with --mount-template and copies a kept static
// root instead of building one. Empty: off. `cleanupSandboxLeftovers` removes them.
void setMountTemplateDir(const std::string& dir);
const std::string& mountTemplateDir();

// `akabox cleanup` of the daemon's cgroup parent, and of its mount templates when they are on.
// A warning in the log when it does not succeed.
void cleanupSandboxLeftovers();

// akanet-bridge (sandbox/net_bridge.cc): beside akabox, installed or in the build tree.
std::filesystem::path netBridgePath();

struct SandboxOutcome {
  nlohmann::json result;  // akabox's result JSON (docs/akabox.md)
  std::string status;     // exited | signaled | wall-timeout | cpu-timeout | oom | output-limit | setup-failed
  int exit_code = -1;
  double wall_s = 0;
  double cpu_s = 0;
  bool succeeded() const { return status == "exited" && exit_code == 0; }
  // One line a user can act on: "exited with 2", "killed at the wall-time limit (60 s)", ...
  std::string describe() const;
};

// The sandboxes of one attempt: another thread can stop the one in flight (a cancelled run, a
// daemon shutting down; akabox gets SIGTERM and tears the sandbox down itself), and the time
// spent inside commands is summed, so the pipeline's own overhead can be told apart.
//
// akabox is named by a pidfd, as akabox names its init: a pid can be reaped and handed to an
// unrelated process between reading it and kill(), a pidfd only ever means its own process.
// runSandbox opens it before it can reap akabox and closes it only after detach(), and
// cancel() signals under the same lock, so no closed or reused descriptor is signalled either.
class SandboxCanceller {
 public:
  void cancel();
  bool cancelled() const { return cancelled_; }
  // The pidfd of the akabox in flight; the caller keeps it open until after detach().
  void attach(int pidfd);
  void detach();
  void addCommandSeconds(double s) { commandMicros_ += static_cast<uint64_t>(s * 1e6); }
  double commandSeconds() const { return static_cast<double>(commandMicros_.load()) / 1e6; }

 private:
  std::mutex mutex_;  // attach, detach and cancel's signal
  int pidfd_ = -1;
  std::atomic<bool> cancelled_{false};
  std::atomic<uint64_t> commandMicros_{0};
};

// The akabox executable: $AKABOX, else beside the running akad, else the build tree.
std::filesystem::path akaboxPath();

Result<SandboxOutcome> runSandbox(const SandboxRequest& request, SandboxCanceller* canceller = nullptr);

// The argv akabox gets for a request (exposed for tests and for `akactl logs` to show).
std::vector<std::string> akaboxArgv(const std::filesystem::path& akabox, const SandboxRequest& request);

}  // namespace akad
