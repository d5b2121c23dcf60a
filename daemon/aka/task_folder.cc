#include "daemon/aka/task_folder.h"

#include "daemon/aka/helpers.h"

namespace fs = std::filesystem;

namespace akad::aka {
namespace {

constexpr std::size_t kMaxFileBytes = 64 << 20;      // one file of a task folder
constexpr std::size_t kMaxTaskBytes = 1ull << 30;    // all of them
constexpr std::size_t kMaxScannedBytes = 4 << 20;    // source files the rules read
constexpr std::size_t kMaxHelperBytes = 4 << 20;

bool isScannedSource(const std::string& path) {
  for (const char* ext : {".py", ".hip", ".cpp", ".cc", ".cu", ".cuh", ".h", ".hpp", ".c", ".inc", ".sh"})
    if (path.ends_with(ext)) return true;
  return false;
}

ReadFile* findContent(TaskFolder& folder, const std::string& rel) {
  for (auto& c : folder.contents)
    if (c.rel == rel) return &c;
  return nullptr;
}

bool usesRocmbenchHelper(const TaskFolder& folder) {
  for (const auto& c : folder.contents)
    if (c.rel.find('/') == std::string::npos && c.rel.ends_with(".py") &&
        (c.rel == kRocmbenchHelper || c.bytes.find("performance_utils_pytest") != std::string::npos))
      return true;
  return false;
}

}  // namespace

TaskFolder readTaskFolder(FileLedger& ledger, const std::string& base) {
  TaskFolder folder;
  std::size_t total = 0;
  std::error_code ec;
  const fs::path dir = ledger.root() / base;
  for (fs::recursive_directory_iterator it(dir, fs::directory_options::none, ec), end; !ec && it != end;
       it.increment(ec)) {
    const std::string rel = it->path().lexically_relative(dir).generic_string();
    const auto st = it->symlink_status(ec);
    if (fs::is_directory(st)) {
      if (it->path().filename() == ".git") it.disable_recursion_pending();
      continue;
    }
    TaskFile f;
    f.path = rel;
    if (fs::is_symlink(st)) {
      f.symlink = true;
      folder.files.push_back(f);
      continue;
    }
    if (!fs::is_regular_file(st)) continue;  // sockets, fifos: nothing a task needs
    const std::uintmax_t size = fs::file_size(it->path(), ec);
    if (ec || size > kMaxFileBytes || total + size > kMaxTaskBytes) {
      f.too_large = true;
      if (auto h = ledger.hash(base + "/" + rel); !h) folder.problem = h.error().message;
      folder.files.push_back(f);
      ec.clear();
      continue;
    }
    auto bytes = ledger.read(base + "/" + rel, kMaxFileBytes);
    if (!bytes) {
      folder.problem = bytes.error().message;
      continue;
    }
    total += bytes->size();
    f.lfs_pointer = bytes->size() < 1024 && bytes->rfind("version https://git-lfs.github.com/spec/", 0) == 0;
    if (isScannedSource(rel) && bytes->size() <= kMaxScannedBytes) {
      f.text = *bytes;
      f.scanned = true;
    }
    folder.files.push_back(std::move(f));
    folder.contents.push_back({rel, std::move(*bytes), (st.permissions() & fs::perms::owner_exec) != fs::perms::none});
  }
  if (ec) folder.problem = "cannot walk " + dir.string() + ": " + ec.message();
  return folder;
}

// Fills AKA's helpers into the folder's copy (AKA's materialize_perf_helpers_in_workspace does
// it in each run workspace). Returns the files it changed.
Result<std::vector<std::string>> materialiseHelpers(FileLedger& ledger, TaskFolder& folder) {
  std::vector<std::string> changed;
  if (usesRocmbenchHelper(folder)) {
    auto helper = ledger.read(kRocmbenchHelperSource, kMaxHelperBytes);
    if (!helper) return Error{"the checkout's " + std::string(kRocmbenchHelperSource) + " cannot be read: " + helper.error().message};
    if (ReadFile* f = findContent(folder, kRocmbenchHelper)) f->bytes = *helper;
    else folder.contents.push_back({kRocmbenchHelper, *helper, false});
    changed.push_back(kRocmbenchHelper);
  }
  if (ReadFile* runner = findContent(folder, kRunnerWithHelpers);
      runner && runner->bytes.find(kMarkStart) != std::string::npos) {
    auto helper = ledger.read(kVllmHelperSource, kMaxHelperBytes);
    if (!helper) return Error{"the checkout's " + std::string(kVllmHelperSource) + " cannot be read: " + helper.error().message};
    auto filled = fillHelperRegion(runner->bytes, *helper);
    if (!filled) return Error{std::string(kRunnerWithHelpers) + ": " + filled.error().message};
    runner->bytes = *filled;
    changed.push_back(kRunnerWithHelpers);
  }
  return changed;
}

}  // namespace akad::aka
