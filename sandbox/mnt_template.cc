#include "sandbox/mnt_template.h"

#include <dirent.h>
#include <fcntl.h>
#include <sched.h>
#include <sys/file.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <string>

#include "sandbox/cache_dir.h"
#include "sandbox/cgroup.h"
#include "sandbox/mnt.h"

#ifndef NSFS_MAGIC
#define NSFS_MAGIC 0x6e736673
#endif

namespace akad::box {
namespace {

// statx's unique mount id (Linux 6.8); Debian 12's headers predate it.
constexpr unsigned kStatxMountIdUnique = 0x00004000U;

constexpr const char* kFormat = "akabox mount template 3";  // 2: /dev in the template; 3: mounts by id
constexpr int kMaxTemplates = 32;

struct MountPoint {
  std::string dst;
  bool dir = true;
};

// The mount points the template's read-only root must already hold: those of the per-sandbox
// mounts (mnt.h's mountPerSandbox, same order) that do not lie inside an earlier one, whose
// own file system takes them at spawn time.
std::vector<MountPoint> templateMountPoints(const SandboxSpec& spec) {
  std::vector<MountPoint> all = {{"/proc", true}, {"/tmp", true}};
  for (const auto& t : spec.tmpfs) all.push_back({t.dst, true});
  if (!spec.workspace.empty()) all.push_back({"/workspace", true});
  for (const auto& b : spec.binds) {
    struct stat st {};
    if (::stat(b.src.c_str(), &st) != 0) continue;  // the spawn reports it
    all.push_back({b.dst, S_ISDIR(st.st_mode)});
  }
  std::vector<MountPoint> out;
  for (size_t i = 0; i < all.size(); ++i) {
    bool inside = false;
    for (size_t j = 0; j < i && !inside; ++j)
      inside = all[i].dst == all[j].dst || all[i].dst.rfind(all[j].dst + "/", 0) == 0;
    if (!inside) out.push_back(all[i]);
  }
  return out;
}

// The whole mount table less the templates themselves (their making changes it).
std::string mountTableLessTemplates(const std::string& dir) {
  std::string out;
  auto read = cgroupfs::readFile("/proc/self/mountinfo");
  const std::string table = read ? *read : std::string();
  const std::string own = " " + dir + "/";
  size_t pos = 0;
  while (pos < table.size()) {
    size_t end = table.find('\n', pos);
    if (end == std::string::npos) end = table.size();
    std::string line = table.substr(pos, end - pos);
    if (line.find(own) == std::string::npos) out += line + "\n";
    pos = end + 1;
  }
  return out;
}

// What the template is built from, on the host: for every system directory and /etc entry
// the root copies or binds, the mount it lies on and its device, inode, mode, size and mtime.
// The mount is its unique id (statx, Linux 6.8+; never reused): a mount put over such a path,
// or the one under it replaced, changes it, while mounts elsewhere on the host do not. A
// prepared root's entries are found by reading the directory, and a kernel without unique
// ids reuses them: there the whole mount table (less the templates) stands in for the ids,
// read from /proc at 0.1 ms a spawn.
std::string hostFingerprint(const SandboxSpec& spec, const std::string& dir) {
  std::string out;
  bool mountIds = spec.root == "host";
  for (const auto& p : staticRootHostPaths(spec)) {
    struct statx sx {};
    char b[200];
    if (::statx(AT_FDCWD, p.c_str(), AT_SYMLINK_NOFOLLOW | AT_NO_AUTOMOUNT, STATX_BASIC_STATS | kStatxMountIdUnique, &sx) != 0) {
      std::snprintf(b, sizeof b, "-\n");
    } else {
      if (!(sx.stx_mask & kStatxMountIdUnique)) mountIds = false;
      std::snprintf(b, sizeof b, "%llu:%u:%u:%llu:%o:%llu:%lld.%u\n", static_cast<unsigned long long>(sx.stx_mnt_id),
                    sx.stx_dev_major, sx.stx_dev_minor, static_cast<unsigned long long>(sx.stx_ino), sx.stx_mode,
                    static_cast<unsigned long long>(sx.stx_size), static_cast<long long>(sx.stx_mtime.tv_sec),
                    sx.stx_mtime.tv_nsec);
    }
    out += p + "=" + b;
  }
  if (!mountIds) out += mountTableLessTemplates(dir);
  return out;
}

std::string layoutOf(const SandboxSpec& spec, const std::vector<DevicePassthrough>& devices, const std::vector<MountPoint>& points) {
  std::string out = std::string(kFormat) + "\nroot=" + spec.root + "\nuid=" + std::to_string(spec.uid) +
                    "\ngid=" + std::to_string(spec.gid) + "\nworkspace=" + (spec.workspace.empty() ? "no" : "yes") + "\n";
  for (const auto& p : points) out += (p.dir ? "dir " : "file ") + p.dst + "\n";
  for (const auto& d : devices) out += "device " + d.sandboxPath + "\n";
  return out;
}

Status templateDirOk(const std::string& dir) {
  if (trustedCacheDir(dir, true)) return {};
  return Error{"template directory '" + dir + "' cannot be created, or is not a directory owned by root and writable by root only"};
}

// The kept namespace at `path`, or an invalid fd if there is none (a plain file is not one).
UniqueFd openKept(const std::string& path) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
  struct statfs sf {};
  if (fd.valid() && (::fstatfs(fd.get(), &sf) != 0 || static_cast<unsigned long>(sf.f_type) != NSFS_MAGIC)) fd.reset();
  return fd;
}

bool writeAllTo(int fd, const std::string& s) { return ::write(fd, s.data(), s.size()) == static_cast<ssize_t>(s.size()); }

// In a child with a fresh mount namespace: the static root with its /dev, their mount
// points, the host's tree detached, and both file systems read-only for every copy.
Status buildTemplate(const SandboxSpec& spec, const std::vector<DevicePassthrough>& devices, const std::vector<MountPoint>& points) {
  if (::unshare(CLONE_NEWNS) != 0) return errnoError("unshare(CLONE_NEWNS)");
  if (auto st = pivotToStaticRoot(spec); !st) return st;
  if (auto st = makeStaticDev(devices); !st) return st;
  for (const auto& p : points)
    if (auto st = makeMountPoint(p.dst, p.dir); !st) return st;
  if (auto st = detachOldRoot(); !st) return st;
  // Without MS_BIND the remount reaches the superblock: no copy can be made writable again.
  if (::mount(nullptr, "/dev", nullptr, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NOEXEC, nullptr) != 0)
    return errnoError("remounting the template's /dev read-only");
  if (::mount(nullptr, "/", nullptr, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV, nullptr) != 0)
    return errnoError("remounting the template's root read-only");
  return {};
}

// Builds the template in a child and keeps its namespace at `path` (a bind of the child's
// /proc/PID/ns/mnt); the caller holds the directory's lock.
Status makeTemplate(const SandboxSpec& spec, const std::vector<DevicePassthrough>& devices, const std::vector<MountPoint>& points,
                    const std::string& path) {
  int up[2], down[2];
  if (::pipe2(up, O_CLOEXEC) != 0) return errnoError("pipe");
  if (::pipe2(down, O_CLOEXEC) != 0) {
    ::close(up[0]);
    ::close(up[1]);
    return errnoError("pipe");
  }
  UniqueFd upRead(up[0]), upWrite(up[1]), downRead(down[0]), downWrite(down[1]);
  pid_t pid = ::fork();
  if (pid < 0) return errnoError("fork (mount template)");
  if (pid == 0) {
    upRead.reset();
    downWrite.reset();
    ::umask(0);  // the same modes as a root built in the init
    Status st = buildTemplate(spec, devices, points);
    (void)writeAllTo(upWrite.get(), st ? std::string("R") : "E" + st.error().message);
    char c;
    while (::read(downRead.get(), &c, 1) > 0) {
    }
    ::_exit(st ? 0 : 1);
  }
  upWrite.reset();
  downRead.reset();
  char buf[600];
  ssize_t n = ::read(upRead.get(), buf, sizeof buf);
  Status result;
  if (n <= 0) result = Error{"the process building the mount template died"};
  else if (buf[0] != 'R') result = Error{std::string(buf + 1, static_cast<size_t>(n - 1))};
  if (result) {
    ::unlink(path.c_str());  // a plain file left by an interrupted build
    UniqueFd file(::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600));
    std::string ns = "/proc/" + std::to_string(pid) + "/ns/mnt";
    if (!file.valid()) result = errnoError("cannot create '" + path + "'");
    else if (::mount(ns.c_str(), path.c_str(), nullptr, MS_BIND, nullptr) != 0) {
      result = errnoError("cannot keep the template's namespace at '" + path + "'");
      ::unlink(path.c_str());
    }
  }
  downWrite.reset();  // the builder exits; its namespace lives on in the bind
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return result;
}

