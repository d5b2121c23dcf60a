#include "daemon/snapshot/archive_reader.h"

#include <archive_entry.h>
#include <fcntl.h>
#include <sys/stat.h>

#include "daemon/snapshot/path_text.h"

namespace akad::snapshot {

std::string symlinkTargetProblem(const std::vector<std::string>& components, const std::string& target) {
  if (target.empty()) return "empty symlink target";
  if (target.front() == '/') return "absolute symlink target '" + target + "'";
  size_t parentDepth = components.size() - 1;
  size_t ups = 0;
  bool descended = false;
  size_t start = 0;
  while (start <= target.size()) {
    size_t end = target.find('/', start);
    if (end == std::string::npos) end = target.size();
    std::string c = target.substr(start, end - start);
    start = end + 1;
    if (c.empty() || c == ".") continue;
    if (c == "..") {
      if (descended) return "symlink target '" + target + "' has '..' after a name (only leading '..' is allowed)";
      if (++ups > parentDepth) return "symlink target '" + target + "' leaves the tree";
    } else {
      descended = true;
    }
  }
  return {};
}

namespace {
std::string typeName(EntryType t) {
  return t == EntryType::File ? "file" : t == EntryType::Dir ? "directory" : "symlink";
}
}  // namespace

ArchiveReader::ArchiveReader(UniqueFd fd, const Limits& limits, bool hashCompressed)
    : fd_(std::move(fd)), limits_(limits), source_(std::make_unique<ZstdFileSource>(fd_.get())),
      hashCompressed_(hashCompressed) {
  if (hashCompressed_) source_->hashInto(&hash_);
}

ArchiveReader::~ArchiveReader() {
  if (a_ != nullptr) archive_read_free(a_);
}

Result<std::unique_ptr<ArchiveReader>> ArchiveReader::open(const std::filesystem::path& archivePath,
                                                           const Limits& limits, bool hashCompressed) {
  UniqueFd fd(::open(archivePath.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY));
  if (!fd.valid()) return errnoError("cannot open archive " + archivePath.string());
  struct stat st;
  if (::fstat(fd.get(), &st) != 0) return errnoError("cannot stat archive " + archivePath.string());
  if (!S_ISREG(st.st_mode)) return Error{"archive " + archivePath.string() + " is not a regular file", 0};
  std::unique_ptr<ArchiveReader> r(new ArchiveReader(std::move(fd), limits, hashCompressed));
  r->a_ = archive_read_new();
  if (r->a_ == nullptr) return Error{"cannot allocate a libarchive reader", 0};
  archive_read_support_format_tar(r->a_);
  if (archive_read_open(r->a_, r.get(), nullptr, readCallback, nullptr) != ARCHIVE_OK)
    return r->archiveError("cannot read archive " + archivePath.string());
  return r;
}

la_ssize_t ArchiveReader::readCallback(archive* a, void* client, const void** buf) {
  auto* r = static_cast<ArchiveReader*>(client);
  // Checked here as well as per entry: libarchive also consumes data on its own (pax headers,
  // skipping), and a huge zero-filled pax header must not be decompressed into memory.
  if (auto s = r->checkRatio(); !s) {
    r->sourceError_ = s.error();
    archive_set_error(a, EINVAL, "%s", s.error().message.c_str());
    return -1;
  }
  auto chunk = r->source_->next();
  if (!chunk) {
    r->sourceError_ = chunk.error();
    archive_set_error(a, EINVAL, "%s", chunk.error().message.c_str());
    return -1;
  }
  *buf = chunk->first;
  return static_cast<la_ssize_t>(chunk->second);
}

Error ArchiveReader::archiveError(const std::string& what) {
  if (sourceError_) {
    if (sourceError_->message.rfind("archive refused", 0) == 0) return *sourceError_;
    return Error{what + ": " + sourceError_->message, 0};
  }
  const char* s = archive_error_string(a_);
  return Error{what + ": " + (s ? s : "unreadable tar data (truncated or corrupt archive)"), 0};
}

Error ArchiveReader::refuse(const std::string& path, const std::string& why) {
  return Error{"archive refused: entry '" + displayPath(path) + "': " + why, 0};
}

Status ArchiveReader::checkRatio() {
  uint64_t out = source_->decompressedProduced();
  uint64_t in = source_->compressedConsumed();
  if (compressionRatioExceeded(out, in, limits_))
    return Error{"archive refused: compression ratio above max_compression_ratio (" +
                     std::to_string(static_cast<uint64_t>(limits_.max_compression_ratio)) + "): " +
                     std::to_string(out) + " bytes from " + std::to_string(in) + " compressed bytes (a zstd bomb?)",
                 0};
  return {};
}

Result<std::optional<CheckedEntry>> ArchiveReader::next() {
  // A loop, not recursion: an archive of 200 000 "./" entries must not exhaust the stack.
  for (;;) {
    bool skip = false;
    auto r = readEntry(skip);
    if (!r || !skip) return r;
  }
}

Result<std::optional<CheckedEntry>> ArchiveReader::readEntry(bool& skip) {
  if (auto s = checkRatio(); !s) return s.error();
  archive_entry* e = nullptr;
  int rc = archive_read_next_header(a_, &e);
  if (rc == ARCHIVE_EOF) return std::optional<CheckedEntry>{};
  if (rc != ARCHIVE_OK && rc != ARCHIVE_WARN)
    return archiveError(currentPath_.empty() ? std::string("cannot read the first archive entry")
                                             : "cannot read the archive entry after '" + currentPath_ + "'");
  if (auto s = checkRatio(); !s) return s.error();

  // UTF-8 accessors: independent of the process locale (the writer side uses them too).
  const char* rawName = archive_entry_pathname_utf8(e);
  if (rawName == nullptr) rawName = archive_entry_pathname(e);
  std::string raw = rawName ? rawName : "";
  if (auto s = checkRawPath(e, raw); !s) return s.error();
  CheckedEntry c;
  if (auto s = splitPath(raw, c); !s) return s.error();
  if (auto s = checkType(e, raw, c); !s) return s.error();
  if (c.components.empty()) {
    // "./" as written by `tar -C dir .`: the root itself, nothing to create.
    if (c.type == EntryType::Dir) {
      skip = true;
      return std::optional<CheckedEntry>{};
    }
    return refuse(raw, "path names the archive root");
  }
  if (c.components.size() > limits_.max_depth)
    return refuse(raw.substr(0, 64) + "...", "depth " + std::to_string(c.components.size()) + " above max_depth (" +
                                                 std::to_string(limits_.max_depth) + ")");
  for (size_t i = 0; i < c.components.size(); ++i) c.path += (i ? "/" : "") + c.components[i];
  if (auto s = checkModeAndContent(e, c); !s) return s.error();
  if (auto s = checkPlaceInTree(c); !s) return s.error();

  currentPath_ = c.path;
  currentSize_ = c.size;
  return std::optional<CheckedEntry>(std::move(c));
}

// The entry's name as stored: counted against max_files, then its size, shape and encoding; no
// hardlinks.
Status ArchiveReader::checkRawPath(archive_entry* e, const std::string& raw) {
  if (++entries_ > limits_.max_files)
    return refuse(raw, "more than max_files (" + std::to_string(limits_.max_files) + ") entries");
  if (raw.empty()) return refuse(raw, "empty path");
  if (raw.size() > limits_.max_path_bytes)
    return refuse(raw.substr(0, 64) + "...", "path is " + std::to_string(raw.size()) + " bytes, above max_path_bytes (" +
                                                 std::to_string(limits_.max_path_bytes) + ")");
  if (raw.front() == '/') return refuse(raw, "absolute path");
  if (!isValidUtf8(raw)) return refuse(raw, "path is not valid UTF-8");
  if (archive_entry_hardlink(e) != nullptr || archive_entry_hardlink_utf8(e) != nullptr) {
    const char* to = archive_entry_hardlink_utf8(e) ? archive_entry_hardlink_utf8(e) : archive_entry_hardlink(e);
    return refuse(raw, "hardlinks are not allowed (to '" + displayPath(to) + "')");
  }
  return {};
}

// Components without "", "." and (refused) "..".
Status ArchiveReader::splitPath(const std::string& raw, CheckedEntry& c) {
  size_t start = 0;
  while (start <= raw.size()) {
    size_t end = raw.find('/', start);
    if (end == std::string::npos) end = raw.size();
    std::string comp = raw.substr(start, end - start);
    start = end + 1;
    if (comp.empty() || comp == ".") continue;
    if (comp == "..") return refuse(raw, "'..' in path");
    c.components.push_back(std::move(comp));
  }
  return {};
}

// Files, directories and symlinks only.
Status ArchiveReader::checkType(archive_entry* e, const std::string& raw, CheckedEntry& c) {
  mode_t ft = archive_entry_filetype(e);
  if (ft == AE_IFREG) c.type = EntryType::File;
  else if (ft == AE_IFDIR) c.type = EntryType::Dir;
  else if (ft == AE_IFLNK) c.type = EntryType::Symlink;
  else {
    const char* kind = ft == AE_IFCHR ? "character device" : ft == AE_IFBLK ? "block device" : ft == AE_IFIFO ? "fifo"
                       : ft == AE_IFSOCK ? "socket" : "unknown entry type";
    return refuse(raw, std::string(kind) + " entries are not allowed");
  }
  return {};
}

// No setuid/setgid bits and no sparse data; a file's declared size within the limits, a
// symlink's target inside the tree.
Status ArchiveReader::checkModeAndContent(archive_entry* e, CheckedEntry& c) {
  mode_t mode = archive_entry_mode(e);
  if (mode & (S_ISUID | S_ISGID)) return refuse(c.path, "setuid/setgid bits are not allowed");
  c.perm = mode & 0777;
  if (archive_entry_sparse_count(e) > 0) return refuse(c.path, "sparse entries are not supported");

  if (c.type == EntryType::File) {
    if (!archive_entry_size_is_set(e) || archive_entry_size(e) < 0) return refuse(c.path, "file without a size");
    c.size = static_cast<uint64_t>(archive_entry_size(e));
    if (c.size > limits_.max_file_bytes)
      return refuse(c.path, "declares " + std::to_string(c.size) + " bytes, above max_file_bytes (" +
                                std::to_string(limits_.max_file_bytes) + ")");
    declaredBytes_ += c.size;
    if (declaredBytes_ > limits_.max_total_bytes)
      return refuse(c.path, "archive content above max_total_bytes (" + std::to_string(limits_.max_total_bytes) + ")");
  } else if (c.type == EntryType::Symlink) {
    const char* t = archive_entry_symlink_utf8(e);
    if (t == nullptr) t = archive_entry_symlink(e);
    c.linkTarget = t ? t : "";
    if (!isValidUtf8(c.linkTarget)) return refuse(c.path, "symlink target is not valid UTF-8");
    if (c.linkTarget.size() > limits_.max_path_bytes) return refuse(c.path, "symlink target above max_path_bytes");
    if (auto p = symlinkTargetProblem(c.components, c.linkTarget); !p.empty()) return refuse(c.path, displayPath(p));
  }
  return {};
}

// Parents must be directories (explicit or implied); a parent that is a file or a symlink
// would make this entry write through it. No path twice, but for a directory.
Status ArchiveReader::checkPlaceInTree(const CheckedEntry& c) {
  std::string prefix;
  for (size_t i = 0; i + 1 < c.components.size(); ++i) {
    prefix += (i ? "/" : "") + c.components[i];
    auto it = seen_.find(prefix);
    if (it == seen_.end()) {
      seen_.emplace(prefix, EntryType::Dir);
    } else if (it->second != EntryType::Dir) {
      return refuse(c.path, "parent '" + prefix + "' is a " + typeName(it->second) + " (writing through it is not allowed)");
    }
  }
  auto [it, inserted] = seen_.emplace(c.path, c.type);
  if (!inserted && !(it->second == EntryType::Dir && c.type == EntryType::Dir))
    return refuse(c.path, "appears twice in the archive (as " + typeName(it->second) + " and " + typeName(c.type) + ")");
  return {};
}

Status ArchiveReader::readData(const std::function<Status(const char*, size_t)>& sink) {
  uint64_t expected = 0;
  for (;;) {
    const void* buf = nullptr;
    size_t n = 0;
    la_int64_t offset = 0;
    int rc = archive_read_data_block(a_, &buf, &n, &offset);
    if (rc == ARCHIVE_EOF) break;
    if (rc != ARCHIVE_OK && rc != ARCHIVE_WARN) return archiveError("cannot read the data of '" + currentPath_ + "'");
    if (static_cast<uint64_t>(offset) != expected) return refuse(currentPath_, "non-contiguous data (sparse entry)");
    expected += n;
    writtenBytes_ += n;
    if (expected > currentSize_) return refuse(currentPath_, "more data than its declared size");
    if (writtenBytes_ > limits_.max_total_bytes)
      return refuse(currentPath_, "archive content above max_total_bytes (" + std::to_string(limits_.max_total_bytes) + ")");
    if (auto s = checkRatio(); !s) return s;
    if (n > 0)
      if (auto s = sink(static_cast<const char*>(buf), n); !s) return s;
  }
  if (expected != currentSize_) return refuse(currentPath_, "data shorter than its declared size (truncated archive?)");
  return {};
}

Result<std::string> ArchiveReader::finish() {
  for (;;) {
    auto chunk = source_->next();
    if (!chunk) return Error{"archive refused: " + chunk.error().message, 0};
    if (chunk->second == 0) break;
    if (auto s = checkRatio(); !s) return s.error();
  }
  compressedBytesRead_ = source_->fileBytesRead();
  return hashCompressed_ ? hash_.hexDigest() : std::string{};
}

}  // namespace akad::snapshot
