#pragma once
// A benchmark task loaded from tasks/<suite>/<task>/task.yaml and validated at the border:
// every problem names the file, the field and what is wrong.

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/result.h"

namespace akad {

struct Tolerance {
  double atol = 0;
  double rtol = 0;
};

struct TaskTiming {
  int warmup = 3;
  int samples = 30;
  int rounds = 3;
  int input_sets = 3;
  uint64_t flush_bytes = 64ull << 20;
  // How a GPU harness's timed window runs its calls (docs/scoring.md, "GPU harnesses"): "queued"
  // (back to back, one synchronisation at the last), "synced" (a synchronisation after every
  // call) or "graph" (the calls captured untimed, one CUDA graph each, launched after the clock
  // starts; harnesses with graphWindows only).
  std::string window = "queued";
};

struct TaskLimits {
  double agent_s = 600;
  double compile_s = 120;
  double correctness_s = 120;
  double performance_s = 300;
  uint64_t memory_bytes = 2ull << 30;
  int pids = 256;
};

// What the scorer and the daemon do differently for a harness, beyond the layers it is
// assembled from: one description per harness, so no code compares harness names.
struct HarnessTraits {
  // Correctness and performance run as a trusted driver and a candidate worker (docs/scoring.md,
  // "Driver and worker"): akad's own harnesses (cpp, hip, python) and converted AKA tasks.
  bool driven = false;
  // AKA's own commands run in akad sandboxes (aka-wrap: daemon/aka/wrap_score.cc).
  bool akaCommands = false;
  // A converted AKA gpumode task (aka-convert, docs/aka.md): its extension in the build cache,
  // held-out cases chosen by the pristine baseline, AKA's figures in the result.
  bool akaConverted = false;
  // An imported AKA task (either): no reference solution, the held-out list may be empty, and
  // validation times nothing, so tasks are validated side by side.
  bool imported = false;
  // Its driver can time a window of calls captured beforehand as CUDA graphs (timing.window:
  // graph): the python harness.
  bool graphWindows = false;
};
// A harness's traits; an unknown harness (a task's own) has none of them.
HarnessTraits harnessTraits(const std::string& harness);

struct Task {
  std::filesystem::path dir;  // the task folder
  std::string id;             // "<suite>/<id>"
  std::string suite;
  std::string title;
  std::string prompt;
  std::string harness;        // tasks/common/<harness>/
  std::string image;          // images/<image>/
  bool gpu = false;
  std::vector<std::string> editable;
  std::vector<std::string> exclude;
  std::vector<std::string> build_reference;
  std::vector<std::string> build_candidate;
  std::vector<nlohmann::json> visible;   // each has a unique "name"
  std::vector<nlohmann::json> held_out;  // never copied to the agent
  std::map<std::string, Tolerance> tolerances;
  TaskTiming timing;
  TaskLimits limits;
  std::string content_hash;  // SHA-256 over the folder (see taskContentHash)

  HarnessTraits traits() const { return harnessTraits(harness); }

  std::filesystem::path workspaceDir() const { return dir / "workspace"; }
  std::filesystem::path harnessDir() const { return dir / "harness"; }
  std::filesystem::path solutionDir() const { return dir / "solution"; }
  nlohmann::json tolerancesJson() const;
  // configs.json, what the harness reads: {task, configs, tolerances, timing}, with the visible
  // configurations only (the agent's copy) or the held-out ones after them (the scorer's).
  nlohmann::json configsJson(bool withHeldOut) const;
};

// Reads and validates <dir>/task.yaml (task_file.cc): every problem is reported, each with the
// file and the key path; the suite is the name of the folder above <dir>. The content hash is
// left empty: this much is all akatask needs (it compiles task_file.cc).
Result<Task> readTaskFile(const std::filesystem::path& dir);

// readTaskFile, then the version's hash (task.cc).
Result<Task> loadTask(const std::filesystem::path& dir);

// The version's identity (task_hash.cc): taskContentHash of the task's folder and of each
// common harness layer it is assembled from.
Result<std::string> taskVersionHash(const Task& task);

// SHA-256 over every file under dir: relative path, kind, executable bit and content, in
// byte order of paths. Symlinks count by their target text.
// How many times taskContentHash read a tree's files (and did not answer from its cache).
std::uint64_t taskTreesHashed();
Result<std::string> taskContentHash(const std::filesystem::path& dir);

// Every task folder under tasksRoot (task_scan.h's rule), loaded; a task that fails to load,
// or a root that cannot be read, is reported in `errors` and left out (task_scan.cc).
struct TaskCatalogScan {
  std::vector<Task> tasks;
  std::vector<std::string> errors;
};
TaskCatalogScan scanTasks(const std::filesystem::path& tasksRoot);

}  // namespace akad

namespace akad {
// The common folders a task's harness/ is assembled from, in copy order (later files win):
// the bases named in tasks/common/<harness>/BASE (one per line, e.g. hip builds on cpp), the
// harness itself, then the checker.
std::vector<std::string> harnessLayers(const std::filesystem::path& tasksRoot, const std::string& harness);

// Copies the task (and its common harness) to <stateDir>/tasks/<hash>/def/, laid out like a
// tasks root, unless it is there already; returns that root. Results name the hash, so the
// exact version scored stays available for `akactl reproduce` after the repository moves on.
Result<std::filesystem::path> importTask(const Task& task, const std::filesystem::path& stateDir);
}  // namespace akad
