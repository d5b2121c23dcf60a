#pragma once
// What every akactl command shares: the global options (--socket, --json), connecting to the
// daemon, and turning errors into the documented exit codes.
//
// Exit codes: 0 ok, 1 the daemon answered with an error, 2 usage error, 3 cannot reach the daemon.

#include <string>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "common/client.h"
#include "common/result.h"

namespace akad::cli {

inline constexpr int kExitOk = 0;
inline constexpr int kExitDaemonError = 1;
inline constexpr int kExitUsage = 2;
inline constexpr int kExitUnreachable = 3;

struct CliOptions {
  std::string socket;  // empty: $AKAD_SOCKET, else the default path
  bool json = false;
};

// Filled by main() while parsing; read by every command group (also snapshot_commands.cc).
CliOptions& cliOptions();
// --socket, else $AKAD_SOCKET, else the default (same rules as akad).
std::string socketPath();

// Connects to the daemon named by the global options.
Result<Client> connectDaemon();
// Prints the error (stderr; with --json also {"error":{...}} on stdout) and returns its exit
// code: 3 for an unreachable daemon (with how to start one), else 1.
int reportError(const Error& error);
// Prints a usage error and returns 2.
int usageError(const std::string& message);
// Connects, calls one method and returns its result; on failure reports and sets exitCode.
Result<nlohmann::json> callDaemon(const std::string& method, const nlohmann::json& params, int& exitCode);
void printJson(const nlohmann::json& value);

}  // namespace akad::cli
