#include "sandbox/mnt.h"

#include <dirent.h>
#include <fcntl.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <string>
#include <vector>

#include "common/unique_fd.h"
#include "sandbox/etc_copy.h"

namespace akad::box {
namespace {

// The host's tree stays reachable here until it is detached at the end of set-up.
constexpr const char* kOldRoot = "/.oldroot";
constexpr const char* kStaging = "/tmp";

const char* const kHostSystemDirs[] = {"usr", "bin", "sbin", "lib", "lib32", "lib64", "libx32", "opt"};
// /etc is not bound whole (etc_copy.h copies its small files); directories with many entries
// (alternatives: hundreds of symlinks) are cheaper to bind.
const char* const kEtcBound[] = {"alternatives", "ssl", "ca-certificates"};

Status sysMount(const char* src, const std::string& dst, const char* type, unsigned long flags, const char* data) {
  if (::mount(src, dst.c_str(), type, flags, data) != 0)
    return errnoError(std::string("mount(") + (src ? src : "none") + ", " + dst + ", " + (type ? type : "none") +
                      ", flags=0x" + [&] { char b[32]; snprintf(b, sizeof b, "%lx", flags); return std::string(b); }() +
                      (data ? std::string(", ") + data : std::string()) + ")");
  return {};
}

Status makeDirsInRoot(const std::string& path, mode_t mode = 0755) {
  for (size_t pos = 1; pos <= path.size(); ++pos) {
    if (pos != path.size() && path[pos] != '/') continue;
    std::string sub = path.substr(0, pos);
    if (::mkdir(sub.c_str(), mode) != 0 && errno != EEXIST) return errnoError("cannot create directory '" + sub + "' in the sandbox root");
  }
  return {};
}

}  // namespace

Status makeMountPoint(const std::string& dst, bool dir) {
  struct stat existing {};
  if (::lstat(dst.c_str(), &existing) == 0) return {};  // a template's read-only root has its mount points
  if (dir) return makeDirsInRoot(dst);
  if (auto st = makeDirsInRoot(dst.substr(0, dst.rfind('/'))); !st) return st;
  int fd = ::open(dst.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return errnoError("cannot create mount point '" + dst + "' in the sandbox");
  ::close(fd);
  return {};
}

namespace {

// Binds host path `src` (as seen under the old root) at `dst`. Read-only binds need a second
// remount: MS_RDONLY is ignored on the initial MS_BIND.
Status bindMount(const std::string& hostSrc, const std::string& dst, bool rw, unsigned long extra = MS_NOSUID | MS_NODEV) {
  std::string src = std::string(kOldRoot) + hostSrc;
  struct stat st {};
  if (::stat(src.c_str(), &st) != 0) return errnoError("bind source '" + hostSrc + "' does not exist or is not reachable");
  if (auto s = makeMountPoint(dst, S_ISDIR(st.st_mode)); !s) return s;
  if (auto s = sysMount(src.c_str(), dst, nullptr, MS_BIND, nullptr); !s) return s;
  return sysMount(nullptr, dst, nullptr, MS_REMOUNT | MS_BIND | extra | (rw ? 0 : MS_RDONLY), nullptr);
}

// A symlink in the host root (/bin -> usr/bin on merged-/usr systems) is recreated, not bound.
Status copySymlinkOrBind(const std::string& hostPath, const std::string& dst) {
  std::string src = std::string(kOldRoot) + hostPath;
  struct stat st {};
  if (::lstat(src.c_str(), &st) != 0) return {};  // absent on this host: skip
  if (S_ISLNK(st.st_mode)) {
    char target[4096];
    ssize_t n = ::readlink(src.c_str(), target, sizeof(target) - 1);
    if (n < 0) return errnoError("readlink('" + hostPath + "')");
    target[n] = '\0';
    if (::symlink(target, dst.c_str()) != 0 && errno != EEXIST) return errnoError("symlink('" + dst + "')");
    return {};
  }
  if (!S_ISDIR(st.st_mode) && !S_ISREG(st.st_mode)) return {};
  return bindMount(hostPath, dst, false);
}

// /etc (its files copied here, or by `etcBeside` beside the rest: the copy starts first), the
// system directories and /etc's bound directories.
Status mountHostSystem(const SandboxSpec& spec, EtcCopy* etcBeside) {
  if (::mkdir("/etc", 0755) != 0) return errnoError("mkdir /etc in the sandbox root");
  UniqueFd src(::open((std::string(kOldRoot) + "/etc").c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (!src.valid()) return errnoError("open the host's /etc");
  UniqueFd dst(::open("/etc", O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (!dst.valid()) return errnoError("open /etc in the sandbox root");
  if (etcBeside) {
    if (auto st = etcBeside->start(std::move(src), std::move(dst)); !st) return st;
  } else {
    std::vector<std::string> toBind;
    std::atomic<size_t> next{0};
    if (auto st = copyEtc(spec, src.get(), dst.get(), toBind, next); !st) return st;
    for (const auto& p : toBind)
      if (auto st = bindMount(p, p, false); !st) return st;
  }
  for (const char* d : kHostSystemDirs)
    if (auto st = copySymlinkOrBind(std::string("/") + d, std::string("/") + d); !st) return st;
  for (const char* e : kEtcBound)
    if (auto st = copySymlinkOrBind(std::string("/etc/") + e, std::string("/etc/") + e); !st) return st;
  return {};
}

// A prepared root: every top-level entry is bound read-only (or its symlink recreated); the
// directories akabox provides itself are skipped.
Status mountPreparedRoot(const std::string& root) {
  std::string dir = std::string(kOldRoot) + root;
  DIR* d = ::opendir(dir.c_str());
  if (!d) return errnoError("cannot open root directory '" + root + "'");
  Status result;
  while (dirent* e = ::readdir(d)) {
    std::string n = e->d_name;
    if (n == "." || n == ".." || n == "proc" || n == "dev" || n == "tmp" || n == "workspace" || n == ".oldroot") continue;
    if (auto st = copySymlinkOrBind(root + "/" + n, "/" + n); !st) {
      result = st;
      break;
    }
  }
  ::closedir(d);
  return result;
}

Status mountTmpfs(const std::string& dst, uint64_t size, bool hugePages = false) {
  if (auto st = makeDirsInRoot(dst); !st) return st;
  std::string data = "mode=1777";
  if (size) data += ",size=" + std::to_string(size);
  if (hugePages) data += ",huge=within_size";
  return sysMount("tmpfs", dst, "tmpfs", MS_NOSUID | MS_NODEV, data.c_str());
}

}  // namespace

Status makeStaticDev(const std::vector<DevicePassthrough>& devices) {
  if (auto st = makeDirsInRoot("/dev"); !st) return st;
  if (auto st = sysMount("tmpfs", "/dev", "tmpfs", MS_NOSUID | MS_NOEXEC, "mode=0755,size=512k"); !st) return st;
  struct Node {
    const char* name;
    unsigned maj, min;
  };
  // mknod is cheaper than one bind mount per node; the device cgroup allows exactly these.
  for (const Node& n : {Node{"null", 1, 3}, Node{"zero", 1, 5}, Node{"full", 1, 7}, Node{"random", 1, 8},
                        Node{"urandom", 1, 9}, Node{"tty", 5, 0}}) {
    std::string p = std::string("/dev/") + n.name;
    if (::mknod(p.c_str(), S_IFCHR | 0666, makedev(n.maj, n.min)) != 0) return errnoError("mknod(" + p + ")");
  }
  if (::mkdir("/dev/pts", 0755) != 0 || ::mkdir("/dev/shm", 01777) != 0) return errnoError("mkdir /dev/pts, /dev/shm");
  struct Link {
    const char* target;
    const char* path;
  };
  for (const Link& l : {Link{"pts/ptmx", "/dev/ptmx"}, Link{"/proc/self/fd", "/dev/fd"}, Link{"/proc/self/fd/0", "/dev/stdin"},
                        Link{"/proc/self/fd/1", "/dev/stdout"}, Link{"/proc/self/fd/2", "/dev/stderr"}})
    if (::symlink(l.target, l.path) != 0) return errnoError(std::string("symlink(") + l.path + ")");
  for (const auto& d : devices)
    if (auto st = makeMountPoint(d.sandboxPath, false); !st) return st;
  return {};
}

Status pivotToStaticRoot(const SandboxSpec& spec, const std::function<Status()>& rooted, EtcCopy* etcBeside) {
  // Nothing we mount may propagate back to the host, and nothing the host mounts later
  // should appear in the sandbox.
  if (auto st = sysMount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr); !st) return st;
  // The new root is a tmpfs; pivot_root needs it to be a mount point. It is mounted over the
  // host's /tmp only inside this namespace, and after pivot_root the whole host tree
  // (including the real /tmp) is reachable under /.oldroot for the binds.
  if (auto st = sysMount("tmpfs", kStaging, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=4m"); !st) return st;
  std::string put = std::string(kStaging) + kOldRoot;
  if (::mkdir(put.c_str(), 0700) != 0) return errnoError("mkdir " + put);
  if (::syscall(SYS_pivot_root, kStaging, put.c_str()) != 0) return errnoError(std::string("pivot_root(") + kStaging + ", " + put + ")");
  if (::chdir("/") != 0) return errnoError("chdir(/) after pivot_root");
  if (rooted)
    if (auto st = rooted(); !st) return st;
  if (spec.root == "host") return mountHostSystem(spec, etcBeside);
  return mountPreparedRoot(spec.root);
}

Status detachOldRoot() {
  if (::umount2(kOldRoot, MNT_DETACH) != 0) return errnoError(std::string("umount2(") + kOldRoot + ", MNT_DETACH)");
  if (::rmdir(kOldRoot) != 0) return errnoError(std::string("rmdir(") + kOldRoot + ")");
  return {};
}

std::vector<std::string> staticRootHostPaths(const SandboxSpec& spec) {
  std::vector<std::string> out;
  if (spec.root != "host") return {spec.root};
  for (const char* d : kHostSystemDirs) out.push_back(std::string("/") + d);
  for (const std::string& e : etcCopiedPaths()) out.push_back(e);
  for (const char* e : kEtcBound) out.push_back(std::string("/etc/") + e);
  return out;
}

std::vector<std::string> perSandboxBindSources(const SandboxSpec& spec, const std::vector<DevicePassthrough>& devices) {
  std::vector<std::string> out;
  for (const auto& d : devices) out.push_back(d.hostPath);
  if (!spec.workspace.empty()) out.push_back(spec.workspace);
  for (const auto& b : spec.binds) out.push_back(b.src);
  return out;
}

namespace {
// A fresh proc for the new pid namespace: the sandbox sees its own processes only.
Status mountProc() { return sysMount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, nullptr); }
}  // namespace

Status enterBuiltMountNamespace(int nsFd) {
  if (::setns(nsFd, CLONE_NEWNS) != 0) return errnoError("setns(the sandbox's mount namespace)");
  if (::chdir("/") != 0) return errnoError("chdir(/) in the sandbox's mount namespace");
  return mountProc();
}

namespace {
// Whether a bind or tmpfs of the spec is mounted at a destination that `at` accepts.
template <typename Pred>
bool anyMountAt(const SandboxSpec& spec, Pred at) {
  for (const auto& b : spec.binds)
    if (at(b.dst)) return true;
  for (const auto& t : spec.tmpfs)
    if (at(t.dst)) return true;
  return false;
}
}  // namespace

bool mountsUnderProc(const SandboxSpec& spec) {
  return anyMountAt(spec, [](const std::string& dst) { return dst == "/proc" || dst.rfind("/proc/", 0) == 0; });
}

namespace {
Status bindWorkspace(const SandboxSpec& spec, const HostBinder& bind) {
  return bind(spec.workspace, "/workspace", true, MS_NOSUID | MS_NODEV);
}
}  // namespace

Status mountPerSandbox(const SandboxSpec& spec, const std::vector<DevicePassthrough>& devices, const HostBinder& bind,
                       PerSandboxMounts how) {
  if (!how.staticDevMade)
    if (auto st = makeStaticDev(devices); !st) return st;
  if (auto st = sysMount("devpts", "/dev/pts", "devpts", MS_NOSUID | MS_NOEXEC, "newinstance,ptmxmode=0666,mode=0620"); !st) return st;
  if (auto st = sysMount("tmpfs", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777"); !st) return st;
  for (const auto& d : devices)
    if (auto st = bind(d.hostPath, d.sandboxPath, true, MS_NOSUID | MS_NOEXEC); !st) return st;
  if (auto st = makeDirsInRoot("/proc"); !st) return st;
  if (how.proc)
    if (auto st = mountProc(); !st) return st;
  if (auto st = mountTmpfs("/tmp", 0); !st) return st;
  for (const auto& t : spec.tmpfs)
    if (auto st = mountTmpfs(t.dst, t.sizeBytes, t.hugePages); !st) return st;
  if (!spec.workspace.empty() && !how.workspaceMade)
    if (auto st = bindWorkspace(spec, bind); !st) return st;
  for (const auto& b : spec.binds)
    if (auto st = bind(b.src, b.dst, b.rw, b.dev ? MS_NOSUID : MS_NOSUID | MS_NODEV); !st) return st;
  return {};
}

Status buildMountNamespace(const SandboxSpec& spec, const std::vector<DevicePassthrough>& devices,
                           const std::function<void()>& rooted, MountBuild how) {
  // The namespace can be entered as soon as the command's working directory and /proc's mount
  // point are there, right after the pivot, when that directory is the root or the workspace
  // (and nothing of the spec's is mounted on the workspace). Elsewhere, once the per-sandbox
  // mounts are done.
  const std::string cwd = commandCwd(spec);
  const bool workspaceCwd = cwd == "/workspace" && !spec.workspace.empty() && !anyMountAt(spec, [](const std::string& dst) { return dst == "/workspace"; });
  const bool enterEarly = how.enterable && (cwd == "/" || workspaceCwd);
  auto atRoot = [&]() -> Status {
    if (rooted) rooted();
    if (!enterEarly) return {};
    if (auto st = makeDirsInRoot("/proc"); !st) return st;
    if (workspaceCwd)
      if (auto st = bindWorkspace(spec, bindMount); !st) return st;
    how.enterable();
    return {};
  };
  EtcCopy etc(spec);
  if (auto st = pivotToStaticRoot(spec, atRoot, how.etcBeside ? &etc : nullptr); !st) return st;
  if (auto st = mountPerSandbox(spec, devices, bindMount, {false, how.proc, enterEarly && workspaceCwd}); !st) return st;
  if (how.enterable && !enterEarly) how.enterable();
  if (auto st = etc.finish(); !st) return st;
  for (const auto& p : etc.toBind())
    if (auto st = bindMount(p, p, false); !st) return st;
  if (auto st = detachOldRoot(); !st) return st;
  return sysMount(nullptr, "/", nullptr, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV, nullptr);
}

}  // namespace akad::box
