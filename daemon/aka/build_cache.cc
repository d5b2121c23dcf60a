#include "daemon/aka/build_cache.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <set>

#include "common/fd_copy.h"
#include "common/sha256.h"
#include "common/unique_fd.h"
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
  if (fs::exists(fs::symlink_status(jit, ec))) return Error{"cannot restore a build into " + jit.string() + ": it exists"};
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
  // The candidate's code may have swapped its folder for a link to one of anybody's: only a
  // folder is kept, and copyTree follows no link inside it.
  if (!fs::is_directory(fs::symlink_status(jit, ec))) return std::string("not kept: the build folder is not a folder");
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

namespace {

constexpr std::uintmax_t kMaxModuleBytes = 1ull << 30;
constexpr int kMaxSeededModules = 64;

bool isModuleName(const std::string& name) {
  return name.size() > 3 && name.size() < 200 && name.ends_with(".so") &&
         std::all_of(name.begin(), name.end() - 3, [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; });
}

// The folder `name` in `at`, made (owned by uid:gid) when absent; never a link.
Result<UniqueFd> subdirNoFollow(int at, const char* name, uid_t uid, gid_t gid) {
  if (::mkdirat(at, name, 0755) == 0) {
    if (::fchownat(at, name, uid, gid, AT_SYMLINK_NOFOLLOW) != 0) return errnoError(std::string("chown ") + name);
  } else if (errno != EEXIST) {
    return errnoError(std::string("mkdir ") + name);
  }
  UniqueFd fd(::openat(at, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!fd.valid()) return errnoError(std::string("open ") + name + " (a link or not a folder?)");
  return fd;
}

// Copies the regular file `from` into a new file `name` of folder `at`, owned by uid:gid.
Status copyModule(const fs::path& from, int at, const std::string& name, uid_t uid, gid_t gid) {
  UniqueFd in(::open(from.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
  if (!in.valid()) return errnoError("open " + from.string());
  struct stat st {};
  if (::fstat(in.get(), &st) != 0 || !S_ISREG(st.st_mode) || static_cast<std::uintmax_t>(st.st_size) > kMaxModuleBytes)
    return Error{from.string() + " is not a module to copy"};
  UniqueFd out(::openat(at, name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0755));
  if (!out.valid()) return errnoError("create " + name);
  if (!copyFdBytes(out.get(), in.get(), st.st_size)) return errnoError("copy " + from.string());
  if (::fchown(out.get(), uid, gid) != 0) return errnoError("chown " + name);
  return {};
}

// The modules of the trusted entry `entry` into folder `tmp` (made in `built`), owned by uid:gid;
// how many.
Result<int> copyEntry(const fs::path& entry, int built, const std::string& tmp, uid_t uid, gid_t gid) {
  if (::mkdirat(built, tmp.c_str(), 0755) != 0) return errnoError("mkdir " + tmp);
  UniqueFd dir(::openat(built, tmp.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!dir.valid()) return errnoError("open " + tmp);
  int modules = 0;
  std::error_code ec;
  for (const auto& f : fs::directory_iterator(entry, ec)) {
    const std::string name = f.path().filename().string();
    if (!isModuleName(name) || !fs::is_regular_file(f.symlink_status(ec))) continue;
    if (auto s = copyModule(f.path(), dir.get(), name, uid, gid); !s) return s.error();
    ++modules;
  }
  if (::fchown(dir.get(), uid, gid) != 0) return errnoError("chown " + tmp);
  return modules;
}

// Removes `tmp` of `built` and what copyEntry made in it (names taken from `entry`).
void dropEntry(const fs::path& entry, int built, const std::string& tmp) {
  UniqueFd dir(::openat(built, tmp.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  std::error_code ec;
  if (dir.valid())
    for (const auto& f : fs::directory_iterator(entry, ec)) ::unlinkat(dir.get(), f.path().filename().c_str(), 0);
  ::unlinkat(built, tmp.c_str(), AT_REMOVEDIR);
}

}  // namespace

Result<int> seedBuiltExtensions(const fs::path& trustedJit, const fs::path& jit, uid_t uid, gid_t gid) {
  const fs::path trustedBuilt = trustedJit / "torch_extensions" / "akad-built";
  std::error_code ec;
  if (!fs::is_directory(fs::symlink_status(trustedBuilt, ec))) return 0;
  UniqueFd root(::open(jit.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!root.valid()) return errnoError("open " + jit.string());
  auto ext = subdirNoFollow(root.get(), "torch_extensions", uid, gid);
  if (!ext) return ext.error();
  auto built = subdirNoFollow(ext->get(), "akad-built", uid, gid);
  if (!built) return built.error();
  int copied = 0;
  for (const auto& entry : fs::directory_iterator(trustedBuilt, ec)) {
    const std::string key = entry.path().filename().string();
    if (!isEntryName(key) || !fs::is_directory(entry.symlink_status(ec))) continue;
    struct stat st {};
    if (::fstatat(built->get(), key.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 || errno != ENOENT) continue;  // has one
    if (copied >= kMaxSeededModules) break;
    // Made under a temporary name and renamed: the candidate never sees half a module.
    const std::string tmp = key + ".seed-" + randomHex(4);
    auto modules = copyEntry(entry.path(), built->get(), tmp, uid, gid);
    if (modules && *modules > 0 && ::renameat(built->get(), tmp.c_str(), built->get(), key.c_str()) == 0) {
      ++copied;
      continue;
    }
    dropEntry(entry.path(), built->get(), tmp);  // a module that failed, or an entry with none
    if (!modules) return modules.error();
  }
  return copied;
}

}  // namespace akad::aka
