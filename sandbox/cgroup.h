#pragma once
// A fresh cgroup per sandbox under a parent the daemon owns (<parent>/box-<pid>-<random>),
// with one back-end per cgroup version (cgroup_v1.cc, cgroup_v2.cc), chosen by detection.

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "common/result.h"
#include "common/unique_fd.h"
#include "sandbox/devices.h"
#include "sandbox/spec.h"

namespace akad::box {

enum class CgroupVersion { V1, V2 };
const char* cgroupVersionName(CgroupVersion v);

struct CgroupLimits {
  uint64_t memoryBytes = 0;  // 0: none. Swap is never allowed beyond it.
  uint64_t pids = 0;         // 0: none
  std::string cpus;          // empty: inherit
  // v1: also use the cpuacct hierarchy: needed to watch a CPU-time limit, and to account the
  // CPU time of processes killed with the sandbox (wait4 never sees those).
  bool cpuAccounting = true;
  std::vector<DeviceRule> allowedDevices;
};

struct CgroupUsage {
  std::optional<uint64_t> peakMemoryBytes;
  uint64_t oomKills = 0;
  std::optional<uint64_t> pidsPeak;
  // CPU time of every process that ever ran in the cgroup, including ones killed with the
  // pid namespace (their time never reaches wait4's rusage).
  std::optional<uint64_t> cpuNs, userNs, sysNs;
};

// Owns one sandbox cgroup; the destructor kills what is left in it and removes it.
class SandboxCgroup {
 public:
  virtual ~SandboxCgroup() = default;
  virtual CgroupVersion version() const = 0;
  virtual std::string path() const = 0;  // for messages: the (first) directory
  // How the sandbox's init gets in without a migration by its parent. A migration of another
  // process takes the kernel's global threadgroup rwsem, whose write side waits for RCU grace
  // periods: on a busy machine longer per hierarchy than the whole rest of a spawn.
  //  - v2: clone3(CLONE_INTO_CGROUP) with this directory fd: the child is born inside.
  //  - v1: the init writes "0" to each of these `tasks` files as its first step; a thread
  //    moving itself skips that lock.
  virtual int cloneIntoFd() const { return -1; }
  virtual std::vector<std::string> selfJoinFiles() const { return {}; }
  // Writes the limits and the device allow-list into the created directories. Separate from
  // creation so that akabox can do it while the sandbox's init builds its mount namespace:
  // the init enters (v1) or starts using (v2) the cgroup only after this returned.
  virtual Status applyLimits(const CgroupLimits& limits) = 0;
  // Moves another process in (slow, see above; used for clean-up tests and fallbacks).
  virtual Status addProcess(pid_t pid) = 0;
  // CPU time used so far by every process in it, if the back-end can tell.
  virtual std::optional<uint64_t> cpuUsageNs() = 0;
  // Opens the files usage() reads, so that at the end of the run only the reads are left.
  // Best effort: a file that cannot be opened now is opened by usage().
  virtual void prepareUsage() = 0;
  virtual CgroupUsage usage() = 0;
  // Kills every process in it and waits until it is empty.
  virtual Status killAll() = 0;
  // rmdir; if processes are still inside, kills them and retries. Idempotent.
  virtual Status remove() = 0;
};

namespace cgroupfs {
struct Mount {
  std::string type;  // "cgroup" or "cgroup2"
  std::string path;
  std::vector<std::string> controllers;  // v1: from the mount options
};
}  // namespace cgroupfs

// True when /sys/fs/cgroup is itself a cgroup2 mount (a pure v2 host); one statfs.
bool cgroupV2Unified();

// Which back-end to use: v2 when /sys/fs/cgroup is a cgroup2 mount, v1 when the v1 memory
// controller is mounted; a choice other than Auto is checked, not trusted. If it had to read
// the mount table, the cgroup mounts are left in *mountsOut for createSandboxCgroupDirs.
Result<CgroupVersion> detectCgroupVersion(CgroupBackendChoice choice, std::vector<cgroupfs::Mount>* mountsOut = nullptr);

// Creates the cgroup's directories (those `limits` needs: v1 adds cpuacct and cpuset
// hierarchies only when asked); applyLimits() completes it. v2 needs this before clone3
// (CLONE_INTO_CGROUP); on v1 it can wait until the init has been started. `mounts`: the cgroup
// mounts detection read, if it did (empty: read them again where needed).
Result<std::unique_ptr<SandboxCgroup>> createSandboxCgroupDirs(CgroupVersion v, const std::string& parent,
                                                                const CgroupLimits& limits,
                                                                std::vector<cgroupfs::Mount> mounts = {});
// Both steps at once.
Result<std::unique_ptr<SandboxCgroup>> createSandboxCgroup(CgroupVersion v, const std::string& parent,
                                                            const CgroupLimits& limits);

// Kills every process in, and removes, every cgroup left under `parent` (after a crash).
// Returns how many cgroups were removed.
Result<int> cleanupCgroupParent(CgroupVersion v, const std::string& parent);

// Back-end entry points (cgroup_v1.cc, cgroup_v2.cc): directories only, no limits yet.
Result<std::unique_ptr<SandboxCgroup>> createCgroupDirsV1(const std::string& parent, const std::string& leaf,
                                                          const CgroupLimits& limits, std::vector<cgroupfs::Mount> mounts);
Result<std::unique_ptr<SandboxCgroup>> createCgroupDirsV2(const std::string& parent, const std::string& leaf,
                                                          const CgroupLimits& limits);
Result<int> cleanupCgroupV1(const std::string& parent);
Result<int> cleanupCgroupV2(const std::string& parent);

// Shared helpers for the back-ends.
namespace cgroupfs {
std::vector<Mount> mounts();  // the cgroup and cgroup2 mounts, from /proc/self/mounts
Status writeFile(const std::string& path, const std::string& value);
Result<std::string> readFile(const std::string& path);
// mkdir -p below `base`; existing directories are fine.
Status makeDirs(const std::string& base, const std::string& rel);
std::vector<pid_t> readPids(const std::string& procsFile);
std::optional<uint64_t> readKeyValue(const std::string& path, const std::string& key);
std::optional<uint64_t> readNumber(const std::string& path);
// The same on a file's text.
std::optional<uint64_t> parseKeyValue(const std::string& text, const std::string& key);
std::optional<uint64_t> parseNumber(const std::string& text);
// Control files opened ahead of their one read. A cgroup file's text is made when it is
// read, so opening early does not make the value older.
class OpenedFiles {
 public:
  void open(const std::string& path);
  // The file's text, read through the descriptor opened earlier, else opened now.
  std::optional<std::string> read(const std::string& path);

 private:
  std::map<std::string, UniqueFd> fds_;
};
// Child directories of `dir` (names), depth-first post-order (deepest first), relative to dir.
std::vector<std::string> childDirsDeepestFirst(const std::string& dir);
// Every cgroup below `dir`, deepest first, goes through `removeOne` (kill its processes, then
// rmdir); adds the ones removed to `removed` and returns the first failure, if any.
Status removeCgroupsBelow(const std::string& dir, const std::function<Status(const std::string&)>& removeOne,
                          int& removed);
void sleepMs(int ms);
// rmdir of one cgroup; while the kernel says it is busy, `killAll` (the back-end's way to empty
// it) and try again, for about 2 s. A cgroup already gone is fine.
Status removeCgroupDir(const std::string& dir, const std::function<bool(const std::string&)>& killAll);
}  // namespace cgroupfs

}  // namespace akad::box
