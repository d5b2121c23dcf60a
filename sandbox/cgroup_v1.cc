// cgroup v1: one directory per controller hierarchy. Only the hierarchies a run needs are
// used, because every mkdir/rmdir costs time on each spawn: memory (limit, peak, OOM), pids
// (limit, kill list), devices (always: device isolation), cpuacct when a CPU-time limit is
// watched, cpuset when CPUs are pinned.

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <ctime>
#include <set>

#include "common/unique_fd.h"
#include "sandbox/cgroup.h"

namespace akad::box {
namespace {

using namespace cgroupfs;

std::string mountFor(const std::vector<Mount>& ms, const std::string& controller) {
  for (const auto& m : ms) {
    if (m.type != "cgroup") continue;
    for (const auto& c : m.controllers)
      if (c == controller) return m.path;
  }
  return {};
}

// Kills everything listed in cgroup.procs until it stays empty. Processes can fork between
// the read and the kill, so repeat; the pids limit bounds how long that can go on.
bool killProcsUntilEmpty(const std::string& dir) {
  for (int i = 0; i < 200; ++i) {
    auto pids = readPids(dir + "/cgroup.procs");
    if (pids.empty()) return true;
    for (pid_t p : pids) ::kill(p, SIGKILL);
    sleepMs(i < 10 ? 1 : 10);
  }
  return readPids(dir + "/cgroup.procs").empty();
}

class CgroupV1 final : public SandboxCgroup {
 public:
  ~CgroupV1() override { (void)remove(); }
  CgroupVersion version() const override { return CgroupVersion::V1; }
  std::string path() const override { return dirs_.empty() ? std::string() : dirs_.front(); }

  Status create(const std::string& parent, const std::string& leaf, const CgroupLimits& limits, std::vector<Mount> ms) {
    if (ms.empty()) ms = mounts();
    std::vector<std::string> controllers = {"memory", "pids", "devices"};
    if (limits.cpuAccounting) controllers.push_back("cpuacct");
    if (!limits.cpus.empty()) controllers.push_back("cpuset");
    std::set<std::string> seen;
    for (const auto& c : controllers) {
      std::string base = mountFor(ms, c);
      if (base.empty()) return Error{"cgroup v1 controller '" + c + "' is not mounted"};
      if (!seen.insert(base).second) continue;  // co-mounted controllers share a directory
      std::string parentDir = base + "/" + parent;
      if (::access(parentDir.c_str(), F_OK) != 0) {
        if (auto st = makeDirs(base, parent); !st) return st;
        if (c == "cpuset") {
          // A new v1 cpuset starts with no CPUs and no memory nodes; give the parent its
          // parent's, and let children inherit them.
          std::string up = parentDir.substr(0, parentDir.rfind('/'));
          for (const char* f : {"cpuset.cpus", "cpuset.mems"}) {
            auto v = readFile(up + "/" + f);
            if (v && *v != "\n") (void)writeFile(parentDir + "/" + f, *v);
          }
          (void)writeFile(parentDir + "/cgroup.clone_children", "1");
        }
      }
      std::string dir = parentDir + "/" + leaf;
      if (::mkdir(dir.c_str(), 0755) != 0) return errnoError("cannot create cgroup '" + dir + "'");
      dirs_.push_back(dir);
      if (c == "memory") memory_ = dir;
      if (c == "pids") pids_ = dir;
      if (c == "devices") devices_ = dir;
      if (c == "cpuacct") cpuacct_ = dir;
      if (c == "cpuset") cpuset_ = dir;
    }
    // Co-mounted hierarchies ("cpu,cpuacct") still need the per-controller names resolved.
    for (const auto& c : controllers) {
      std::string dir = mountFor(ms, c) + "/" + parent + "/" + leaf;
      if (c == "memory") memory_ = dir;
      if (c == "pids") pids_ = dir;
      if (c == "devices") devices_ = dir;
      if (c == "cpuacct") cpuacct_ = dir;
      if (c == "cpuset") cpuset_ = dir;
    }
    return {};
  }

  Status applyLimits(const CgroupLimits& limits) override {
    if (limits.memoryBytes) {
      auto v = std::to_string(limits.memoryBytes);
      if (auto st = writeFile(memory_ + "/memory.limit_in_bytes", v); !st) return st;
      // memsw only exists with swap accounting; without it swappiness 0 keeps the group
      // from swapping instead.
      if (::access((memory_ + "/memory.memsw.limit_in_bytes").c_str(), F_OK) == 0) {
        if (auto st = writeFile(memory_ + "/memory.memsw.limit_in_bytes", v); !st) return st;
      } else {
        (void)writeFile(memory_ + "/memory.swappiness", "0");
      }
    }
    if (limits.pids) {
      if (auto st = writeFile(pids_ + "/pids.max", std::to_string(limits.pids)); !st) return st;
    }
    if (!limits.cpus.empty()) {
      if (auto st = writeFile(cpuset_ + "/cpuset.cpus", limits.cpus); !st) return st;
    }
    if (auto st = writeFile(devices_ + "/devices.deny", "a"); !st) return st;
    // One rule per write(2), but one open for all of them.
    std::string allowPath = devices_ + "/devices.allow";
    UniqueFd allow(::open(allowPath.c_str(), O_WRONLY | O_CLOEXEC));
    if (!allow.valid()) return errnoError("cannot open '" + allowPath + "'");
    for (const auto& r : limits.allowedDevices) {
      std::string rule = r.v1Text();
      if (::write(allow.get(), rule.data(), rule.size()) != static_cast<ssize_t>(rule.size()))
        return errnoError("cannot write '" + rule + "' to '" + allowPath + "'");
    }
    return {};
  }

