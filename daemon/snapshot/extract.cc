// Safe extraction. The archive has already passed ArchiveReader's lexical checks; here every
// filesystem step is also done so that it cannot be redirected: each entry is created relative
// to a directory fd opened component by component with O_NOFOLLOW inside a private staging
// directory, files are created with O_EXCL|O_NOFOLLOW, and nothing is visible at `dest` until
// the whole archive has been accepted and the staging directory is renamed onto it.

#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <string>
#include <system_error>

#include "common/unique_fd.h"
#include "daemon/snapshot/archive_reader.h"
#include "daemon/snapshot/snapshot.h"

namespace akad::snapshot {

namespace {

// Owns the staging directory until it is renamed into place.
class StagingDir {
 public:
  ~StagingDir() {
    if (!path_.empty()) {
      std::error_code ec;
      std::filesystem::remove_all(path_, ec);  // does not follow symlinks
    }
  }
  Status create(const std::filesystem::path& dest) {
    std::string name = ".";
    name.append(dest.filename().string()).append(".akasnap-staging-XXXXXX");
    std::string tmpl = (dest.parent_path() / name).string();
    if (::mkdtemp(tmpl.data()) == nullptr) return errnoError("cannot create a staging directory beside " + dest.string());
    path_ = tmpl;
    fd_.reset(::open(path_.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (!fd_.valid()) return errnoError("cannot open staging directory " + path_.string());
    return {};
  }
  Status commit(const std::filesystem::path& dest) {
    if (::fchmod(fd_.get(), 0755) != 0) return errnoError("cannot chmod staging directory " + path_.string());
    // rename(2) replaces an empty directory atomically and fails if it is no longer empty.
    if (::rename(path_.c_str(), dest.c_str()) != 0)
      return errnoError("cannot move the extracted tree to " + dest.string());
    path_.clear();
    return {};
  }
  int fd() const { return fd_.get(); }

 private:
  std::filesystem::path path_;
  UniqueFd fd_;
};

class TreeBuilder {
 public:
  explicit TreeBuilder(int rootFd) : rootFd_(rootFd) {}

  Status add(const CheckedEntry& e, ArchiveReader& reader);

 private:
  Result<int> parentFd(const CheckedEntry& e);

  int rootFd_;
  std::string cachedParent_;  // parent path of the last entry, "" = root
  UniqueFd cachedFd_;
};

Result<int> TreeBuilder::parentFd(const CheckedEntry& e) {
  std::string parent;
  for (size_t i = 0; i + 1 < e.components.size(); ++i) parent += (i ? "/" : "") + e.components[i];
  if (parent.empty()) return rootFd_;
  if (cachedFd_.valid() && parent == cachedParent_) return cachedFd_.get();
  UniqueFd cur;
  int at = rootFd_;
  for (size_t i = 0; i + 1 < e.components.size(); ++i) {
    const char* c = e.components[i].c_str();
    if (::mkdirat(at, c, 0755) != 0 && errno != EEXIST)
      return errnoError("cannot create directory '" + parent + "' for '" + e.path + "'");
    UniqueFd next(::openat(at, c, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (!next.valid()) {
      if (errno == ELOOP || errno == ENOTDIR)
        return Error{"archive refused: entry '" + e.path + "' would write through '" + e.components[i] +
                         "', which is not a directory",
                     0};
      return errnoError("cannot open directory '" + parent + "'");
    }
    cur = std::move(next);
    at = cur.get();
  }
  cachedFd_ = std::move(cur);
  cachedParent_ = parent;
  return cachedFd_.get();
}

Status TreeBuilder::add(const CheckedEntry& e, ArchiveReader& reader) {
  auto pfd = parentFd(e);
  if (!pfd) return pfd.error();
  const char* name = e.components.back().c_str();
  switch (e.type) {
    case EntryType::Dir: {
      if (::mkdirat(*pfd, name, 0755) != 0) {
        struct stat st;
        if (errno != EEXIST || ::fstatat(*pfd, name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISDIR(st.st_mode))
          return errnoError("cannot create directory '" + e.path + "'");
      }
      if (::fchmodat(*pfd, name, 0755, 0) != 0) return errnoError("cannot chmod directory '" + e.path + "'");
      return {};
    }
    case EntryType::Symlink:
      if (::symlinkat(e.linkTarget.c_str(), *pfd, name) != 0) return errnoError("cannot create symlink '" + e.path + "'");
      return {};
    case EntryType::File: {
      mode_t perm = (e.perm & S_IXUSR) ? 0755 : 0644;
      UniqueFd fd(::openat(*pfd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, perm));
      if (!fd.valid()) return errnoError("cannot create file '" + e.path + "'");
      auto st = reader.readData([&](const char* p, size_t n) -> Status {
        while (n > 0) {
          ssize_t w = ::write(fd.get(), p, n);
          if (w < 0) {
            if (errno == EINTR) continue;
            return errnoError("cannot write '" + e.path + "'");
          }
          p += w;
          n -= static_cast<size_t>(w);
        }
        return {};
      });
      if (!st) return st;
      if (::fchmod(fd.get(), perm) != 0) return errnoError("cannot chmod '" + e.path + "'");  // umask
      return {};
    }
  }
  return {};
}

}  // namespace

Status extractArchive(const std::filesystem::path& archive, const std::filesystem::path& destIn, const Limits& limits) {
  std::filesystem::path dest = std::filesystem::absolute(destIn).lexically_normal();
  if (dest.filename().empty()) dest = dest.parent_path();
  struct stat st;
  if (::lstat(dest.c_str(), &st) == 0) {
    if (!S_ISDIR(st.st_mode)) return Error{"cannot extract into " + dest.string() + ": exists and is not a directory", 0};
    std::error_code ec;
    if (!std::filesystem::is_empty(dest, ec) || ec)
      return Error{"cannot extract into " + dest.string() + ": directory is not empty", 0};
  } else if (errno != ENOENT) {
    return errnoError("cannot stat " + dest.string());
  }

  auto reader = ArchiveReader::open(archive, limits);
  if (!reader) return reader.error();
  StagingDir staging;
  if (auto s = staging.create(dest); !s) return s;
  TreeBuilder builder(staging.fd());
  for (;;) {
    auto entry = (*reader)->next();
    if (!entry) return entry.error();
    if (!entry->has_value()) break;
    if (auto s = builder.add(**entry, **reader); !s) return s;
  }
  if (auto f = (*reader)->finish(); !f) return f.error();
  return staging.commit(dest);
}

}  // namespace akad::snapshot
