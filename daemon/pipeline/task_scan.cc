#include "daemon/pipeline/task_scan.h"

#include <algorithm>
#include <system_error>

#include "daemon/pipeline/task.h"

namespace fs = std::filesystem;

namespace akad {

namespace {
constexpr const char* kSharedHarnessFolder = "common";
}  // namespace

bool isTaskFolder(const fs::path& dir) {
  std::error_code ec;
  if (dir.parent_path().filename() == kSharedHarnessFolder) return false;
  return fs::is_directory(dir, ec) && fs::is_regular_file(dir / "task.yaml", ec);
}

Result<std::vector<TaskFolder>> findTaskFolders(const fs::path& root) {
  std::vector<TaskFolder> found;
  std::error_code ec;
  fs::directory_iterator suite(root, ec), end;
  if (ec == std::errc::no_such_file_or_directory) return found;
  for (; !ec && suite != end; suite.increment(ec)) {
    std::error_code ec2;
    if (!suite->is_directory(ec2) || suite->path().filename() == kSharedHarnessFolder) continue;
    for (fs::directory_iterator task(suite->path(), ec2); !ec2 && task != end; task.increment(ec2))
      if (isTaskFolder(task->path()))
        found.push_back({suite->path().filename().string() + "/" + task->path().filename().string(), task->path()});
    if (ec2) return errorCodeError("cannot scan the suite " + suite->path().string(), ec2);
  }
  if (ec) return errorCodeError("cannot scan tasks directory " + root.string(), ec);
  std::sort(found.begin(), found.end(), [](const TaskFolder& a, const TaskFolder& b) { return a.id < b.id; });
  return found;
}

TaskCatalogScan scanTasks(const fs::path& tasksRoot) {
  TaskCatalogScan scan;
  auto folders = findTaskFolders(tasksRoot);
  if (!folders) {
    scan.errors.push_back(folders.error().message);
    return scan;
  }
  for (const TaskFolder& f : *folders) {
    auto t = loadTask(f.dir);
    if (t) scan.tasks.push_back(std::move(*t));
    else scan.errors.push_back(t.error().message);
  }
  return scan;
}

}  // namespace akad
