#include "sandbox/spare_ns.h"

#include <dirent.h>
#include <fcntl.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "sandbox/net.h"

namespace akad::box::spare {
namespace {

struct Kind {
  const char* name;
  int flag;
};
constexpr Kind kKinds[] = {{"net", CLONE_NEWNET}, {"ipc", CLONE_NEWIPC}, {"uts", CLONE_NEWUTS}};

bool closedToOthers(int fd) {
  struct stat st {};
  return ::fstat(fd, &st) == 0 && S_ISDIR(st.st_mode) && st.st_uid == 0 && (st.st_mode & 077) == 0;
}

// Enters the namespace of kind `k` kept in `m` (the spare's mount directory).
bool enter(int m, const Kind& k) {
  int fd = ::openat(m, k.name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return false;
  const bool ok = ::setns(fd, k.flag) == 0;  // refuses a file of another kind
  ::close(fd);
  return ok;
}

// Unmounts `<name>/m` and removes what is left of the spare `name` in `dir`.
void removeSpare(int dir, const char* name) {
  char path[96];
  std::snprintf(path, sizeof path, "%s/m", name);
  int d = ::openat(dir, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (d >= 0) {
    // Through /proc/self/fd: umount2 takes a path, and this one must not be followed anywhere else.
    char self[64];
    std::snprintf(self, sizeof self, "/proc/self/fd/%d/m", d);
    (void)::umount2(self, MNT_DETACH | UMOUNT_NOFOLLOW);
    for (const Kind& k : kKinds) {
      char file[96];
      std::snprintf(file, sizeof file, "m/%s", k.name);
      (void)::unlinkat(d, file, 0);
    }
    (void)::unlinkat(d, "m", AT_REMOVEDIR);
    ::close(d);
  }
  (void)::unlinkat(dir, name, AT_REMOVEDIR);
}

}  // namespace

std::string directoryFor(const std::string& templateDir) { return templateDir + "/.spare-ns"; }

int openDirectory(const char* templateDir, const char* spareDir, bool create) {
  if (create) {
    int parent = ::open(templateDir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (parent < 0) return -1;
    const bool trusted = closedToOthers(parent);
    if (trusted) (void)::mkdirat(parent, ".spare-ns", 0700);
    ::close(parent);
    if (!trusted) return -1;
  }
  int fd = ::open(spareDir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd >= 0 && !closedToOthers(fd)) {
    ::close(fd);
    return -1;
  }
  return fd;
}

bool claim(int dir, char* claimed) {
  const long tid = ::syscall(SYS_gettid);
  for (int slot = 0; slot < kSlots; ++slot) {
    char from[16];
    std::snprintf(from, sizeof from, "%d", slot);
    std::snprintf(claimed, 64, ".claimed-%ld-%d", tid, slot);
    if (::renameat2(dir, from, dir, claimed, RENAME_NOREPLACE) != 0) continue;  // empty slot, or taken
    char m[80];
    std::snprintf(m, sizeof m, "%s/m", claimed);
    int md = ::openat(dir, m, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    bool entered = md >= 0;
    for (const Kind& k : kKinds) entered = entered && enter(md, k);
    if (md >= 0) ::close(md);
    if (entered) return true;
    // Not a whole spare (the thread may be in some of its namespaces now: the caller makes
    // fresh ones for all three then).
    removeSpare(dir, claimed);
  }
  return false;
}

void discard(int dir, const char* claimed) { removeSpare(dir, claimed); }

void make(int dir) {
  char slot[16];
  int free = -1;
  for (int i = 0; i < kSlots && free < 0; ++i) {
    std::snprintf(slot, sizeof slot, "%d", i);
    struct stat st {};
    if (::fstatat(dir, slot, &st, AT_SYMLINK_NOFOLLOW) != 0 && errno == ENOENT) free = i;
  }
  if (free < 0) return;  // the pool is full

  char tmp[64], m[80];
  std::snprintf(tmp, sizeof tmp, ".new-%ld", ::syscall(SYS_gettid));
  std::snprintf(m, sizeof m, "%s/m", tmp);
  removeSpare(dir, tmp);  // one left by a process of the same id that was killed meanwhile
  if (::mkdirat(dir, tmp, 0700) != 0 || ::mkdirat(dir, m, 0700) != 0) return removeSpare(dir, tmp);
  char path[128];
  std::snprintf(path, sizeof path, "/proc/self/fd/%d/%s", dir, m);
  // `m` becomes a mount of its own (private: what is bound inside stays here), so that one
  // lazy unmount takes the spare's binds with it.
  if (::mount(path, path, nullptr, MS_BIND, nullptr) != 0 || ::mount(nullptr, path, nullptr, MS_PRIVATE, nullptr) != 0)
    return removeSpare(dir, tmp);
  if (::unshare(CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS) != 0 || bringLoopbackUp() != nullptr) return removeSpare(dir, tmp);
  for (const Kind& k : kKinds) {
    char file[160], ns[64];
    std::snprintf(file, sizeof file, "%s/%s", path, k.name);
    std::snprintf(ns, sizeof ns, "/proc/thread-self/ns/%s", k.name);
    int f = ::open(file, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (f < 0) return removeSpare(dir, tmp);
    ::close(f);
    if (::mount(ns, file, nullptr, MS_BIND, nullptr) != 0) return removeSpare(dir, tmp);
  }
  for (int i = free; i < kSlots; ++i) {
    std::snprintf(slot, sizeof slot, "%d", i);
    if (::renameat2(dir, tmp, dir, slot, RENAME_NOREPLACE) == 0) return;
  }
  removeSpare(dir, tmp);  // the slots filled up meanwhile
}

int removeSpares(const std::string& templateDir) {
  const std::string path = directoryFor(templateDir);
  int dir = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (dir < 0) return 0;
  int removed = 0;
  if (DIR* d = ::fdopendir(::dup(dir))) {
    std::vector<std::string> names;
    while (dirent* e = ::readdir(d))
      if (std::strcmp(e->d_name, ".") != 0 && std::strcmp(e->d_name, "..") != 0) names.emplace_back(e->d_name);
    ::closedir(d);
    for (const auto& n : names) {
      removeSpare(dir, n.c_str());
      ++removed;
    }
  }
  ::close(dir);
  (void)::rmdir(path.c_str());
  return removed;
}

}  // namespace akad::box::spare
