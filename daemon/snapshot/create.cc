// Deterministic archive creation: a depth-first walk with directory fds (no path is resolved
// twice, no symlink is followed), entries in byte order per directory (as tar --sort=name),
// normalised metadata, and each file read exactly once for both the archive and its hash.

#include <archive.h>
#include <archive_entry.h>
#include <dirent.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <locale.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "common/sha256.h"
#include "common/unique_fd.h"
#include "daemon/snapshot/create_internal.h"
#include "daemon/snapshot/path_text.h"
#include "daemon/snapshot/snapshot.h"
#include "daemon/snapshot/zstd_stream.h"

namespace akad::snapshot {

bool isExcluded(const std::string& relPath, bool isDir, const std::vector<std::string>& patterns) {
  std::string base = relPath.substr(relPath.rfind('/') + 1);
  for (std::string pat : patterns) {
    bool dirOnly = !pat.empty() && pat.back() == '/';
    if (dirOnly) {
      pat.pop_back();
      if (!isDir) continue;
    }
    if (pat.empty()) continue;
    bool matched = pat.find('/') != std::string::npos
                       ? fnmatch(pat.c_str(), relPath.c_str(), FNM_PATHNAME) == 0
                       : fnmatch(pat.c_str(), base.c_str(), 0) == 0;
    if (matched) return true;
  }
  return false;
}

namespace {

struct ArchiveDeleter {
  void operator()(archive* a) const { archive_write_free(a); }
};
class ScopedUtf8Locale {
 public:
  ScopedUtf8Locale() : loc_(::newlocale(LC_CTYPE_MASK, "C.UTF-8", static_cast<locale_t>(nullptr))) {
    if (loc_ != static_cast<locale_t>(nullptr)) old_ = ::uselocale(loc_);
  }
  ~ScopedUtf8Locale() {
    if (loc_ != static_cast<locale_t>(nullptr)) {
      ::uselocale(old_);
      ::freelocale(loc_);
    }
  }
  ScopedUtf8Locale(const ScopedUtf8Locale&) = delete;
  ScopedUtf8Locale& operator=(const ScopedUtf8Locale&) = delete;
  bool ok() const { return loc_ != static_cast<locale_t>(nullptr); }

 private:
  locale_t loc_;
  locale_t old_ = static_cast<locale_t>(nullptr);
};

struct DirCloser {
  void operator()(DIR* d) const { ::closedir(d); }
};

// The tar stream goes to the zstd sink; a sink error is kept so the user sees it rather than
// libarchive's generic "write failed".
struct WriteTarget {
  ZstdFileSink* sink;
  Error error;
  bool failed = false;
};

la_ssize_t writeToSink(archive*, void* client, const void* buf, size_t n) {
  auto* t = static_cast<WriteTarget*>(client);
  if (auto st = t->sink->write(buf, n); !st) {
    t->error = st.error();
    t->failed = true;
    return -1;
  }
  return static_cast<la_ssize_t>(n);
}

class TreeWriter {
 public:
  TreeWriter(archive* a, WriteTarget& target, const CreateOptions& options, Manifest& manifest, const struct stat& out)
      : a_(a), target_(target), opt_(options), m_(manifest), out_(out), buf_(1 << 20) {}

  Status walk(int dirfd, const std::string& rel, uint32_t depth);

 private:
  Status archiveError(const std::string& what) {
    if (target_.failed) return target_.error;
    return Error{what + ": " + (archive_error_string(a_) ? archive_error_string(a_) : "libarchive error"), 0};
  }
  Status limitError(const std::string& limit, uint64_t value, const std::string& path) {
    return Error{"workspace exceeds " + limit + " (" + std::to_string(value) + ") at '" + path + "'", 0};
  }
  Status writeHeader(const std::string& rel, mode_t type, mode_t perm, uint64_t size, const std::string& link);
  Status addFile(int dirfd, const std::string& name, const std::string& rel, const struct stat& st);

