#pragma once
#include <CLI/CLI.hpp>

namespace akad::cli {
// submit, status, watch, cancel
void addRunCommands(CLI::App& app, int& exitCode);
}  // namespace akad::cli