// Unmounts and removes the templates in `dir` whose name starts with `prefix`, but `keep`.
int removeTemplates(const std::string& dir, const std::string& prefix, const std::string& keep) {
  int removed = 0;
  DIR* d = ::opendir(dir.c_str());
  if (!d) return 0;
  while (dirent* e = ::readdir(d)) {
    std::string n = e->d_name;
    if (n[0] == '.' || n == keep || n.rfind(prefix, 0) != 0) continue;
    std::string p = dir + "/" + n;
    ::umount2(p.c_str(), MNT_DETACH | UMOUNT_NOFOLLOW);
    if (::unlink(p.c_str()) == 0) ++removed;
  }
  ::closedir(d);
  return removed;
}

int countTemplates(const std::string& dir) {
  int n = 0;
  DIR* d = ::opendir(dir.c_str());
  if (!d) return 0;
  while (dirent* e = ::readdir(d))
    if (e->d_name[0] != '.') ++n;
  ::closedir(d);
  return n;
}

}  // namespace

std::string mountTemplateDir() {
  const char* d = std::getenv("AKABOX_TEMPLATE_DIR");
  return (d && *d) ? d : "/run/akabox/templates";
}

namespace {

// A template's name: its layout's key, then the key of the layout with the host's state.
std::string templateName(const std::string& layout, const std::string& layoutKey, const SandboxSpec& spec,
                         const std::string& dir) {
  return layoutKey + "-" + fnv1aHex(layout + hostFingerprint(spec, dir));
}

std::string lastLink(const std::string& layoutKey) { return ".last-" + layoutKey; }

// The name `.last-<layout key>` points to, if it is a plain template name.
std::string readLast(const std::string& dir, const std::string& layoutKey) {
  char buf[128];
  ssize_t n = ::readlink((dir + "/" + lastLink(layoutKey)).c_str(), buf, sizeof buf);
  if (n <= 0 || n >= static_cast<ssize_t>(sizeof buf)) return {};
  std::string name(buf, static_cast<size_t>(n));
  if (name[0] == '.' || name.find('/') != std::string::npos) return {};
  return name;
}

// Points `.last-<layout key>` at `name` (a new link renamed over the old one).
void writeLast(const std::string& dir, const std::string& layoutKey, const std::string& name) {
  const std::string link = dir + "/" + lastLink(layoutKey);
  const std::string tmp = link + ".new" + std::to_string(::getpid());
  ::unlink(tmp.c_str());
  if (::symlink(name.c_str(), tmp.c_str()) != 0 || ::rename(tmp.c_str(), link.c_str()) != 0) ::unlink(tmp.c_str());
}

// Removes every `.last-*` link in `dir`.
void removeLastLinks(const std::string& dir) {
  DIR* d = ::opendir(dir.c_str());
  if (!d) return;
  while (dirent* e = ::readdir(d))
    if (std::strncmp(e->d_name, ".last-", 6) == 0) ::unlinkat(::dirfd(d), e->d_name, 0);
  ::closedir(d);
}

}  // namespace

