#pragma once
// `akactl tasks import aka DIR`: reads a user's AgentKernelArena checkout, classifies each task
// for a platform, and writes the runnable ones as akad tasks (harness `aka-wrap`) into a tasks
// root akad owns, <state>/aka/tasks/<suite>/<task>/. The checkout is only read; a task whose
// config or files are wrong is refused alone, with the reason, and the import goes on.
//
// Each imported task folder holds task.yaml (what akad's task loader reads), aka.json (what
// the wrap scorer needs: AKA's commands, the trust mapping, the class, the commit and the hash
// of every file it was made from), workspace/ (the AKA task folder, helpers materialised),
// and empty harness/ and solution/ folders. <state>/aka/index.json keeps the latest verdict per
// AKA task name for `akactl tasks list`, refused ones included.

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/result.h"
#include "daemon/aka/checkout.h"
#include "daemon/aka/classify.h"
#include "daemon/aka/held_out.h"

namespace akad::aka {

// The harness name of wrapped tasks in task.yaml; the scorer dispatches on it.
inline constexpr const char* kWrapHarness = "aka-wrap";

struct ImportOptions {
  std::filesystem::path checkout;
  std::vector<std::string> selectors;  // AKA task-name prefixes; empty: every task
  Platform platform = Platform::Nvidia;
  std::filesystem::path stateDir;
  // AKA's held_out_tests/ folder: <dir>/<task name>/held_out_shapes.yaml, where the user has
  // them (docs/aka.md, "Held-out shapes"). Empty: none.
  std::filesystem::path heldOutDir;
  // convert mode (convert.h): gpumode tasks are also imported as akad's own protected harness,
  // from the daemon's common harness layers in commonSource (its tasks/common).
  bool convert = false;
  std::filesystem::path commonSource;
};

struct ImportedTask {
  std::string name;  // AKA's task name: its folder relative to tasks/
  std::string id;    // akad's "suite/task" (also given to refused tasks: it is their name in akad)
  std::string family;
  TaskClass cls = TaskClass::Invalid;
  std::vector<std::string> reasons;
  std::vector<std::string> compat;
  std::vector<std::string> editable;
  std::vector<std::string> splice_functions;  // rocmbench: only these definitions of `editable`
  std::vector<std::string> materialised;  // files the importer filled from src/tools/perf/
  std::size_t held_out_injections = 0;    // imported held-out injections (0: none)
  std::size_t held_out_generated = 0;     // shapes akad's rules made instead (held_out_rules.h)
  std::map<std::string, std::string> files;  // checkout-relative path -> sha256 of what was read
  std::string digest;  // measured.h's taskDigest of its config and folder as read (empty: unread)
  bool imported = false;
  // convert mode: the converted task's id (empty: not tried), whether it was imported, and why not.
  std::string convert_id;
  bool converted = false;
  std::vector<std::string> convert_reasons;
  nlohmann::json toJson(bool withFiles) const;
};

struct ImportReport {
  std::filesystem::path checkout;
  CheckoutCommit commit;
  Platform platform = Platform::Nvidia;
  std::filesystem::path tasksRoot;
  std::vector<ImportedTask> tasks;
  nlohmann::json toJson(bool withFiles) const;
};

std::filesystem::path importedTasksRoot(const std::filesystem::path& stateDir);

// akad's id for an AKA task name: suite "aka-<category>-<sub-suite>", task the rest of the
// path, lower-cased, other characters as '_' ("hip2hip/gpumode/FusedLeakyReLU" ->
// "aka-hip2hip-gpumode/fusedleakyrelu"). Names that would collide get a short hash suffix;
// `all` is every task name of the checkout, so an id does not depend on what was selected.
std::map<std::string, std::string> assignTaskIds(const std::vector<std::string>& all);

// Error only for what stops the whole import (no checkout, a selector that matches nothing,
// the state directory not writable); a bad task is a refused entry of the report.
Result<ImportReport> importCheckout(const ImportOptions& options);

// The verdicts of every import so far, by AKA task name (<state>/aka/index.json); an empty
// object before the first.
Result<nlohmann::json> readImportIndex(const std::filesystem::path& stateDir);

}  // namespace akad::aka
