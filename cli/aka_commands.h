#pragma once
// akactl tasks import aka DIR, and the AgentKernelArena part of `akactl tasks list`
// (docs/aka.md).

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

namespace akad::cli {
// Adds `import` to the `tasks` command group.
void addAkaTaskCommands(CLI::App& tasks, int& exitCode);
// Prints tasks.list's "aka" member: every imported or refused AKA task with its class and
// reasons. Nothing when there is none.
void printAkaTaskListing(const nlohmann::json& listResult);
}  // namespace akad::cli
