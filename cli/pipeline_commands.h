#pragma once
#include <string>

#include <CLI/CLI.hpp>

#include "common/client.h"

namespace akad::cli {
// report, results, logs, reproduce, tasks list|validate, agents, gpus, and the daemon-backed
// snapshot list|show|export|gc (added to the `snapshot` group of snapshot_commands.cc).
void addPipelineCommands(CLI::App& app, int& exitCode);
// Follows a run until it ends: a progress bar on a terminal, event lines otherwise; then,
// if `report`, prints the run report. Returns the exit code.
int followRun(Client& client, const std::string& runId, bool report);
}  // namespace akad::cli
