#include "daemon/aka/build_cache.h"

#include <algorithm>
#include <cctype>
#include <set>

#include "common/sha256.h"
#include "daemon/pipeline/files.h"

namespace fs = std::filesystem;

namespace akad::aka {
namespace {

constexpr std::size_t kMaxEntryFiles = 200000;

bool isEntryName(const std::string& name) {
  return name.size() == 64 && std::all_of(name.begin(), name.end(), [](char c) { return std::isxdigit(static_cast<unsigned char>(c)); });
}

// The bytes and files under dir (links not followed), or an error past the limits.
Result<std::uintmax_t> folderSize(const fs::path& dir, std::uintmax_t maxBytes) {
  std::uintmax_t bytes = 0;
  std::size_t files = 0;
  std::error_code ec;
  for (fs::recursive_directory_iterator it(dir, ec), end; it != end; it.increment(ec)) {
    if (ec) break;
    const auto st = it->symlink_status(ec);
    if (ec || !fs::is_regular_file(st)) continue;
    bytes += it->file_size(ec);
    if (++files > kMaxEntryFiles) return Error{"more than " + std::to_string(kMaxEntryFiles) + " files"};
    if (bytes > maxBytes) return Error{"more than " + std::to_string(maxBytes >> 20) + " MiB"};
  }
  if (ec) return Error{"cannot walk " + dir.string() + ": " + ec.message()};
  return bytes;
}

// Removes the least recently used entries (by their folder's time, which a restore renews)
// beyond `keep`.
void evict(const fs::path& root, std::size_t keep) {
  std::vector<std::pair<fs::file_time_type, fs::path>> entries;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(root, ec))
    if (isEntryName(e.path().filename().string()) && e.is_directory(ec)) entries.emplace_back(e.last_write_time(ec), e.path());
  if (entries.size() <= keep) return;
  std::sort(entries.begin(), entries.end());
  for (std::size_t i = 0; i + keep < entries.size(); ++i) fs::remove_all(entries[i].second, ec);
}

}  // namespace

Result<std::string> candidateBuildKey(const std::string& taskHash, const std::string& scope,
                                      const std::vector<std::string>& editable, const fs::path& workspace) {
  Sha256 h;
  h.update(std::string_view("akad aka candidate build cache 1\0", 34));
  for (const std::string& part : {taskHash, scope}) {
    h.update(part);
    h.update(std::string_view("\0", 1));
  }
  const std::set<std::string> paths(editable.begin(), editable.end());
  for (const auto& rel : paths) {
    h.update(rel);
    h.update(std::string_view("\0", 1));
    std::error_code ec;
    if (!fs::is_regular_file(fs::symlink_status(workspace / rel, ec))) {
      h.update(std::string_view("absent\0", 7));
      continue;
    }
    auto digest = sha256File(workspace / rel);
    if (!digest) return digest.error();
    h.update(*digest);
    h.update(std::string_view("\0", 1));
  }
  return h.hexDigest();
}

Result<bool> restoreCandidateBuild(const fs::path& root, const std::string& key, const fs::path& jit) {
  if (!isEntryName(key)) return Error{"build cache key " + key + " is not a SHA-256"};
  const fs::path entry = root / key;
  std::error_code ec;
  if (!fs::is_directory(fs::symlink_status(entry, ec))) return false;
  if (fs::exists(jit, ec)) return Error{"cannot restore a build into " + jit.string() + ": it exists"};
  if (auto s = copyTree(entry, jit, FileTimes::Kept); !s) {
    fs::remove_all(jit, ec);
    return s.error();
  }
  fs::last_write_time(entry, fs::file_time_type::clock::now(), ec);  // recently used
  return true;
}

Result<std::string> publishCandidateBuild(const fs::path& root, const std::string& key, const fs::path& jit,
                                          const BuildCacheLimits& limits) {
  if (!isEntryName(key)) return Error{"build cache key " + key + " is not a SHA-256"};
  std::error_code ec;
  const fs::path entry = root / key;
  if (fs::exists(entry, ec)) return std::string("kept already");
  auto size = folderSize(jit, limits.entry_bytes);
  if (!size) return "not kept: " + size.error().message;
  fs::create_directories(root, ec);
  if (ec) return Error{"cannot create " + root.string() + ": " + ec.message()};
  fs::permissions(root, fs::perms::owner_all, ec);
  const fs::path tmp = root / (key + ".tmp-" + randomHex(4));
  if (auto s = copyTree(jit, tmp, FileTimes::Kept); !s) {
    fs::remove_all(tmp, ec);
    return s.error();
  }
  fs::rename(tmp, entry, ec);
  if (ec) {  // another scoring of the same bytes kept its own first
    fs::remove_all(tmp, ec);
    return std::string("kept already");
  }
  evict(root, limits.entries);
  return "kept (" + std::to_string(*size >> 10) + " KiB)";
}

}  // namespace akad::aka
