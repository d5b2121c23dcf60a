#pragma once
// Workspace snapshots: a deterministic pax tar compressed with zstd, a JSON manifest beside it,
// and an extractor that treats every archive as hostile. See docs/snapshots.md.

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/result.h"

namespace akad::snapshot {

// Enforced while creating (walking) and again while extracting, so an archive we create always
// extracts under the same limits.
struct Limits {
  uint64_t max_total_bytes = 2ull << 30;   // sum of regular-file contents
  uint64_t max_files = 200000;             // entries of any type
  size_t max_path_bytes = 4096;            // relative path of one entry
  uint64_t max_file_bytes = 2ull << 30;    // one regular file
  // Refused once uncompressed tar bytes > kRatioSlackBytes + ratio * compressed bytes read so
  // far (the slack keeps a small, very regular workspace from being refused).
  double max_compression_ratio = 1000.0;
  uint32_t max_depth = 256;                // path components of one entry
};

inline constexpr uint64_t kRatioSlackBytes = 64ull << 20;

inline bool compressionRatioExceeded(uint64_t uncompressed, uint64_t compressed, const Limits& limits) {
  return static_cast<double>(uncompressed) >
         static_cast<double>(kRatioSlackBytes) + limits.max_compression_ratio * static_cast<double>(compressed);
}

struct CreateOptions {
  Limits limits;
  // "build/"  : a directory with that name anywhere (glob allowed: "cmake-build-*/")
  // "*.o"     : basename glob, any entry type
  // "a/b/c"   : a pattern with an inner '/' matches the whole relative path (fnmatch FNM_PATHNAME)
  std::vector<std::string> exclude;
  // Part of the archive's identity: the same tree at another level gives other bytes.
  int zstd_level = 3;
};

struct ManifestEntry {
  std::string path;         // relative, '/'-separated, no trailing '/'
  std::string type;         // "file" | "dir" | "symlink"
  std::string link_target;  // symlinks only
  std::string sha256;       // files only: SHA-256 of the content
  uint64_t size = 0;        // files only
  uint32_t mode = 0;        // as stored: 0644/0755 files, 0755 dirs, 0777 symlinks
};

struct Manifest {
  std::string archive_sha256;
  uint64_t archive_size = 0;
  std::vector<ManifestEntry> entries;
  std::vector<std::string> skipped;  // "path: reason" for entries left out of the archive
  nlohmann::json metadata = nlohmann::json::object();

  nlohmann::json toJson() const;
  static Result<Manifest> fromJson(const nlohmann::json& j);
};

// Summary for `akactl snapshot list|show` (hash, size, counts, metadata; entries only if asked).
nlohmann::json describe(const Manifest& m, bool withEntries = false);

// True when `relPath` (of an entry of the given kind) matches one of the exclude patterns.
bool isExcluded(const std::string& relPath, bool isDir, const std::vector<std::string>& patterns);

// Writes `archive` (and nothing else) from the tree under `dir`. On failure the partial archive
// is removed. The manifest is returned, not written: callers decide where it lives.
Result<Manifest> createArchive(const std::filesystem::path& dir, const std::filesystem::path& archive,
                               const CreateOptions& options, const nlohmann::json& metadata);

// Extracts into `dest`, which must be absent or an empty directory. Everything is written into a
// private staging directory beside `dest` and renamed into place only when the whole archive
// passed every check; a refused archive leaves `dest` as it was and no staging directory.
Status extractArchive(const std::filesystem::path& archive, const std::filesystem::path& dest,
                      const Limits& limits);

// Hashes `archive`, compares it with the manifest's archive_sha256/size, and checks that the
// archive decodes to exactly the manifest's entries (paths, types, sizes, modes, content hashes).
// Decoding is held to `limits` like extraction (pass the limits the archive was created under).
Result<Manifest> verifyArchive(const std::filesystem::path& archive, const std::filesystem::path& manifest,
                               const Limits& limits = {});

// Reads a manifest file.
Result<Manifest> readManifest(const std::filesystem::path& path);

// "x.tar.zst" -> "x.json"; anything else -> name + ".json".
std::filesystem::path manifestPathFor(const std::filesystem::path& archive);

}  // namespace akad::snapshot
