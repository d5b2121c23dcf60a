// Tasks as a catalog and as imported versions: loading one (its file, then its version's
// hash; task_scan.cc finds the task folders of a root), the common harness layers a task is assembled from, and the
// copy of one version in the state dir. Reading task.yaml is in task_file.cc, a version's hash
// in task_hash.cc.
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <regex>

#include "daemon/pipeline/files.h"
#include "daemon/pipeline/task.h"
#include "daemon/pipeline/task_scan.h"

namespace fs = std::filesystem;

namespace akad {

Result<Task> loadTask(const fs::path& dir) {
  auto t = readTaskFile(dir);
  if (!t) return t.error();
  auto hash = taskVersionHash(*t);
  if (!hash) return hash.error();
  t->content_hash = *hash;
  return t;
}

}  // namespace akad

namespace akad {

std::vector<std::string> harnessLayers(const fs::path& tasksRoot, const std::string& harness) {
  static const std::regex nameRe("[a-z0-9_-]{1,32}");
  std::vector<std::string> layers;
  std::ifstream base(tasksRoot / "common" / harness / "BASE");
  std::string line;
  while (std::getline(base, line))
    if (std::regex_match(line, nameRe) && line != harness && line != "checker") layers.push_back(line);
  layers.push_back(harness);
  layers.push_back("checker");
  return layers;
}

Result<fs::path> importTask(const Task& task, const fs::path& stateDir) {
  const fs::path root = taskVersionRoot(stateDir / "tasks", task.content_hash);
  if (fs::exists(root / ".complete")) return root;
  std::error_code ec;
  const fs::path tmp = stateDir / "tasks" / task.content_hash / ("def.tmp-" + std::to_string(::getpid()) + "-" +
                                                                  std::to_string(reinterpret_cast<uintptr_t>(&task)));
  const std::string into = "cannot import task " + task.id + " into " + tmp.string();
  fs::remove_all(tmp, ec);
  if (ec) return errorCodeError(into + ": removing what an earlier import left", ec);
  fs::create_directories(tmp / task.suite, ec);
  if (ec) return errorCodeError(into, ec);
  fs::copy(task.dir, tmp / task.suite / task.dir.filename(), fs::copy_options::recursive | fs::copy_options::copy_symlinks, ec);
  if (ec) return errorCodeError(into, ec);
  for (const std::string& part : harnessLayers(task.dir.parent_path().parent_path(), task.harness)) {
    const fs::path common = task.dir.parent_path().parent_path() / "common" / part;
    if (!fs::is_directory(common)) continue;
    fs::create_directories(tmp / "common", ec);
    if (!ec) fs::copy(common, tmp / "common" / part, fs::copy_options::recursive | fs::copy_options::copy_symlinks, ec);
    if (ec) return errorCodeError("cannot import the common harness of " + task.id, ec);
  }
  // The marker says the tree is whole; a tree without it is imported again.
  if (auto s = writeFile(tmp / ".complete", task.content_hash + "\n"); !s) return Error{into + ": " + s.error().message, 0, s.error().sysErrno};
  fs::rename(tmp, root, ec);
  // Another import of the same version may have moved its tree into place first.
  if (ec && !fs::exists(root / ".complete")) return errorCodeError("cannot move imported task into " + root.string(), ec);
  fs::remove_all(tmp, ec);
  return root;
}

}  // namespace akad
