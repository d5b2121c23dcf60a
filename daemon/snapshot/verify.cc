// Verification reads the archive once: the compressed bytes are hashed as they are read and the
// decoded entries are compared with the manifest, so "the hash matches" and "the manifest
// describes the content" are both checked against the same bytes.

#include <fstream>
#include <sstream>

#include "common/sha256.h"
#include "daemon/snapshot/archive_reader.h"
#include "daemon/snapshot/snapshot.h"

namespace akad::snapshot {

Result<Manifest> readManifest(const std::filesystem::path& path) {
  std::ifstream in(path);
  if (!in) return errnoError("cannot open manifest " + path.string());
  nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
  if (j.is_discarded()) return Error{"manifest " + path.string() + " is not valid JSON", 0};
  auto m = Manifest::fromJson(j);
  if (!m) return Error{path.string() + ": " + m.error().message, 0};
  return m;
}

namespace {
const char* typeString(EntryType t) {
  return t == EntryType::File ? "file" : t == EntryType::Dir ? "dir" : "symlink";
}
}  // namespace

Result<Manifest> verifyArchive(const std::filesystem::path& archive, const std::filesystem::path& manifestPath,
                               const Limits& limits) {
  auto m = readManifest(manifestPath);
  if (!m) return m.error();
  std::error_code ec;
  uint64_t size = std::filesystem::file_size(archive, ec);
  if (ec) return Error{"cannot stat archive " + archive.string() + ": " + ec.message(), 0};
  if (size != m->archive_size)
    return Error{"archive " + archive.string() + " is " + std::to_string(size) + " bytes but the manifest says " +
                     std::to_string(m->archive_size),
                 0};

  auto reader = ArchiveReader::open(archive, limits, /*hashCompressed=*/true);
  if (!reader) return reader.error();
  auto mismatch = [&](const std::string& why) {
    return Error{"archive " + archive.string() + " does not match manifest " + manifestPath.string() + ": " + why, 0};
  };
  size_t i = 0;
  for (;; ++i) {
    auto entry = (*reader)->next();
    if (!entry) return entry.error();
    if (!entry->has_value()) break;
    const CheckedEntry& e = **entry;
    if (i >= m->entries.size()) return mismatch("extra entry '" + e.path + "'");
    const ManifestEntry& me = m->entries[i];
    if (me.path != e.path) return mismatch("entry " + std::to_string(i) + " is '" + e.path + "', manifest has '" + me.path + "'");
    if (me.type != typeString(e.type)) return mismatch("'" + e.path + "' is a " + typeString(e.type) + ", manifest says " + me.type);
    if (me.mode != e.perm) return mismatch("'" + e.path + "' has a different mode");
    if (e.type == EntryType::Symlink && me.link_target != e.linkTarget) return mismatch("'" + e.path + "' has a different link target");
    if (e.type == EntryType::File) {
      if (me.size != e.size) return mismatch("'" + e.path + "' has a different size");
      Sha256 h;
      if (auto s = (*reader)->readData([&](const char* p, size_t n) -> Status {
            h.update(p, n);
            return {};
          });
          !s)
        return s.error();
      if (h.hexDigest() != me.sha256) return mismatch("content of '" + e.path + "' has a different SHA-256");
    }
  }
  if (i != m->entries.size()) return mismatch("archive ends before manifest entry '" + m->entries[i].path + "'");
  auto hash = (*reader)->finish();
  if (!hash) return hash.error();
  if (*hash != m->archive_sha256)
    return Error{"archive " + archive.string() + " has SHA-256 " + *hash + " but the manifest says " + m->archive_sha256, 0};
  return m;
}

}  // namespace akad::snapshot
