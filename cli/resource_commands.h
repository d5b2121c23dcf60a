#pragma once
// akactl gpus and akactl agents: what the daemon can hand an attempt.

#include <CLI/CLI.hpp>

namespace akad::cli {
void addResourceCommands(CLI::App& app, int& exitCode);
}  // namespace akad::cli
