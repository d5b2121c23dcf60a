#pragma once
// Stage 1 of an attempt, and the scorer's clean workspace: both start from the task's
// pristine files. The agent's copy and the scorer's copy are separate trees; the scorer takes
// only the `editable` files from what the agent left behind.

#include <filesystem>
#include <string>
#include <vector>

#include "common/result.h"
#include "daemon/pipeline/task.h"

namespace akad {

// A workspace's flat harness/ folder, in harnessDir: the harness's layers in harnessLayers'
// order, then `own` (a task's harness/ folder; empty: none), later files winning, without the
// layers' BASE file. The pristine workspace and the harness's shared build both start from it.
Status assembleHarnessLayers(const std::filesystem::path& tasksRoot, const std::string& harness,
                             const std::filesystem::path& own, const std::filesystem::path& harnessDir);

// workspace/ + harness/ (tasks/common/<harness>/ then the task's harness/) + configs.json with
// the visible configurations. Never: task.yaml, held-out configurations, solution/, seeds.
Status assemblePristineWorkspace(const Task& task, const std::filesystem::path& tasksRoot,
                                 const std::filesystem::path& dest);

// The agent's starting point: the pristine workspace plus PROMPT.md.
Status prepareAgentWorkspace(const Task& task, const std::filesystem::path& tasksRoot,
                             const std::filesystem::path& dest);

// What the agent changed outside its allow-list: ignored when scoring, listed in the result.
struct ScoringWorkspace {
  std::vector<std::string> taken;    // editable files copied from the candidate tree
  std::vector<std::string> ignored;  // "path (changed|added|deleted)" outside the allow-list
};
Result<ScoringWorkspace> assembleScoringWorkspace(const Task& task,
                                                  const std::filesystem::path& tasksRoot,
                                                  const std::filesystem::path& candidateTree,
                                                  const std::filesystem::path& dest);

}  // namespace akad
