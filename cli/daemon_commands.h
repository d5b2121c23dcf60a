#pragma once
#include <CLI/CLI.hpp>

namespace akad::cli {
// info, ping
void addDaemonCommands(CLI::App& app, int& exitCode);
}  // namespace akad::cli
