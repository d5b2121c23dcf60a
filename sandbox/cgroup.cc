#include "sandbox/cgroup.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/random.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <ctime>
#include <string_view>

#include "sandbox/files.h"
#include "sandbox/text.h"

namespace akad::box {

const char* cgroupVersionName(CgroupVersion v) { return v == CgroupVersion::V1 ? "v1" : "v2"; }

namespace cgroupfs {

// Read on every spawn, so without iostreams: one read of the table, then string views.
std::vector<Mount> mounts() {
  std::vector<Mount> out;
  auto table = readFile("/proc/self/mounts");
  if (!table) return out;
  for (std::string_view line : text::split(*table, '\n')) {
    auto f = text::split(line, ' ');  // device, path, type, options, ...
    if (f.size() < 4 || (f[2] != "cgroup" && f[2] != "cgroup2")) continue;
    Mount m{std::string(f[2]), std::string(f[1]), {}};
    for (std::string_view o : text::split(f[3], ',')) m.controllers.emplace_back(o);
    out.push_back(std::move(m));
  }
  return out;
}

Status writeFile(const std::string& path, const std::string& value) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) return errnoError("cannot open '" + path + "' for writing");
  ssize_t n = ::write(fd, value.data(), value.size());
  int err = errno;
  ::close(fd);
  if (n != static_cast<ssize_t>(value.size())) return errnoError("cannot write '" + value + "' to '" + path + "'", n < 0 ? err : EIO);
  return {};
}

namespace {

}  // namespace

Result<std::string> readFile(const std::string& path) { return readWholeFile(path); }

Status makeDirs(const std::string& base, const std::string& rel) {
  std::string cur = base;
  for (auto part : text::split(rel, '/')) {
    if (part.empty()) continue;
    cur += "/";
    cur += part;
    if (::mkdir(cur.c_str(), 0755) != 0 && errno != EEXIST) return errnoError("cannot create cgroup '" + cur + "'");
  }
  return {};
}

std::vector<pid_t> readPids(const std::string& procsFile) {
  std::vector<pid_t> out;
  auto procs = readFile(procsFile);
  if (!procs) return out;
  for (auto w : text::words(*procs)) {
    auto p = text::number(w);
    if (!p) break;
    out.push_back(static_cast<pid_t>(*p));
  }
  return out;
}

std::optional<uint64_t> parseKeyValue(const std::string& stat, const std::string& key) {
  return text::keyValue(stat, key);
}

std::optional<uint64_t> parseNumber(const std::string& text) {
  try {
    return std::stoull(text);
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

std::optional<uint64_t> readKeyValue(const std::string& path, const std::string& key) {
  auto text = readFile(path);
  if (!text) return std::nullopt;
  return parseKeyValue(*text, key);
}

std::optional<uint64_t> readNumber(const std::string& path) {
  auto text = readFile(path);
  if (!text) return std::nullopt;
  return parseNumber(*text);
}

void OpenedFiles::open(const std::string& path) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.valid()) fds_[path] = std::move(fd);
}

std::optional<std::string> OpenedFiles::read(const std::string& path) {
  auto it = fds_.find(path);
  auto text = it == fds_.end() ? readFile(path) : readRest(it->second.get(), path);  // each is read once
  return text ? std::optional<std::string>(*text) : std::nullopt;
}

namespace {
void collect(const std::string& dir, const std::string& rel, std::vector<std::string>& out) {
  DIR* d = ::opendir(dir.c_str());
  if (!d) return;
  std::vector<std::string> names;
  while (dirent* e = ::readdir(d)) {
    if (e->d_type != DT_DIR) continue;
    std::string n = e->d_name;
    if (n == "." || n == "..") continue;
    names.push_back(n);
  }
  ::closedir(d);
  for (const auto& n : names) {
    std::string r = rel.empty() ? n : rel + "/" + n;
    collect(dir + "/" + n, r, out);
    out.push_back(r);
  }
}
}  // namespace

std::vector<std::string> childDirsDeepestFirst(const std::string& dir) {
  std::vector<std::string> out;
  collect(dir, "", out);
  return out;
}

