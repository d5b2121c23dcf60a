#pragma once
// SandboxSpec: everything one akabox run needs, from a JSON spec file and/or command-line flags.
// Flags and JSON fields share names (docs/akabox.md); scalar flags replace the file's value,
// repeatable flags (bind, tmpfs, env, device) add to the file's lists.

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/byte_size.h"  // parseSize: the spec's sizes ("512M")
#include "common/result.h"

namespace akad::box {

struct BindMount {
  std::string src;
  std::string dst;
  bool rw = false;
  // Device nodes under this bind stay usable (no nodev); the device cgroup still decides which
  // ones open, so this is how one shows that it, not the mount flag, holds the line.
  bool dev = false;
};

struct TmpfsMount {
  std::string dst;
  uint64_t sizeBytes = 0;  // 0: the kernel's default (half of RAM); pages count against memory
  // Transparent huge pages for files at least 2 MiB long (huge=within_size): a file mapped
  // afresh then costs a few page-table entries instead of one per 4 KiB (the scorer's
  // per-call input files).
  bool hugePages = false;
};

enum class NetMode { None, Host };
enum class CgroupBackendChoice { Auto, V1, V2 };

struct SandboxSpec {
  std::string root = "host";  // "host" or a directory holding a prepared root filesystem
  std::vector<BindMount> binds;
  std::string workspace;  // host dir bound rw at /workspace; empty: none
  std::vector<TmpfsMount> tmpfs;
  // The environment starts as PATH, HOME, LANG; these entries are added (or replace them).
  // Hook for GPU passthrough: CUDA_VISIBLE_DEVICES etc. are added here.
  std::map<std::string, std::string> env;
  uint64_t memoryBytes = 0;  // 0: no limit
  uint64_t pids = 0;         // 0: no limit
  std::string cpus;          // cpuset list; empty: inherit
  double cpuTimeS = 0;       // 0: no limit
  double wallTimeS = 0;      // 0: no limit
  uint64_t outputLimitBytes = 0;  // 0: no limit
  NetMode net = NetMode::None;
  std::string seccomp = "default";  // "default", "none" or a policy file path
  uid_t uid = 1000;
  gid_t gid = 1000;
  // Ids the sandbox's uid/gid map to outside. Unset: the workspace's owner when it is not root,
  // else 100000 + uid/gid. Root (0) is refused.
  std::optional<uid_t> outsideUid;
  std::optional<gid_t> outsideGid;
  std::string stdinPath;  // host file given as stdin; empty: /dev/null
  std::string stdoutPath, stderrPath;  // empty: akabox's own stdout/stderr
  std::string resultPath;
  int resultFd = -1;
  // Device nodes bound into /dev and allowed in the device cgroup. Hook for GPU passthrough:
  // the GPU layer turns `--gpu ID` into entries here.
  std::vector<std::string> devices;
  // GPU ids from discovery (`--gpu nvidia0`); applyGpuPassthrough turns them into devices + env.
  std::vector<std::string> gpus;
  std::string cgroupParent = "akabox";
  CgroupBackendChoice cgroupBackend = CgroupBackendChoice::Auto;
  std::string hostname = "akabox";
  std::string cwd;  // inside; empty: /workspace if a workspace is bound, else /
  bool commandIsPid1 = false;
  // Copy a kept, pre-built mount namespace (mnt_template.h) instead of building the root anew.
  bool mountTemplate = false;
  std::vector<std::string> command;
};

// Reads and parses a spec file (size-limited). The error names the file and the JSON error.
Result<nlohmann::json> loadSpecFile(const std::string& path);

// Merges `flags` over `file` (see above), validates every field and returns the spec. Errors
// name the field and why it is wrong.
Result<SandboxSpec> parseSpec(const nlohmann::json& file, const nlohmann::json& flags);

// The outside uid/gid the sandbox ids map to, after applying the defaults above.
Result<std::pair<uid_t, gid_t>> outsideIds(const SandboxSpec& spec);

// The command's working directory inside: `cwd`, else /workspace with a workspace, else /.
inline std::string commandCwd(const SandboxSpec& spec) {
  if (!spec.cwd.empty()) return spec.cwd;
  return spec.workspace.empty() ? "/" : "/workspace";
}

}  // namespace akad::box
