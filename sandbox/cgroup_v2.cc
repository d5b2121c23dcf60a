// cgroup v2: one directory in the unified hierarchy. Controllers must be enabled in every
// ancestor's cgroup.subtree_control; the device allow-list is a BPF program, since v2 has no
// devices controller.

#include <fcntl.h>
#include <linux/magic.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <ctime>

#include "sandbox/cgroup.h"
#include "sandbox/text.h"

namespace akad::box {
namespace {

using namespace cgroupfs;

Result<std::string> unifiedRoot() {
  struct statfs fs {};
  if (::statfs("/sys/fs/cgroup", &fs) == 0 && fs.f_type == CGROUP2_SUPER_MAGIC) return std::string("/sys/fs/cgroup");
  for (const auto& m : mounts())
    if (m.type == "cgroup2") return m.path;
  return Error{"no cgroup2 hierarchy is mounted"};
}

using text::hasWord;

bool populated(const std::string& dir) {
  return readKeyValue(dir + "/cgroup.events", "populated").value_or(0) != 0;
}

// cgroup.kill (5.14+) kills every process atomically, including ones forking right now; the
// procs loop is the fallback for older kernels.
bool killCgroup(const std::string& dir) {
  if (!writeFile(dir + "/cgroup.kill", "1")) {
    for (pid_t p : readPids(dir + "/cgroup.procs")) ::kill(p, SIGKILL);
  }
  for (int i = 0; i < 300; ++i) {
    if (!populated(dir)) return true;
    if (i % 20 == 19) (void)writeFile(dir + "/cgroup.kill", "1");
    sleepMs(i < 10 ? 1 : 10);
  }
  return !populated(dir);
}

// Enables the controllers in every cgroup from the root down to `parent`, so its children
// get memory.max, pids.max, cpuset.cpus.
Status enableControllers(const std::string& root, const std::string& parent, const std::vector<std::string>& wanted) {
  std::string cur = root;
  std::vector<std::string> levels = {root};
  for (auto part : text::split(parent, '/'))
    if (!part.empty()) {
      // Appended piece by piece: GCC 12's -Wrestrict misreads "/" + std::string(part) at -O3.
      cur += '/';
      cur += part;
      levels.push_back(cur);
    }
  for (const auto& dir : levels) {
    auto enabled = readFile(dir + "/cgroup.subtree_control");
    auto available = readFile(dir + "/cgroup.controllers");
    if (!enabled || !available) return Error{"cannot read the controllers of cgroup '" + dir + "'"};
    for (const auto& c : wanted) {
      if (hasWord(*enabled, c)) continue;
      if (!hasWord(*available, c))
        return Error{"cgroup v2 controller '" + c + "' is not available in '" + dir + "' (cgroup.controllers: '" +
                     available->substr(0, available->find_last_not_of("\n") + 1) + "')"};
      if (auto st = writeFile(dir + "/cgroup.subtree_control", "+" + c); !st) return st;
    }
  }
  return {};
}

class CgroupV2 final : public SandboxCgroup {
 public:
  ~CgroupV2() override { (void)remove(); }
  CgroupVersion version() const override { return CgroupVersion::V2; }
  std::string path() const override { return dir_; }

  Status create(const std::string& parent, const std::string& leaf, const CgroupLimits& limits) {
    auto root = unifiedRoot();
    if (!root) return root.error();
    std::string parentDir = *root + "/" + parent;
    // Every spawn after the first: the parent hands its children memory and pids (and
    // cpuset if asked) already, and the walk from the root (four reads) is not needed.
    auto handed = readFile(parentDir + "/cgroup.subtree_control");
    if (!handed || !hasWord(*handed, "memory") || !hasWord(*handed, "pids") ||
        (!limits.cpus.empty() && !hasWord(*handed, "cpuset")))
      if (auto st = prepareParent(*root, parent, limits); !st) return st;
    return makeLeaf(parentDir, leaf);
  }

  // Creates `parent` as needed and enables the controllers the sandbox gets in every cgroup
  // from the root down to it.
  Status prepareParent(const std::string& root, const std::string& parent, const CgroupLimits& limits) {
    std::vector<std::string> wanted;
    auto rootRead = readFile(root + "/cgroup.controllers");
    std::string rootAvail = rootRead ? *rootRead : std::string();
    // memory and pids also give accounting (peak, OOM kills), so take them when they exist
    // even without a limit; a limit without its controller is an error below.
    if (limits.memoryBytes || hasWord(rootAvail, "memory")) wanted.push_back("memory");
    if (limits.pids || hasWord(rootAvail, "pids")) wanted.push_back("pids");
    if (!limits.cpus.empty()) wanted.push_back("cpuset");
    if (auto st = makeDirs(root, parent); !st) return st;
    return enableControllers(root, parent, wanted);
  }

