// Minimal akactl for the snapshot branch; the real cli/main.cc replaces this file at merge.
#include <CLI/CLI.hpp>

#include "cli/snapshot_commands.h"

int main(int argc, char** argv) {
  CLI::App app{"akactl"};
  app.require_subcommand(1);
  int exitCode = 0;
  akactl::addSnapshotCommands(app, exitCode);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  return exitCode;
}
