#pragma once
// Which folders are tasks: the one rule for the task catalog (run.submit's selectors),
// tasks.list and every other scan of a tasks root. A task is <root>/<suite>/<task>, a
// directory holding a regular file task.yaml; `common` is the harness code the suites share,
// never a suite. Reading task.yaml is loadTask's job (task.h).

#include <filesystem>
#include <string>
#include <vector>

#include "common/result.h"

namespace akad {

struct TaskFolder {
  std::string id;  // "suite/task"
  std::filesystem::path dir;
};

// Whether `dir` (<root>/<suite>/<task>) is a task folder by that rule.
bool isTaskFolder(const std::filesystem::path& dir);

// Every task folder under `root`, sorted by id. A root that does not exist holds none; one
// that exists but cannot be read is an error naming it.
Result<std::vector<TaskFolder>> findTaskFolders(const std::filesystem::path& root);

// Where importTask keeps a task version (task.h): <tasksDir>/<content hash>/def, a tasks root
// of its own, and in it the task's folder (`taskId` "suite/task"). tasksDir is <state>/tasks,
// or the tasks/ of a Slurm shared area.
inline std::filesystem::path taskVersionRoot(const std::filesystem::path& tasksDir, const std::string& hash) {
  return tasksDir / hash / "def";
}
inline std::filesystem::path taskVersionDir(const std::filesystem::path& tasksDir, const std::string& hash,
                                            const std::string& taskId) {
  return taskVersionRoot(tasksDir, hash) / taskId;
}

}  // namespace akad