  Status makeLeaf(const std::string& parentDir, const std::string& leaf) {
    dir_ = parentDir + "/" + leaf;
    if (::mkdir(dir_.c_str(), 0755) != 0) {
      auto e = errnoError("cannot create cgroup '" + dir_ + "'");
      dir_.clear();
      return e;
    }
    created_ = true;
    int dfd = ::open(dir_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0) return errnoError("cannot open cgroup '" + dir_ + "'");
    dirFd_.reset(dfd);
    return {};
  }

  Status applyLimits(const CgroupLimits& limits) override {
    if (limits.memoryBytes) {
      if (auto st = writeFile(dir_ + "/memory.max", std::to_string(limits.memoryBytes)); !st) return st;
      if (::access((dir_ + "/memory.swap.max").c_str(), F_OK) == 0)
        if (auto st = writeFile(dir_ + "/memory.swap.max", "0"); !st) return st;
    }
    if (limits.pids)
      if (auto st = writeFile(dir_ + "/pids.max", std::to_string(limits.pids)); !st) return st;
    if (!limits.cpus.empty())
      if (auto st = writeFile(dir_ + "/cpuset.cpus", limits.cpus); !st) return st;

    auto prog = loadDeviceProgram(limits.allowedDevices);
    if (!prog) return prog.error();
    if (auto st = attachDeviceProgram(dirFd_.get(), prog->get(), dir_); !st) return st;
    return {};
  }

  int cloneIntoFd() const override { return dirFd_.get(); }

  Status addProcess(pid_t pid) override { return writeFile(dir_ + "/cgroup.procs", std::to_string(pid)); }

  std::optional<uint64_t> cpuUsageNs() override {
    auto usec = readKeyValue(dir_ + "/cpu.stat", "usage_usec");
    if (!usec) return std::nullopt;
    return *usec * 1000;
  }

  void prepareUsage() override {
    for (const char* f : {"/memory.peak", "/memory.events", "/pids.peak", "/cpu.stat"}) usageFiles_.open(dir_ + f);
  }

  CgroupUsage usage() override {
    CgroupUsage u;
    auto peak = usageFiles_.read(dir_ + "/memory.peak");
    u.peakMemoryBytes = peak ? parseNumber(*peak) : std::nullopt;
    auto events = usageFiles_.read(dir_ + "/memory.events");
    u.oomKills = events ? parseKeyValue(*events, "oom_kill").value_or(0) : 0;
    auto pids = usageFiles_.read(dir_ + "/pids.peak");
    u.pidsPeak = pids ? parseNumber(*pids) : std::nullopt;
    auto stat = usageFiles_.read(dir_ + "/cpu.stat");
    auto usec = [&](const char* key) -> std::optional<uint64_t> {
      auto v = stat ? parseKeyValue(*stat, key) : std::nullopt;
      if (!v) return std::nullopt;
      return *v * 1000;
    };
    u.cpuNs = usec("usage_usec");
    u.userNs = usec("user_usec");
    u.sysNs = usec("system_usec");
    return u;
  }

  Status killAll() override {
    if (!created_) return {};
    if (!killCgroup(dir_)) return Error{"processes in cgroup '" + dir_ + "' survive cgroup.kill"};
    return {};
  }

  Status remove() override {
    if (!created_) return {};
    // removeCgroupDir kills what is left (rmdir says EBUSY) and retries; usually nothing is.
    Status st = removeCgroupDir(dir_, killCgroup);
    created_ = false;
    return st;
  }

 private:
  std::string dir_;
  OpenedFiles usageFiles_;
  UniqueFd dirFd_;
  bool created_ = false;
};

}  // namespace

Result<std::unique_ptr<SandboxCgroup>> createCgroupDirsV2(const std::string& parent, const std::string& leaf,
                                                          const CgroupLimits& limits) {
  auto cg = std::make_unique<CgroupV2>();
  if (auto st = cg->create(parent, leaf, limits); !st) return st.error();
  return std::unique_ptr<SandboxCgroup>(std::move(cg));
}

Result<int> cleanupCgroupV2(const std::string& parent) {
  auto root = unifiedRoot();
  if (!root) return root.error();
  std::string dir = *root + "/" + parent;
  if (::access(dir.c_str(), F_OK) != 0) return 0;
  int removed = 0;
  Status firstError = removeCgroupsBelow(dir, [](const std::string& child) {
    killCgroup(child);
    return removeCgroupDir(child, killCgroup);
  }, removed);
  if (!firstError) return firstError.error();
  return removed;
}

}  // namespace akad::box
