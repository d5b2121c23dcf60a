#include "cli/resource_commands.h"

#include <cstdio>
#include <iostream>
#include <string>

#include "cli/json_text.h"
#include "cli/options.h"

using nlohmann::json;

namespace akad::cli {
namespace {

int runSimpleList(const std::string& method, const std::string& key) {
  int exitCode = kExitOk;
  auto result = callDaemon(method, json::object(), exitCode);
  if (!result) return exitCode;
  if (cliOptions().json) {
    printJson(*result);
    return kExitOk;
  }
  if (key == "gpus") {
    if (result->at("gpus").empty()) std::cout << "no GPUs (none found, or none given to akad with --gpus)\n";
    std::printf("%-10s %-8s %-32s %-14s %s\n", "GPU", "VENDOR", "MODEL", "MEMORY", "LEASE");
    for (const json& g : result->at("gpus")) {
      double gib = g.value("memory_bytes", 0.0) / double(1ull << 30);
      std::printf("%-10s %-8s %-32s %-14s %s\n", str(g, "id").c_str(), str(g, "vendor").c_str(), str(g, "model").c_str(),
                  gib > 0 ? (fmt(gib, "%.0f") + " GiB").c_str() : "-",
                  g["lease"].is_string() ? str(g, "lease").c_str() : "free");
    }
  } else {
    std::printf("%-14s %-8s %-10s %s\n", "AGENT", "NETWORK", "LIMIT", "DESCRIPTION");
    for (const json& a : result->at("agents")) {
      // The variables it takes by --pass-env (a key; for the CLIs also their endpoint).
      std::string passEnv;
      for (const json& c : a.value("credentials", json::array())) passEnv += " --pass-env " + c.get<std::string>();
      std::printf("%-14s %-8s %-10s %s%s\n", str(a, "name").c_str(), str(a, "network").c_str(),
                  (fmt(a["time_limit_s"], "%.0f") + " s").c_str(), str(a, "description").c_str(),
                  (a.value("template", false) && !passEnv.empty() ? "  [" + passEnv.substr(1) + "]" : std::string()).c_str());
    }
  }
  return kExitOk;
}

}  // namespace

void addResourceCommands(CLI::App& app, int& exitCode) {
  app.add_subcommand("gpus", "GPUs the daemon may lease, and who holds each")->callback([&exitCode] {
    exitCode = runSimpleList("gpus.list", "gpus");
  });
  app.add_subcommand("agents", "Defined agents")->callback([&exitCode] { exitCode = runSimpleList("agents.list", "agents"); });

}

}  // namespace akad::cli
