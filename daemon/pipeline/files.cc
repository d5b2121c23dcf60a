#include "daemon/pipeline/files.h"

#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <fstream>
#include <memory>
#include <vector>

#include "common/fd_copy.h"
#include "common/unique_fd.h"

namespace fs = std::filesystem;

namespace akad {

Status copyModificationTime(const fs::path& from, const fs::path& path) {
  struct stat st {};
  if (::stat(from.c_str(), &st) != 0) return errnoError("cannot stat " + from.string());
  const struct timespec times[2] = {{0, UTIME_OMIT}, st.st_mtim};
  if (::utimensat(AT_FDCWD, path.c_str(), times, AT_SYMLINK_NOFOLLOW) != 0)
    return errnoError("cannot set the modification time of " + path.string());
  return {};
}

namespace {

// Deeper than any tree the pipeline copies; a bound on the recursion for trees others wrote.
constexpr int kMaxCopyDepth = 128;

struct DirCloser {
  void operator()(DIR* d) const { ::closedir(d); }
};

// The names in a folder open as `dirfd`, without . and ..
Result<std::vector<std::string>> namesIn(int dirfd, const fs::path& shown) {
  const int dupfd = ::fcntl(dirfd, F_DUPFD_CLOEXEC, 0);
  if (dupfd < 0) return errnoError("cannot list " + shown.string());
  std::unique_ptr<DIR, DirCloser> d(::fdopendir(dupfd));
  if (!d) {
    ::close(dupfd);
    return errnoError("cannot list " + shown.string());
  }
  std::vector<std::string> names;
  errno = 0;
  while (const dirent* de = ::readdir(d.get())) {
    const std::string n = de->d_name;
    if (n != "." && n != "..") names.push_back(n);
  }
  if (errno != 0) return errnoError("cannot list " + shown.string());
  return names;
}

// Replaces whatever is at `name` in `dstfd` unless it is a folder.
Status clearName(int dstfd, const std::string& name, const fs::path& shown) {
  if (::unlinkat(dstfd, name.c_str(), 0) != 0 && errno != ENOENT)
    return errnoError("cannot replace " + shown.string());
  return {};
}

// The regular file `name` in the folder open as `srcfd` to `dstName` in the one open as `dstfd`,
// replacing a file there; a link at either name is not followed.
Status copyFileAt(int srcfd, const std::string& name, int dstfd, const std::string& dstName, const fs::path& shown,
                  FileTimes times) {
  UniqueFd in(::openat(srcfd, name.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
  struct stat st {};
  if (!in.valid() || ::fstat(in.get(), &st) != 0) return errnoError("cannot open " + shown.string());
  if (!S_ISREG(st.st_mode)) return Error{shown.string() + " is not a regular file"};
  if (auto s = clearName(dstfd, dstName, shown); !s) return s;
  const mode_t mode = (st.st_mode & 0111) ? 0755 : 0644;
  UniqueFd out(::openat(dstfd, dstName.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode));
  if (!out.valid()) return errnoError("cannot create the copy of " + shown.string());
  if (!copyFdBytes(out.get(), in.get(), st.st_size)) return errnoError("cannot copy " + shown.string());
  if (::fchmod(out.get(), mode) != 0) return errnoError("cannot set the mode of the copy of " + shown.string());
  if (times == FileTimes::Kept) {
    const struct timespec keep[2] = {{0, UTIME_OMIT}, st.st_mtim};
    if (::futimens(out.get(), keep) != 0) return errnoError("cannot set the time of the copy of " + shown.string());
  }
  return {};
}

// Copies the folder open as `srcfd` into the one open as `dstfd`, never following a link on
// either side: a tree a sandbox wrote may hold links to anywhere, and what a trusted copy
// reads and writes must stay inside the two folders.
Status copyDirAt(int srcfd, int dstfd, const fs::path& shown, FileTimes times, int depth) {
  if (depth > kMaxCopyDepth) return Error{shown.string() + " is nested more than " + std::to_string(kMaxCopyDepth) + " deep"};
  auto names = namesIn(srcfd, shown);
  if (!names) return names.error();
  for (const std::string& name : *names) {
    const fs::path path = shown / name;
    struct stat st {};
    if (::fstatat(srcfd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) return errnoError("cannot stat " + path.string());
    if (S_ISLNK(st.st_mode)) {
      std::string target(PATH_MAX, '\0');
      const ssize_t n = ::readlinkat(srcfd, name.c_str(), target.data(), target.size());
      if (n < 0 || static_cast<size_t>(n) >= target.size()) return errnoError("cannot read the link " + path.string());
      target.resize(static_cast<size_t>(n));
      if (auto s = clearName(dstfd, name, path); !s) return s;
      if (::symlinkat(target.c_str(), dstfd, name.c_str()) != 0) return errnoError("cannot copy the link " + path.string());
    } else if (S_ISDIR(st.st_mode)) {
      if (::mkdirat(dstfd, name.c_str(), 0755) != 0 && errno != EEXIST) return errnoError("cannot create the copy of " + path.string());
      UniqueFd from(::openat(srcfd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
      UniqueFd to(::openat(dstfd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
      if (!from.valid() || !to.valid()) return errnoError("cannot open " + path.string() + " or its copy as a folder");
      if (auto s = copyDirAt(from.get(), to.get(), path, times, depth + 1); !s) return s;
    } else if (S_ISREG(st.st_mode)) {
      if (auto s = copyFileAt(srcfd, name, dstfd, name, path, times); !s) return s;
    }
  }
  return {};
}

}  // namespace

Status copyFile(const fs::path& src, const fs::path& dst, FileTimes times) {
  const auto folder = [](const fs::path& p) { return p.has_parent_path() ? p.parent_path() : fs::path("."); };
  UniqueFd from(::open(folder(src).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!from.valid()) return errnoError("cannot open the folder of " + src.string());
  UniqueFd to(::open(folder(dst).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!to.valid()) return errnoError("cannot open the folder of " + dst.string());
  return copyFileAt(from.get(), src.filename().string(), to.get(), dst.filename().string(), src, times);
}

Status copyTree(const fs::path& src, const fs::path& dst, FileTimes times) {
  UniqueFd from(::open(src.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!from.valid()) return errnoError("cannot copy " + src.string() + " (a folder, not a link, is needed)");
  std::error_code ec;
  fs::create_directories(dst, ec);
  if (ec) return Error{"cannot create " + dst.string() + ": " + ec.message()};
  UniqueFd to(::open(dst.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!to.valid()) return errnoError("cannot open " + dst.string() + " as a folder");
  return copyDirAt(from.get(), to.get(), src, times, 0);
}

Status writeFile(const fs::path& path, const std::string& content) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f << content;
  f.close();
  if (!f) return Error{"cannot write " + path.string()};
  return {};
}

namespace {

// `path` opened for reading if it is a regular file, not through a link; `st` is its status.
// Non-blocking: a FIFO a sandbox left at the name would hold the open until a writer came.
Result<UniqueFd> openRegularFile(const fs::path& path, struct stat& st) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
  if (!fd.valid()) return errnoError("cannot open " + path.string());
  if (::fstat(fd.get(), &st) != 0) return errnoError("cannot stat " + path.string());
  if (!S_ISREG(st.st_mode)) return Error{path.string() + " is not a regular file"};
  return fd;
}

}  // namespace

Result<std::string> readFileLimited(const fs::path& path, std::size_t maxBytes) {
  struct stat st {};
  auto fd = openRegularFile(path, st);
  if (!fd) return fd.error();
  if (static_cast<std::size_t>(st.st_size) > maxBytes)
    return Error{path.string() + " is " + std::to_string(st.st_size) + " bytes, over the limit of " +
                 std::to_string(maxBytes)};
  std::string out(static_cast<std::size_t>(st.st_size), '\0');
  std::size_t got = 0;
  while (got < out.size()) {
    ssize_t n = ::read(fd->get(), out.data() + got, out.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += static_cast<std::size_t>(n);
  }
  out.resize(got);
  return out;
}

std::string tailOfFile(const fs::path& path, std::size_t maxBytes) {
  struct stat st {};
  auto fd = openRegularFile(path, st);
  if (!fd) return {};
  off_t size = st.st_size;
  off_t from = size > static_cast<off_t>(maxBytes) ? size - static_cast<off_t>(maxBytes) : 0;
  std::string out(static_cast<std::size_t>(size - from), '\0');
  ssize_t n = ::pread(fd->get(), out.data(), out.size(), from);
  out.resize(n > 0 ? static_cast<std::size_t>(n) : 0);
  return out;
}

Status chownTree(const fs::path& root, uid_t uid, gid_t gid) {
  if (::lchown(root.c_str(), uid, gid) != 0) return errnoError("cannot chown " + root.string());
  std::error_code ec;
  for (fs::recursive_directory_iterator it(root, ec), end; it != end; it.increment(ec)) {
    if (ec) break;
    if (::lchown(it->path().c_str(), uid, gid) != 0) return errnoError("cannot chown " + it->path().string());
  }
  if (ec) return Error{"cannot walk " + root.string() + ": " + ec.message()};
  return {};
}

uint64_t secureRandom64() {
  uint64_t v = 0;
  while (::getrandom(&v, sizeof v, 0) != static_cast<ssize_t>(sizeof v)) {
  }
  return v;
}

std::string randomHex(std::size_t bytes) {
  static const char* hex = "0123456789abcdef";
  std::string out;
  for (std::size_t i = 0; i < bytes; ++i) {
    unsigned char b = static_cast<unsigned char>(secureRandom64());
    out += hex[b >> 4];
    out += hex[b & 0xf];
  }
  return out;
}

}  // namespace akad
