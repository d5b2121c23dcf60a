#pragma once
// akactl reproduce: re-score an archived snapshot and show the result beside the original.

#include <CLI/CLI.hpp>

namespace akad::cli {
void addReproduceCommands(CLI::App& app, int& exitCode);
}  // namespace akad::cli
