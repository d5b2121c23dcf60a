#include "daemon/task_catalog.h"

#include <fnmatch.h>

#include <algorithm>
#include <set>
#include <system_error>

#include "common/protocol.h"
#include "daemon/pipeline/task_scan.h"

namespace akad {

namespace fs = std::filesystem;

namespace {

// Task ids under one tasks root.
Status scanRoot(const fs::path& root, std::vector<std::string>& ids) {
  auto folders = findTaskFolders(root);
  if (!folders) return folders.error();
  for (const TaskFolder& f : *folders) ids.push_back(f.id);
  return {};
}

}  // namespace

Result<std::vector<std::string>> TaskCatalog::list() const {
  std::error_code ec;
  if (!fs::is_directory(root_, ec)) {
    return Error{"tasks directory " + root_.string() + " does not exist or is not a directory",
                 protocol::kNoTasksMatch};
  }
  std::vector<std::string> ids;
  if (auto s = scanRoot(root_, ids); !s) return s.error();
  for (const fs::path& extra : extraRoots_)
    if (fs::is_directory(extra, ec))
      if (auto s = scanRoot(extra, ids); !s) return s.error();
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  return ids;
}

fs::path TaskCatalog::rootOf(const std::string& id) const {
  if (isTaskFolder(root_ / id)) return root_;
  for (const fs::path& extra : extraRoots_)
    if (isTaskFolder(extra / id)) return extra;
  return root_;
}

Result<std::vector<std::string>> TaskCatalog::resolve(const std::vector<std::string>& selectors) const {
  if (selectors.empty()) return Error{"no task selectors given", protocol::kInvalidParams};
  auto all = list();
  if (!all) return all.error();
  std::set<std::string> chosen;
  for (const std::string& sel : selectors) {
    if (sel.empty() || sel.size() > 256 || sel.find('\0') != std::string::npos) {
      return Error{"task selector \"" + sel + "\" is empty or too long", protocol::kInvalidParams};
    }
    bool glob = sel.find_first_of("*?[") != std::string::npos;
    bool any = false;
    for (const std::string& id : *all) {
      bool match;
      if (glob) match = ::fnmatch(sel.c_str(), id.c_str(), FNM_PATHNAME) == 0;
      else if (sel.find('/') != std::string::npos) match = id == sel;
      else match = id.compare(0, sel.size() + 1, sel + "/") == 0;
      if (match) {
        chosen.insert(id);
        any = true;
      }
    }
    if (!any) {
      std::set<std::string> suites;
      for (const std::string& id : *all) suites.insert(id.substr(0, id.find('/')));
      std::string known;
      for (const std::string& s : suites) known += (known.empty() ? "" : ", ") + s;
      return Error{"no tasks match \"" + sel + "\" in " + root_.string() + " (suites: " +
                       (known.empty() ? "none" : known) + ")",
                   protocol::kNoTasksMatch};
    }
  }
  return std::vector<std::string>(chosen.begin(), chosen.end());
}

Result<Task> TaskCatalog::load(const std::string& id) const {
  auto t = loadTask(rootOf(id) / id);
  if (!t) return Error{t.error().message, protocol::kInvalidParams};
  return t;
}

}  // namespace akad
