#pragma once
// `akactl snapshot create|extract|verify`: local commands, no daemon needed.

#include <CLI/CLI.hpp>

namespace akactl {

// Registers the subcommands on `app`; each sets `exitCode` (0 ok, 1 refused or failed).
void addSnapshotCommands(CLI::App& app, int& exitCode);

}  // namespace akactl
