#pragma once
// The daemon-backed half of akactl snapshot: list, show, export and gc on the daemon's
// snapshot store (the local half, create|extract|verify, is snapshot_commands.cc).

#include <CLI/CLI.hpp>

namespace akad::cli {
// Adds to the `snapshot` subcommand that snapshot_commands.cc registered.
void addSnapshotStoreCommands(CLI::App& app, int& exitCode);
}  // namespace akad::cli