Status removeCgroupsBelow(const std::string& dir, const std::function<Status(const std::string&)>& removeOne,
                          int& removed) {
  Status firstError;
  for (const auto& rel : childDirsDeepestFirst(dir)) {
    if (auto st = removeOne(dir + "/" + rel); !st) {
      if (firstError) firstError = st;
    } else {
      ++removed;
    }
  }
  return firstError;
}

void sleepMs(int ms) {
  timespec ts{0, ms * 1000000L};
  ::nanosleep(&ts, nullptr);
}

Status removeCgroupDir(const std::string& dir, const std::function<bool(const std::string&)>& killAll) {
  for (int i = 0; i < 100; ++i) {
    if (::rmdir(dir.c_str()) == 0 || errno == ENOENT) return {};
    if (errno != EBUSY) return errnoError("cannot remove cgroup '" + dir + "'");
    killAll(dir);
    sleepMs(i < 10 ? 1 : 20);
  }
  return errnoError("cannot remove cgroup '" + dir + "' (still busy)", EBUSY);
}

}  // namespace cgroupfs

bool cgroupV2Unified() {
  struct statfs fs {};
  return ::statfs("/sys/fs/cgroup", &fs) == 0 && fs.f_type == CGROUP2_SUPER_MAGIC;
}

Result<CgroupVersion> detectCgroupVersion(CgroupBackendChoice choice, std::vector<cgroupfs::Mount>* mountsOut) {
  bool pureV2 = cgroupV2Unified();
  if (pureV2 && choice != CgroupBackendChoice::V1) return CgroupVersion::V2;
  bool haveV1 = false, haveV2 = pureV2;
  std::vector<cgroupfs::Mount> ms = cgroupfs::mounts();
  for (const auto& m : ms) {
    if (m.type == "cgroup2") haveV2 = true;
    for (const auto& c : m.controllers)
      if (m.type == "cgroup" && c == "memory") haveV1 = true;
  }
  switch (choice) {
    case CgroupBackendChoice::V1:
      if (!haveV1) return Error{"cgroup v1 was asked for but no v1 memory controller is mounted"};
      return CgroupVersion::V1;
    case CgroupBackendChoice::V2:
      if (!haveV2) return Error{"cgroup v2 was asked for but no cgroup2 hierarchy is mounted"};
      return CgroupVersion::V2;
    case CgroupBackendChoice::Auto:
      break;
  }
  if (mountsOut) *mountsOut = std::move(ms);
  if (haveV1) return CgroupVersion::V1;
  if (haveV2) return CgroupVersion::V2;
  return Error{"no cgroup hierarchy is mounted under /sys/fs/cgroup"};
}

Result<std::unique_ptr<SandboxCgroup>> createSandboxCgroupDirs(CgroupVersion v, const std::string& parent,
                                                                const CgroupLimits& limits, std::vector<cgroupfs::Mount> mounts) {
  uint32_t rnd = 0;
  if (::getrandom(&rnd, sizeof(rnd), 0) != sizeof(rnd)) rnd = static_cast<uint32_t>(::getpid() * 2654435761u);
  char leaf[64];
  std::snprintf(leaf, sizeof(leaf), "box-%d-%08x", static_cast<int>(::getpid()), rnd);
  return v == CgroupVersion::V1 ? createCgroupDirsV1(parent, leaf, limits, std::move(mounts))
                                : createCgroupDirsV2(parent, leaf, limits);
}

Result<std::unique_ptr<SandboxCgroup>> createSandboxCgroup(CgroupVersion v, const std::string& parent,
                                                            const CgroupLimits& limits) {
  auto cg = createSandboxCgroupDirs(v, parent, limits);
  if (!cg) return cg;
  if (auto st = (*cg)->applyLimits(limits); !st) return st.error();  // the destructor removes it
  return cg;
}

Result<int> cleanupCgroupParent(CgroupVersion v, const std::string& parent) {
  return v == CgroupVersion::V1 ? cleanupCgroupV1(parent) : cleanupCgroupV2(parent);
}

}  // namespace akad::box
