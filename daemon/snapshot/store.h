#pragma once
// The content-addressed snapshot store under <state dir>/snapshots:
//   sha256/ab/<hash>.tar.zst   the archive (the truth)
//   sha256/ab/<hash>.json      its manifest (the index)
//   sha256/ab/<hash>.corrupt   present once a read found the archive's hash wrong
//   tmp/                       archives being written; never read, removed by gc
//   .lock                      add() holds it shared, gc() exclusive

#include <cstdint>
#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/result.h"
#include "daemon/snapshot/snapshot.h"

namespace akad::snapshot {

struct GcReport {
  std::vector<std::string> removed;  // hashes of the snapshots removed
  uint64_t bytes_freed = 0;
  uint64_t temp_files_removed = 0;
  nlohmann::json toJson() const;
};

class SnapshotStore {
 public:
  explicit SnapshotStore(std::filesystem::path root);

  // Snapshots `workspace`: tmp file -> fsync -> rename -> fsync dir, archive first, manifest
  // second, so a crash leaves either nothing or a complete archive under its final name. If the
  // same archive is already stored the existing files are kept (their manifest keeps the first
  // writer's metadata); the returned manifest carries this call's metadata.
  Result<Manifest> add(const std::filesystem::path& workspace, const CreateOptions& options,
                       const nlohmann::json& metadata);
  // The archive's path after re-hashing it. A mismatch marks the snapshot corrupt and fails,
  // now and on every later call, until an add() stores the correct bytes again.
  Result<std::filesystem::path> openVerified(const std::string& sha256);
  Result<Manifest> manifest(const std::string& sha256);
  std::vector<Manifest> list();
  bool isCorrupt(const std::string& sha256) const;
  // Removes every snapshot whose hash is not in `referenced`, and all leftover temporary files.
  Result<GcReport> gc(const std::set<std::string>& referenced);
  // Copies a verified archive and its manifest out of the store (`akactl snapshot export`):
  // writes `archive` and manifestPathFor(archive).
  Status exportTo(const std::string& sha256, const std::filesystem::path& archive);
  // The reverse, for an archive another machine made (the Slurm executor's nodes): copies
  // `archive` and manifestPathFor(archive) in, and keeps them only if the copy hashes to
  // `sha256` and the manifest names that hash.
  Result<Manifest> importVerified(const std::filesystem::path& archive, const std::string& sha256);

  // JSON bodies for the daemon's snapshot.list / snapshot.show handlers.
  nlohmann::json listJson();
  Result<nlohmann::json> showJson(const std::string& sha256);

  std::filesystem::path archivePath(const std::string& sha256) const;
  std::filesystem::path manifestPath(const std::string& sha256) const;
  const std::filesystem::path& root() const { return root_; }

 private:
  std::filesystem::path corruptMarkerPath(const std::string& sha256) const;
  Status ensureLayout();

  std::filesystem::path root_;
};

}  // namespace akad::snapshot
