#include "daemon/pipeline/prepare.h"

#include <algorithm>
#include <set>

#include "common/sha256.h"
#include "daemon/pipeline/files.h"

namespace fs = std::filesystem;

namespace akad {
namespace {

std::set<std::string> regularFiles(const fs::path& root) {
  std::set<std::string> out;
  std::error_code ec;
  if (!fs::exists(root)) return out;
  for (fs::recursive_directory_iterator it(root, ec), end; it != end; it.increment(ec)) {
    if (ec) break;
    if (it->is_regular_file(ec) && !it->is_symlink(ec))
      out.insert(fs::relative(it->path(), root).generic_string());
  }
  return out;
}

bool sameContent(const fs::path& a, const fs::path& b) {
  auto ha = sha256File(a);
  auto hb = sha256File(b);
  return ha && hb && *ha == *hb;
}

}  // namespace

Status assembleHarnessLayers(const fs::path& tasksRoot, const std::string& harness, const fs::path& own,
                             const fs::path& harnessDir) {
  std::vector<fs::path> parts;
  for (const auto& layer : harnessLayers(tasksRoot, harness)) parts.push_back(tasksRoot / "common" / layer);
  if (!own.empty()) parts.push_back(own);
  for (const fs::path& part : parts)
    if (fs::is_directory(part))
      if (auto s = copyTree(part, harnessDir); !s) return s;
  // BASE tells harnessLayers a layer's bases (tasks/common/hip/BASE); it is no harness file.
  std::error_code ec;
  fs::remove(harnessDir / "BASE", ec);
  return {};
}

Status assemblePristineWorkspace(const Task& task, const fs::path& tasksRoot, const fs::path& dest) {
  if (auto s = copyTree(task.workspaceDir(), dest); !s) return s;
  // One flat harness/ folder: the common harness with its bases, the checker (for the agent's
  // `make test`), then the task's own files (docs/tasks.md).
  if (auto s = assembleHarnessLayers(tasksRoot, task.harness, task.harnessDir(), dest / "harness"); !s) return s;
  return writeFile(dest / "configs.json", task.configsJson(/*withHeldOut=*/false).dump(2) + "\n");
}

Status prepareAgentWorkspace(const Task& task, const fs::path& tasksRoot, const fs::path& dest) {
  if (auto s = assemblePristineWorkspace(task, tasksRoot, dest); !s) return s;
  std::string prompt = "# " + task.title + " (" + task.id + ")\n\n" + task.prompt + "\n\nFiles you may edit: ";
  for (std::size_t i = 0; i < task.editable.size(); ++i) prompt += (i ? ", " : "") + task.editable[i];
  prompt += "\n";
  return writeFile(dest / "PROMPT.md", prompt);
}

Result<ScoringWorkspace> assembleScoringWorkspace(const Task& task, const fs::path& tasksRoot,
                                                  const fs::path& candidateTree, const fs::path& dest) {
  if (auto s = assemblePristineWorkspace(task, tasksRoot, dest); !s) return s.error();
  ScoringWorkspace ws;
  const std::set<std::string> editable(task.editable.begin(), task.editable.end());
  const std::set<std::string> pristine = regularFiles(dest);
  const std::set<std::string> candidate = regularFiles(candidateTree);

  for (const auto& rel : candidate) {
    if (editable.count(rel)) continue;
    if (rel == "PROMPT.md") continue;  // written for the agent, not part of the task
    if (!pristine.count(rel)) ws.ignored.push_back(rel + " (added)");
    else if (!sameContent(candidateTree / rel, dest / rel)) ws.ignored.push_back(rel + " (changed)");
  }
  for (const auto& rel : pristine)
    if (!candidate.count(rel) && !editable.count(rel)) ws.ignored.push_back(rel + " (deleted)");

  for (const auto& rel : task.editable) {
    const fs::path from = candidateTree / rel;
    std::error_code ec;
    auto st = fs::symlink_status(from, ec);
    if (ec || !fs::is_regular_file(st)) continue;  // a deleted or replaced-by-link file keeps the pristine one
    if (auto s = copyFile(from, dest / rel); !s) return s.error();
    ws.taken.push_back(rel);
  }
  return ws;
}

}  // namespace akad
