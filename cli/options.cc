#include "cli/options.h"

#include <iostream>

#include "common/paths.h"
#include "common/protocol.h"

namespace akad::cli {

using nlohmann::json;

CliOptions& cliOptions() {
  static CliOptions options;
  return options;
}

std::string socketPath() {
  const std::string& s = cliOptions().socket;
  return s.empty() ? defaultSocketPath().string() : s;
}

Result<Client> connectDaemon() { return Client::connect(socketPath()); }

int reportError(const Error& error) {
  bool unreachable = error.code == protocol::kUnreachable;
  if (cliOptions().json) {
    printJson(json{{"error", {{"code", error.code}, {"message", error.message}}}});
  }
  std::cerr << "akactl: " << error.message;
  if (!unreachable) std::cerr << " [" << protocol::errorName(error.code) << ", code " << error.code << "]";
  std::cerr << "\n";
  if (unreachable) {
    std::cerr << "akactl: is akad running? Start it with `akad --socket " << socketPath()
              << "` (or `systemctl start akad`), or point akactl at a running daemon with "
                 "--socket PATH or AKAD_SOCKET.\n";
    return kExitUnreachable;
  }
  return kExitDaemonError;
}

int usageError(const std::string& message) {
  std::cerr << "akactl: " << message << "\nRun with --help for more information.\n";
  return kExitUsage;
}

Result<json> callDaemon(const std::string& method, const json& params, int& exitCode) {
  auto client = connectDaemon();
  if (!client) {
    exitCode = reportError(client.error());
    return client.error();
  }
  auto result = client->call(method, params);
  if (!result) exitCode = reportError(result.error());
  return result;
}

void printJson(const json& value) {
  std::cout << value.dump(2, ' ', false, json::error_handler_t::replace) << std::endl;
}

}  // namespace akad::cli