  archive* a_;
  WriteTarget& target_;
  const CreateOptions& opt_;
  Manifest& m_;
  struct stat out_;  // the archive being written, when it lies inside the workspace
  std::vector<char> buf_;
  uint64_t totalBytes_ = 0;
};

Status TreeWriter::writeHeader(const std::string& rel, mode_t type, mode_t perm, uint64_t size,
                               const std::string& link) {
  std::unique_ptr<archive_entry, decltype(&archive_entry_free)> e(archive_entry_new(), archive_entry_free);
  // The _utf8 setters: names go into pax headers as UTF-8 whatever the process locale is.
  archive_entry_set_pathname(e.get(), rel.c_str());
  archive_entry_set_filetype(e.get(), type);
  archive_entry_set_perm(e.get(), perm);
  archive_entry_set_size(e.get(), static_cast<la_int64_t>(size));
  archive_entry_set_uid(e.get(), 0);
  archive_entry_set_gid(e.get(), 0);
  archive_entry_set_mtime(e.get(), 0, 0);
  if (type == AE_IFLNK) archive_entry_set_symlink(e.get(), link.c_str());
  if (archive_write_header(a_, e.get()) != ARCHIVE_OK) return archiveError("cannot write archive header for '" + rel + "'");
  return {};
}

Status TreeWriter::addFile(int dirfd, const std::string& name, const std::string& rel, const struct stat& st) {
  UniqueFd fd(::openat(dirfd, name.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY | O_NONBLOCK));
  if (!fd.valid()) return errnoError("cannot open '" + rel + "' in the workspace");
  struct stat fst;
  if (::fstat(fd.get(), &fst) != 0) return errnoError("cannot stat '" + rel + "'");
  if (!S_ISREG(fst.st_mode) || fst.st_ino != st.st_ino || fst.st_dev != st.st_dev)
    return Error{"'" + rel + "' changed while the workspace was being snapshotted", 0};
  uint64_t size = static_cast<uint64_t>(fst.st_size);
  if (size > opt_.limits.max_file_bytes) return limitError("max_file_bytes", opt_.limits.max_file_bytes, rel);
  totalBytes_ += size;
  if (totalBytes_ > opt_.limits.max_total_bytes) return limitError("max_total_bytes", opt_.limits.max_total_bytes, rel);
  ::posix_fadvise(fd.get(), 0, 0, POSIX_FADV_SEQUENTIAL);

  mode_t perm = (fst.st_mode & S_IXUSR) ? 0755 : 0644;
  if (auto s = writeHeader(rel, AE_IFREG, perm, size, {}); !s) return s;
  Sha256 hash;
  uint64_t done = 0;
  for (;;) {
    ssize_t n = ::read(fd.get(), buf_.data(), buf_.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return errnoError("cannot read '" + rel + "'");
    }
    if (n == 0) break;
    if (done + static_cast<uint64_t>(n) > size)
      return Error{"'" + rel + "' grew while the workspace was being snapshotted", 0};
    hash.update(buf_.data(), static_cast<size_t>(n));
    if (archive_write_data(a_, buf_.data(), static_cast<size_t>(n)) != n)
      return archiveError("cannot write '" + rel + "' into the archive");
    done += static_cast<uint64_t>(n);
  }
  if (done != size) return Error{"'" + rel + "' shrank while the workspace was being snapshotted", 0};
  m_.entries.push_back(ManifestEntry{rel, "file", "", hash.hexDigest(), size, perm});
  return {};
}

Status TreeWriter::walk(int dirfd, const std::string& rel, uint32_t depth) {
  std::vector<std::string> names;
  {
    int dupfd = ::fcntl(dirfd, F_DUPFD_CLOEXEC, 0);
    if (dupfd < 0) return errnoError("cannot duplicate directory fd for '" + (rel.empty() ? "." : rel) + "'");
    std::unique_ptr<DIR, DirCloser> d(::fdopendir(dupfd));
    if (!d) {
      ::close(dupfd);
      return errnoError("cannot list '" + (rel.empty() ? "." : rel) + "'");
    }
    errno = 0;
    while (dirent* de = ::readdir(d.get())) {
      std::string n = de->d_name;
      if (n != "." && n != "..") names.push_back(std::move(n));
    }
    if (errno != 0) return errnoError("cannot list '" + (rel.empty() ? "." : rel) + "'");
  }
  std::sort(names.begin(), names.end());  // std::string compares bytes as unsigned char

  for (const auto& name : names) {
    std::string path = rel.empty() ? name : rel + "/" + name;
    struct stat st;
    if (::fstatat(dirfd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) return errnoError("cannot stat '" + path + "'");
    bool isDir = S_ISDIR(st.st_mode);
    if (!isValidUtf8(name)) {
      m_.skipped.push_back(displayPath(path) + ": name is not valid UTF-8, not archived");
      continue;
    }
    if (st.st_ino == out_.st_ino && st.st_dev == out_.st_dev) {
      m_.skipped.push_back(path + ": the archive being written");
      continue;
    }
    if (isExcluded(path, isDir, opt_.exclude)) {
      m_.skipped.push_back(path + ": excluded by pattern");
      continue;
    }
    if (!S_ISDIR(st.st_mode) && !S_ISREG(st.st_mode) && !S_ISLNK(st.st_mode)) {
      const char* kind = S_ISFIFO(st.st_mode) ? "fifo" : S_ISSOCK(st.st_mode) ? "socket"
                         : S_ISCHR(st.st_mode) ? "character device" : S_ISBLK(st.st_mode) ? "block device" : "special file";
      m_.skipped.push_back(path + ": " + kind + " not archived");
      continue;
    }
    if (path.size() > opt_.limits.max_path_bytes) return limitError("max_path_bytes", opt_.limits.max_path_bytes, path);
    if (depth + 1 > opt_.limits.max_depth) return limitError("max_depth", opt_.limits.max_depth, path);
    if (m_.entries.size() + 1 > opt_.limits.max_files) return limitError("max_files", opt_.limits.max_files, path);

    if (S_ISREG(st.st_mode)) {
      if (auto s = addFile(dirfd, name, path, st); !s) return s;
    } else if (S_ISLNK(st.st_mode)) {
      // Stored as they are, even if they point outside the tree: the extractor refuses those.
      std::string target(static_cast<size_t>(st.st_size) + 1, '\0');
      ssize_t n = ::readlinkat(dirfd, name.c_str(), target.data(), target.size());
      if (n < 0) return errnoError("cannot read symlink '" + path + "'");
      if (static_cast<size_t>(n) >= target.size())
        return Error{"symlink '" + path + "' changed while the workspace was being snapshotted", 0};
      target.resize(static_cast<size_t>(n));
      if (!isValidUtf8(target)) {
        m_.skipped.push_back(path + ": symlink target is not valid UTF-8, not archived");
        continue;
      }
      if (auto s = writeHeader(path, AE_IFLNK, 0777, 0, target); !s) return s;
      m_.entries.push_back(ManifestEntry{path, "symlink", target, "", 0, 0777});
    } else {
      UniqueFd sub(::openat(dirfd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
      if (!sub.valid()) return errnoError("cannot open directory '" + path + "'");
      if (auto s = writeHeader(path, AE_IFDIR, 0755, 0, {}); !s) return s;
      m_.entries.push_back(ManifestEntry{path, "dir", "", "", 0, 0755});
      if (auto s = walk(sub.get(), path, depth + 1); !s) return s;
    }
  }
  return {};
}

}  // namespace

Result<Manifest> createArchiveToFd(const std::filesystem::path& dir, int outFd, const CreateOptions& options,
                                   const nlohmann::json& metadata) {
  UniqueFd root(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!root.valid()) return errnoError("cannot open workspace directory " + dir.string());

  Manifest m;
  m.metadata = metadata.is_null() ? nlohmann::json::object() : metadata;
  ZstdFileSink sink(outFd, options.zstd_level);
  WriteTarget target{&sink, {}, false};
  // libarchive converts names from the locale's charset to UTF-8 for pax headers; in the C
  // locale it cannot convert non-ASCII names at all (and 3.6 crashes on the _utf8 setters). Names
  // are checked to be UTF-8, so this thread uses a UTF-8 locale while it writes the archive.
  ScopedUtf8Locale utf8Locale;
  if (!utf8Locale.ok()) return errnoError("cannot create the C.UTF-8 locale for archive names");
  std::unique_ptr<archive, ArchiveDeleter> a(archive_write_new());
  if (!a) return Error{"cannot allocate a libarchive writer", 0};
  // pax_restricted writes plain ustar headers and adds pax extended headers only when a field
  // does not fit (long paths, big sizes), so no atime/ctime records leak into the bytes.
  archive_write_set_format_pax_restricted(a.get());
  archive_write_set_bytes_per_block(a.get(), 0);
  if (archive_write_open2(a.get(), &target, nullptr, writeToSink, nullptr, nullptr) != ARCHIVE_OK)
    return Error{std::string("cannot start the archive: ") + archive_error_string(a.get()), 0};

  struct stat outSt;
  if (::fstat(outFd, &outSt) != 0) return errnoError("cannot stat the archive being written");
  TreeWriter writer(a.get(), target, options, m, outSt);
  if (auto s = writer.walk(root.get(), "", 0); !s) return s.error();
  if (archive_write_close(a.get()) != ARCHIVE_OK) {
    if (target.failed) return target.error;
    return Error{std::string("cannot finish the archive: ") + archive_error_string(a.get()), 0};
  }
  if (auto s = sink.finish(); !s) return s.error();

  // The extractor refuses archives above the ratio limit; refuse them here too, so a snapshot
  // we store can always be opened under the same limits.
  uint64_t tarBytes = sink.inputBytes();
  if (compressionRatioExceeded(tarBytes, sink.outputBytes(), options.limits))
    return Error{"workspace compresses beyond max_compression_ratio (" +
                     std::to_string(options.limits.max_compression_ratio) + "): " + std::to_string(tarBytes) +
                     " tar bytes into " + std::to_string(sink.outputBytes()),
                 0};
  m.archive_sha256 = sink.sha256();
  m.archive_size = sink.outputBytes();
  return m;
}

Result<Manifest> createArchive(const std::filesystem::path& dir, const std::filesystem::path& archivePath,
                               const CreateOptions& options, const nlohmann::json& metadata) {
  // Written beside the target and renamed at the end: a failure never destroys an existing file
  // of that name and never leaves a partial archive under it.
  std::string tmp = archivePath.string() + ".tmp-XXXXXX";
  UniqueFd out(::mkostemp(tmp.data(), O_CLOEXEC));
  if (!out.valid()) return errnoError("cannot create archive " + archivePath.string());
  auto fail = [&](Error e) {
    ::unlink(tmp.c_str());
    return e;
  };
  auto m = createArchiveToFd(dir, out.get(), options, metadata);
  if (!m) return fail(Error{"cannot snapshot " + dir.string() + ": " + m.error().message, 0});
  if (::fchmod(out.get(), 0644) != 0) return fail(errnoError("cannot chmod " + tmp));
  if (::close(out.release()) != 0) return fail(errnoError("cannot close archive " + tmp));
  if (::rename(tmp.c_str(), archivePath.c_str()) != 0) return fail(errnoError("cannot rename " + tmp + " to " + archivePath.string()));
  return m;
}

}  // namespace akad::snapshot
