#include "sandbox/etc_copy.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <iterator>

#include "common/fd_copy.h"
#include "sandbox/helper_thread.h"

namespace akad::box {
namespace {

// /etc is not bound whole: only what programs need to run, resolve names and find libraries.
// Small files are copied into the root tmpfs rather than bound: every mount costs at set-up
// and again at tear-down, and these few KiB do not.
// The directory (the most files) and the largest file first: copies that run side by side
// take entries in this order (copyEtc).
const char* const kEtcCopied[] = {
    "ld.so.conf.d", "ld.so.cache", "hosts", "resolv.conf", "nsswitch.conf", "host.conf", "gai.conf",
    "ld.so.conf", "localtime", "timezone", "os-release", "protocols", "services", "debian_version",
    "lsb-release"};
constexpr off_t kMaxCopiedFile = 1 << 20;

// Copies /etc entry `name` (a file, a symlink, or a directory of small files: ld.so.conf.d)
// from the host's directory `src` into the root's directory `dst` (descriptors of both). A
// file too large to copy is bound instead: its path goes to `toBind` for the caller. `shown`
// is the entry's path, for messages.
Status copyEtcEntry(int src, int dst, const char* name, const std::string& shown, std::vector<std::string>& toBind,
                    int depth = 0) {
  struct stat st {};
  if (::fstatat(src, name, &st, AT_SYMLINK_NOFOLLOW) != 0) return {};  // absent on this host: skip
  if (S_ISLNK(st.st_mode)) {
    char target[4096];
    ssize_t n = ::readlinkat(src, name, target, sizeof(target) - 1);
    if (n < 0) return errnoError("readlink('" + shown + "')");
    target[n] = '\0';
    if (::symlinkat(target, dst, name) != 0 && errno != EEXIST) return errnoError("symlink('" + shown + "') in the sandbox root");
    return {};
  }
  if (S_ISDIR(st.st_mode) && depth == 0) {
    UniqueFd from(::openat(src, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (!from.valid()) return errnoError("open('" + shown + "')");
    if (::mkdirat(dst, name, 0755) != 0 && errno != EEXIST) return errnoError("mkdir('" + shown + "') in the sandbox root");
    UniqueFd to(::openat(dst, name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (!to.valid()) return errnoError("open('" + shown + "') in the sandbox root");
    DIR* d = ::fdopendir(from.get());
    if (!d) return errnoError("fdopendir('" + shown + "')");
    (void)from.release();  // the DIR owns it now
    Status result;
    while (dirent* e = ::readdir(d)) {
      if (std::strcmp(e->d_name, ".") == 0 || std::strcmp(e->d_name, "..") == 0) continue;
      if (auto s = copyEtcEntry(::dirfd(d), to.get(), e->d_name, shown + "/" + e->d_name, toBind, depth + 1); !s) {
        result = s;
        break;
      }
    }
    ::closedir(d);
    return result;
  }
  if (!S_ISREG(st.st_mode)) return {};
  if (st.st_size > kMaxCopiedFile) {
    toBind.push_back(shown);
    return {};
  }
  UniqueFd in(::openat(src, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
  if (!in.valid()) return errnoError("open('" + shown + "')");
  UniqueFd out(::openat(dst, name, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644));
  if (!out.valid()) return errnoError("create('" + shown + "') in the sandbox root");
  if (!copyFdBytes(out.get(), in.get(), st.st_size)) return errnoError("copying '" + shown + "' into the sandbox root");
  return {};
}

Status writeSmallFile(int dir, const char* name, const std::string& text) {
  UniqueFd fd(::openat(dir, name, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644));
  if (!fd.valid()) return errnoError(std::string("cannot create '/etc/") + name + "' in the sandbox");
  ssize_t n = ::write(fd.get(), text.data(), text.size());
  if (n != static_cast<ssize_t>(text.size())) return errnoError(std::string("cannot write '/etc/") + name + "'");
  return {};
}

}  // namespace

Status copyEtc(const SandboxSpec& spec, int src, int dst, std::vector<std::string>& toBind, std::atomic<size_t>& next) {
  constexpr size_t n = std::size(kEtcCopied);
  // Tools (getpass, ssh, Python's site) look the running uid up; give it a name and a home.
  const std::string home = spec.workspace.empty() ? "/tmp" : "/workspace";
  for (size_t i; (i = next.fetch_add(1)) < n + 2;) {
    Status st;
    if (i < n) st = copyEtcEntry(src, dst, kEtcCopied[i], std::string("/etc/") + kEtcCopied[i], toBind);
    else if (i == n)
      st = writeSmallFile(dst, "passwd", "root:x:0:0:root:/root:/usr/sbin/nologin\nakabox:x:" + std::to_string(spec.uid) + ":" +
                                             std::to_string(spec.gid) + ":akabox:" + home + ":/bin/sh\n");
    else st = writeSmallFile(dst, "group", "root:x:0:\nakabox:x:" + std::to_string(spec.gid) + ":\n");
    if (!st) return st;
  }
  return {};
}

std::vector<std::string> etcCopiedPaths() {
  std::vector<std::string> out;
  for (const char* e : kEtcCopied) out.push_back(std::string("/etc/") + e);
  return out;
}


Status EtcCopy::start(UniqueFd src, UniqueFd dst) {
  src_ = std::move(src);
  dst_ = std::move(dst);
  for (Part& p : parts_) {
    p.self = this;
    if (startHelperThread(&EtcCopy::run, &p, true, 256 * 1024) == 0) {
      p.started = true;
    } else if (p.result = copyEtc(spec_, src_.get(), dst_.get(), p.toBind, next_); !p.result) {
      return p.result;
    }
  }
  return {};
}

Status EtcCopy::finish() {
  Status outcome;
  for (Part& p : parts_) {
    if (p.started) waitForWord(p.done, false);
    p.started = false;
    if (outcome && !p.result) outcome = p.result;
  }
  src_.reset();
  dst_.reset();
  return outcome;
}

std::vector<std::string> EtcCopy::toBind() const {
  std::vector<std::string> all;
  for (const Part& p : parts_) all.insert(all.end(), p.toBind.begin(), p.toBind.end());
  return all;
}

void* EtcCopy::run(void* arg) {
  auto* p = static_cast<Part*>(arg);
  p->result = copyEtc(p->self->spec_, p->self->src_.get(), p->self->dst_.get(), p->toBind, p->self->next_);
  setWordAndWake(p->done);
  return nullptr;
}

}  // namespace akad::box
