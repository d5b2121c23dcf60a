#pragma once
// Which tasks exist under the tasks roots (by daemon/pipeline/task_scan.h's rule), for
// resolving run.submit's selectors; reading task.yaml itself is the task loader's job.

#include <filesystem>
#include <string>
#include <vector>

#include "common/result.h"
#include "daemon/pipeline/task.h"

namespace akad {

class TaskCatalog {
 public:
  explicit TaskCatalog(std::filesystem::path root) : root_(std::move(root)) {}

  // The tasks root given at start-up (--tasks-dir).
  const std::filesystem::path& root() const { return root_; }
  // A further tasks root akad owns (the imported AgentKernelArena tasks, daemon/aka/), scanned
  // after root(); it may not exist yet. Its suites must not repeat root()'s: the first wins.
  void addRoot(std::filesystem::path root) { extraRoots_.push_back(std::move(root)); }
  // The root that holds a task id ("suite/task"), root() when none does.
  std::filesystem::path rootOf(const std::string& id) const;

  // All task ids ("suite/task"), sorted. Scanned on each call so new task folders count at once.
  Result<std::vector<std::string>> list() const;

  // Resolves selectors to task ids, in catalog order without duplicates. A selector is a suite
  // ("cpu"), a task ("cpu/softmax") or an fnmatch glob over "suite/task" ("cpu/*", "*/gemm*").
  // Every selector must match at least one task, else kNoTasksMatch naming it.
  Result<std::vector<std::string>> resolve(const std::vector<std::string>& selectors) const;

  // Loads and validates one task ("suite/task"); the error names the file and field.
  Result<Task> load(const std::string& id) const;

 private:
  std::filesystem::path root_;
  std::vector<std::filesystem::path> extraRoots_;
};

}  // namespace akad
