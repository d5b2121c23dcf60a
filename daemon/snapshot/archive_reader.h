#pragma once
// Reads a snapshot archive entry by entry and applies every check that does not need the
// filesystem: entry types, path shape, symlink targets, limits on count, sizes, depth, total
// bytes and compression ratio. extract.cc and verify.cc both read through this class, so a
// hostile archive is judged the same way whether it is opened or only verified.

#include <archive.h>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/result.h"
#include "common/sha256.h"
#include "common/unique_fd.h"
#include "daemon/snapshot/snapshot.h"
#include "daemon/snapshot/zstd_stream.h"

namespace akad::snapshot {

enum class EntryType { File, Dir, Symlink };

struct CheckedEntry {
  std::string path;                     // normalised: no "", ".", ".." components, no leading '/'
  std::vector<std::string> components;  // path split on '/'
  EntryType type = EntryType::File;
  uint64_t size = 0;
  uint32_t perm = 0;  // permission bits as stored (never setuid/setgid: those are refused)
  std::string linkTarget;
};

// Lexical check that a relative symlink at `components` with `target` resolves inside the tree.
// ".." is allowed only as leading components (climbing from the link's real parent directory,
// whose chain holds no symlinks) and never above the root; later components only descend, and
// every symlink they may pass through was held to the same rule. Empty result = ok.
std::string symlinkTargetProblem(const std::vector<std::string>& components, const std::string& target);

class ArchiveReader {
 public:
  static Result<std::unique_ptr<ArchiveReader>> open(const std::filesystem::path& archive, const Limits& limits,
                                                     bool hashCompressed = false);
  ~ArchiveReader();

  // The next entry, nullopt at the end of the archive. Errors name the entry and the rule.
  Result<std::optional<CheckedEntry>> next();
  // Streams the current file entry's bytes, enforcing the byte and ratio limits as they arrive.
  Status readData(const std::function<Status(const char*, size_t)>& sink);
  // After next() returned nullopt: reads the rest of the compressed stream (so trailing garbage
  // or truncation is caught) and returns the SHA-256 of the archive file when hashCompressed.
  Result<std::string> finish();
  uint64_t compressedSize() const { return compressedBytesRead_; }

 private:
  ArchiveReader(UniqueFd fd, const Limits& limits, bool hashCompressed);
  // One header, judged in steps; sets `skip` for the root's own "./" entry.
  Result<std::optional<CheckedEntry>> readEntry(bool& skip);
  Status checkRawPath(archive_entry* e, const std::string& raw);
  Status splitPath(const std::string& raw, CheckedEntry& c);
  Status checkType(archive_entry* e, const std::string& raw, CheckedEntry& c);
  Status checkModeAndContent(archive_entry* e, CheckedEntry& c);
  Status checkPlaceInTree(const CheckedEntry& c);
  static la_ssize_t readCallback(archive*, void* client, const void** buf);
  Error archiveError(const std::string& what);
  Status checkRatio();
  Error refuse(const std::string& path, const std::string& why);

  UniqueFd fd_;
  Limits limits_;
  std::unique_ptr<ZstdFileSource> source_;
  archive* a_ = nullptr;
  std::optional<Error> sourceError_;
  bool hashCompressed_;
  Sha256 hash_;
  uint64_t compressedBytesRead_ = 0;
  uint64_t entries_ = 0;
  uint64_t declaredBytes_ = 0;
  uint64_t writtenBytes_ = 0;
  std::string currentPath_;
  uint64_t currentSize_ = 0;
  // Every path seen so far (parents included, implicitly as directories) with its type: no path
  // may appear twice and none may have a file or a symlink among its parents.
  std::unordered_map<std::string, EntryType> seen_;
};

}  // namespace akad::snapshot
