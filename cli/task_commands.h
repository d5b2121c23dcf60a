#pragma once
// akactl tasks list|validate: the daemon's task suites.

#include <CLI/CLI.hpp>

namespace akad::cli {
void addTaskCommands(CLI::App& app, int& exitCode);
}  // namespace akad::cli