LastMountTemplate openLastMountTemplate(const SandboxSpec& spec, const std::vector<DevicePassthrough>& devices) {
  LastMountTemplate t;
  std::string dir = mountTemplateDir();
  if (!templateDirOk(dir)) return t;
  std::string layout = layoutOf(spec, devices, templateMountPoints(spec));
  std::string name = readLast(dir, fnv1aHex(layout));
  if (name.empty()) return t;
  t.fd = openKept(dir + "/" + name);
  if (!t.fd.valid()) return t;
  t.name = std::move(name);
  t.layout = std::move(layout);
  t.dir = std::move(dir);
  return t;
}

bool mountTemplateCurrent(const SandboxSpec& spec, const LastMountTemplate& t) {
  return templateName(t.layout, fnv1aHex(t.layout), spec, t.dir) == t.name;
}

Result<UniqueFd> openMountTemplate(const SandboxSpec& spec, const std::vector<DevicePassthrough>& devices) {
  const std::string dir = mountTemplateDir();
  if (auto st = templateDirOk(dir); !st) return Error{"mount template: " + st.error().message};
  auto points = templateMountPoints(spec);
  const std::string layout = layoutOf(spec, devices, points);
  const std::string layoutKey = fnv1aHex(layout);
  const std::string name = templateName(layout, layoutKey, spec, dir);
  const std::string path = dir + "/" + name;
  if (UniqueFd fd = openKept(path); fd.valid()) {
    if (readLast(dir, layoutKey) != name) writeLast(dir, layoutKey, name);
    return fd;
  }

  UniqueFd lock(::open((dir + "/.lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600));
  if (!lock.valid()) return errnoError("mount template: cannot open the lock in '" + dir + "'");
  while (::flock(lock.get(), LOCK_EX) != 0)
    if (errno != EINTR) return errnoError("mount template: flock");
  if (UniqueFd fd = openKept(path); fd.valid()) return fd;  // another akabox made it meanwhile
  if (auto st = makeTemplate(spec, devices, points, path); !st) return Error{"mount template: " + st.error().message};
  // Templates of the same layout built from an older state of the host are stale now. Many
  // layouts in use (specs with ever new bind targets) would pile up: past kMaxTemplates, all
  // but the new one go, and the layouts still in use are rebuilt on their next run.
  removeTemplates(dir, layoutKey + "-", name);
  if (countTemplates(dir) > kMaxTemplates) removeTemplates(dir, "", name);
  UniqueFd fd = openKept(path);
  if (!fd.valid()) return Error{"mount template: '" + path + "' is not a kept mount namespace"};
  writeLast(dir, layoutKey, name);
  return fd;
}

Status enterMountTemplate(const SandboxSpec& spec, const std::vector<DevicePassthrough>& devices, int templateNsFd) {
  // Detached copies of every host path the sandbox binds, with their flags set before they
  // are attached; the binder below takes them in the order mountPerSandbox asks for them.
  struct Tree {
    std::string src;
    UniqueFd fd;
    bool dir = true;
  };
  std::vector<Tree> trees;
  for (const auto& src : perSandboxBindSources(spec, devices)) {
    UniqueFd fd(static_cast<int>(::open_tree(AT_FDCWD, src.c_str(), OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC)));
    if (!fd.valid()) return errnoError("bind source '" + src + "' does not exist or is not reachable");
    struct stat st {};
    if (::fstat(fd.get(), &st) != 0) return errnoError("fstat of bind source '" + src + "'");
    trees.push_back({src, std::move(fd), S_ISDIR(st.st_mode)});
  }
  if (::setns(templateNsFd, CLONE_NEWNS) != 0) return errnoError("setns(mount template)");
  if (::unshare(CLONE_NEWNS) != 0) return errnoError("unshare(CLONE_NEWNS) from the mount template");
  if (::chdir("/") != 0) return errnoError("chdir(/) in the mount template");
  size_t next = 0;
  HostBinder attach = [&](const std::string& src, const std::string& dst, bool rw, unsigned long extra) -> Status {
    if (next >= trees.size() || trees[next].src != src) return Error{"internal: bind of '" + src + "' out of order"};
    Tree& t = trees[next++];
    mount_attr attr{};
    attr.attr_set = (rw ? 0 : MOUNT_ATTR_RDONLY) | ((extra & MS_NOSUID) ? MOUNT_ATTR_NOSUID : 0) |
                    ((extra & MS_NODEV) ? MOUNT_ATTR_NODEV : 0) | ((extra & MS_NOEXEC) ? MOUNT_ATTR_NOEXEC : 0);
    if (::mount_setattr(t.fd.get(), "", AT_EMPTY_PATH, &attr, sizeof attr) != 0)
      return errnoError("mount_setattr('" + src + "')");
    if (auto st = makeMountPoint(dst, t.dir); !st) return st;
    // Like mount(2) in the full build, follow a symlink at the destination (resolved in the
    // sandbox's root, which is set up by the host: /usr/local/cuda -> cuda-13.0).
    if (::move_mount(t.fd.get(), "", AT_FDCWD, dst.c_str(), MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_SYMLINKS) != 0)
      return errnoError("move_mount('" + src + "' to '" + dst + "')");
    t.fd.reset();
    return {};
  };
  return mountPerSandbox(spec, devices, attach, {true});
}

Result<int> removeMountTemplates() {
  const std::string dir = mountTemplateDir();
  struct stat st {};
  if (::lstat(dir.c_str(), &st) != 0) return 0;
  if (auto s = templateDirOk(dir); !s) return s.error();
  removeLastLinks(dir);
  return removeTemplates(dir, "", "");
}

}  // namespace akad::box
