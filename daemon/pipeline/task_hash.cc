// A task version's identity: the SHA-256 of its folder and of the common harness layers it is
// scored with, cached by the files' status so that an unchanged task is not read again.
#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <ctime>
#include <map>
#include <mutex>

#include "common/sha256.h"
#include "daemon/pipeline/task.h"

namespace fs = std::filesystem;

namespace akad {

namespace {
std::atomic<std::uint64_t> g_treesHashed{0};
}  // namespace

std::uint64_t taskTreesHashed() { return g_treesHashed.load(); }

Result<std::string> taskContentHash(const fs::path& dir) {
  std::vector<std::pair<std::string, fs::path>> files;
  std::error_code ec;
  for (fs::recursive_directory_iterator it(dir, fs::directory_options::none, ec), end; it != end;
       it.increment(ec)) {
    if (ec) break;
    const auto st = it->symlink_status(ec);
    if (fs::is_regular_file(st) || fs::is_symlink(st))
      files.emplace_back(fs::relative(it->path(), dir).generic_string(), it->path());
  }
  if (ec) return Error{"cannot walk task folder " + dir.string() + ": " + ec.message()};
  std::sort(files.begin(), files.end());
  // What each file is now, short of its bytes. The status-change time (ctime) moves with every
  // write, rename and chmod, and no one can set it back, so an unchanged stamp means unchanged
  // files: the hash of the last call stands, and tasks.list and run.submit read no file again.
  // File times are coarse (a clock tick): a stamp is kept only once every file in it is more
  // than a second old, so a write in the same tick as the stamp cannot hide behind it.
  std::vector<struct stat> stats(files.size());
  std::string stamp;
  time_t newest = 0;
  for (std::size_t i = 0; i < files.size(); ++i) {
    struct stat& st = stats[i];
    if (::lstat(files[i].second.c_str(), &st) != 0) return errnoError("cannot stat " + files[i].second.string());
    newest = std::max({newest, st.st_mtim.tv_sec, st.st_ctim.tv_sec});
    stamp += files[i].first + '\0' + std::to_string(st.st_dev) + ':' + std::to_string(st.st_ino) + ':' +
             std::to_string(st.st_mode) + ':' + std::to_string(st.st_size) + ':' + std::to_string(st.st_mtim.tv_sec) +
             '.' + std::to_string(st.st_mtim.tv_nsec) + ':' + std::to_string(st.st_ctim.tv_sec) + '.' +
             std::to_string(st.st_ctim.tv_nsec) + '\n';
  }
  static std::mutex cacheMutex;
  static std::map<std::string, std::pair<std::string, std::string>> cache;  // dir -> (stamp, hash)
  const std::string key = fs::absolute(dir).lexically_normal().string();
  {
    std::lock_guard lock(cacheMutex);
    if (auto it = cache.find(key); it != cache.end() && it->second.first == stamp) return it->second.second;
  }
  ++g_treesHashed;
  Sha256 h;
  for (std::size_t i = 0; i < files.size(); ++i) {
    const auto& [rel, path] = files[i];
    const struct stat& st = stats[i];
    std::string content;
    if (S_ISLNK(st.st_mode)) {
      content = "link:" + fs::read_symlink(path, ec).string();
    } else {
      auto fh = sha256File(path);
      if (!fh) return fh.error();
      content = ((st.st_mode & 0111) ? "exec:" : "file:") + *fh;
    }
    h.update(rel);
    h.update("\0", 1);
    h.update(content);
    h.update("\n", 1);
  }
  std::string hash = h.hexDigest();
  if (newest >= ::time(nullptr) - 1) return hash;
  std::lock_guard lock(cacheMutex);
  if (cache.size() > 4096) cache.clear();  // task folders come and go; keep it bounded
  cache[key] = {std::move(stamp), hash};
  return hash;
}

// The common harness is part of what a result was scored with, so it is part of the identity.
Result<std::string> taskVersionHash(const Task& t) {
  auto hash = taskContentHash(t.dir);
  if (!hash) return hash.error();
  const fs::path tasksRoot = t.dir.parent_path().parent_path();
  std::string commonHash;
  for (const std::string& part : harnessLayers(tasksRoot, t.harness)) {
    const fs::path common = tasksRoot / "common" / part;
    if (!fs::is_directory(common)) continue;
    auto ch = taskContentHash(common);
    if (!ch) return ch.error();
    commonHash += part + "=" + *ch + ";";
  }
  return sha256Hex(*hash + ":" + commonHash);
}

}  // namespace akad
