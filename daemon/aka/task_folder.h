#pragma once
// An AgentKernelArena task folder as the importer reads it (import.h): every file through the
// checkout's ledger (so what is hashed is what is written), with the limits on size, what the
// classifier sees of each, and AKA's timing helpers filled into the copy.

#include <string>
#include <vector>

#include "common/result.h"
#include "daemon/aka/checkout.h"
#include "daemon/aka/classify.h"

namespace akad::aka {

// One file of the task folder, as read (bytes kept for the copy, so what is hashed is what is
// written).
struct ReadFile {
  std::string rel;  // relative to the task folder
  std::string bytes;
  bool executable = false;
};

struct TaskFolder {
  std::vector<TaskFile> files;  // what the classifier sees
  std::vector<ReadFile> contents;
  std::string problem;  // set when the folder as a whole cannot be imported
};

// The folder `base` of the checkout; `problem` says why it cannot be imported as a whole.
TaskFolder readTaskFolder(FileLedger& ledger, const std::string& base);

// Fills AKA's helpers into the folder's copy (AKA's materialize_perf_helpers_in_workspace does
// it in each run workspace). Returns the files it changed.
Result<std::vector<std::string>> materialiseHelpers(FileLedger& ledger, TaskFolder& folder);

}  // namespace akad::aka