  std::vector<std::string> selfJoinFiles() const override {
    std::vector<std::string> out;
    for (const auto& d : dirs_) out.push_back(d + "/tasks");
    return out;
  }

  Status addProcess(pid_t pid) override {
    std::string p = std::to_string(pid);
    for (const auto& d : dirs_)
      if (auto st = writeFile(d + "/cgroup.procs", p); !st) return st;
    return {};
  }

  std::optional<uint64_t> cpuUsageNs() override {
    if (cpuacct_.empty()) return std::nullopt;
    return readNumber(cpuacct_ + "/cpuacct.usage");
  }

  // The accounting files by what they hold; cpuacct's only where that hierarchy is used.
  struct UsagePaths {
    std::string peak, oomControl, pidsPeak, cpuUsage, cpuStat;
  };
  UsagePaths usagePaths() const {
    UsagePaths p{memory_ + "/memory.max_usage_in_bytes", memory_ + "/memory.oom_control", pids_ + "/pids.peak", {}, {}};
    if (!cpuacct_.empty()) {
      p.cpuUsage = cpuacct_ + "/cpuacct.usage";
      p.cpuStat = cpuacct_ + "/cpuacct.stat";
    }
    return p;
  }

  void prepareUsage() override {
    const UsagePaths p = usagePaths();
    for (const std::string* f : {&p.peak, &p.oomControl, &p.pidsPeak, &p.cpuUsage, &p.cpuStat})
      if (!f->empty()) usageFiles_.open(*f);
  }

  CgroupUsage usage() override {
    const UsagePaths p = usagePaths();
    auto number = [&](const std::string& path) -> std::optional<uint64_t> {
      auto t = usageFiles_.read(path);
      return t ? parseNumber(*t) : std::nullopt;
    };
    CgroupUsage u;
    u.peakMemoryBytes = number(p.peak);
    auto oom = usageFiles_.read(p.oomControl);
    u.oomKills = oom ? parseKeyValue(*oom, "oom_kill").value_or(0) : 0;
    u.pidsPeak = number(p.pidsPeak);
    if (!cpuacct_.empty()) {
      u.cpuNs = number(p.cpuUsage);
      // cpuacct.stat counts USER_HZ ticks; the split is coarse, the total above is exact.
      static const uint64_t tickNs = 1000000000ull / static_cast<uint64_t>(::sysconf(_SC_CLK_TCK));
      if (auto stat = usageFiles_.read(p.cpuStat)) {
        auto user = parseKeyValue(*stat, "user");
        auto sys = parseKeyValue(*stat, "system");
        if (user) u.userNs = *user * tickNs;
        if (sys) u.sysNs = *sys * tickNs;
      }
    }
    return u;
  }

  Status killAll() override {
    if (removed_ || pids_.empty()) return {};
    if (!killProcsUntilEmpty(pids_)) return Error{"processes in cgroup '" + pids_ + "' survive SIGKILL"};
    return {};
  }

  Status remove() override {
    if (removed_) return {};
    // Usually everything is gone with the pid namespace and rmdir just works; removeCgroupDir kills
    // what is left (the cgroup is busy) and retries, so no separate look at cgroup.procs.
    Status result;
    for (auto it = dirs_.rbegin(); it != dirs_.rend(); ++it)
      if (auto st = removeCgroupDir(*it, killProcsUntilEmpty); !st && result) result = st;
    removed_ = true;
    return result;
  }

 private:
  std::vector<std::string> dirs_;
  std::string memory_, pids_, devices_, cpuacct_, cpuset_;
  OpenedFiles usageFiles_;
  bool removed_ = false;
};

}  // namespace

Result<std::unique_ptr<SandboxCgroup>> createCgroupDirsV1(const std::string& parent, const std::string& leaf,
                                                          const CgroupLimits& limits, std::vector<Mount> mounts) {
  auto cg = std::make_unique<CgroupV1>();
  if (auto st = cg->create(parent, leaf, limits, std::move(mounts)); !st) return st.error();  // destructor removes
  return std::unique_ptr<SandboxCgroup>(std::move(cg));
}

Result<int> cleanupCgroupV1(const std::string& parent) {
  int removed = 0;
  Status firstError;
  std::set<std::string> seen;
  for (const auto& m : mounts()) {
    if (m.type != "cgroup" || !seen.insert(m.path).second) continue;
    std::string dir = m.path + "/" + parent;
    if (::access(dir.c_str(), F_OK) != 0) continue;
    auto st = removeCgroupsBelow(dir, [](const std::string& child) {
      killProcsUntilEmpty(child);
      return removeCgroupDir(child, killProcsUntilEmpty);
    }, removed);
    if (!st && firstError) firstError = st;
  }
  if (!firstError) return firstError.error();
  return removed;
}

}  // namespace akad::box
