// akactl: the command-line client of akad. One file per command group (daemon, run, report,
// reproduce, task, resource, snapshot and snapshot_store _commands.cc; following a run is
// progress.cc); this one holds the global options and the exit-code contract.

#include <CLI/CLI.hpp>
#include <exception>
#include <iostream>
#include <string>

#include "akad/version.h"
#include "cli/daemon_commands.h"
#include "cli/options.h"
#include "cli/report_commands.h"
#include "cli/reproduce_commands.h"
#include "cli/resource_commands.h"
#include "cli/run_commands.h"
#include "cli/snapshot_commands.h"
#include "cli/snapshot_store_commands.h"
#include "cli/task_commands.h"

int main(int argc, char** argv) {
  using namespace akad::cli;
  CLI::App app{"akactl: talk to akad, the sandbox orchestrator for agentic GPU-kernel benchmarks."};
  app.footer(
      "Exit codes: 0 ok, 1 the daemon answered with an error, 2 usage error, 3 cannot reach the daemon.\n"
      "Socket: --socket, else $AKAD_SOCKET, else /run/akad/akad.sock (root) or $XDG_RUNTIME_DIR/akad.sock.");
  app.set_version_flag("--version", std::string("akactl ") + akad::kVersion + " (protocol " +
                                        std::to_string(akad::kProtocolVersion) + ")");
  // Global options are accepted before or after the subcommand (akactl status --json).
  app.fallthrough();
  app.require_subcommand(1);
  app.add_option("--socket", cliOptions().socket, "akad's Unix socket");
  app.add_flag("--json", cliOptions().json, "Machine-readable JSON output");

  int exitCode = kExitOk;
  addDaemonCommands(app, exitCode);
  addRunCommands(app, exitCode);
  akactl::addSnapshotCommands(app, exitCode);
  addReportCommands(app, exitCode);
  addReproduceCommands(app, exitCode);
  addTaskCommands(app, exitCode);
  addResourceCommands(app, exitCode);
  addSnapshotStoreCommands(app, exitCode);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int rc = app.exit(e);
    return rc == 0 ? kExitOk : kExitUsage;
  } catch (const std::exception& e) {
    // A reply without the fields we expect (a daemon of another version): say so, do not abort.
    std::cerr << "akactl: unexpected reply from akad: " << e.what() << "\n";
    return kExitDaemonError;
  }
  return exitCode;
}
