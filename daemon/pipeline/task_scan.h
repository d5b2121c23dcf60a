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

}  // namespace akad
