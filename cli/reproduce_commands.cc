#include "cli/reproduce_commands.h"

#include <cstdio>
#include <iostream>
#include <memory>

#include "cli/json_text.h"
#include "cli/options.h"

using nlohmann::json;

namespace akad::cli {
namespace {

int runReproduce(const std::string& sha) {
  auto client = connectDaemon();
  if (!client) return reportError(client.error());
  auto result = client->call("run.reproduce", json{{"snapshot", sha}});
  if (!result) return reportError(result.error());
  const std::string runId = str(result->at("run"), "id");
  if (!cliOptions().json) std::cout << "re-scoring snapshot " << sha << " as run " << runId << "\n";
  auto watched = client->stream("run.watch", json{{"id", runId}}, [](const json&) {});
  if (!watched) return reportError(watched.error());
  auto now = client->call("run.get", json{{"id", runId}});
  if (!now) return reportError(now.error());
  const json& fresh = now->at("attempts").at(0);
  const json original = result->value("original", json());
  if (cliOptions().json) {
    printJson(json{{"run", runId}, {"reproduced", fresh}, {"original", original}});
    return kExitOk;
  }
  auto column = [](const json& a, const char* key) -> std::string {
    if (!a.is_object() || !a.contains("result") || !a["result"].is_object()) return "-";
    const json& v = a["result"].value(key, json());
    if (v.is_boolean()) return v.get<bool>() ? "yes" : "no";
    return fmt(v);
  };
  std::printf("\n  %-20s %-14s %-14s\n", "", "ORIGINAL", "REPRODUCED");
  std::printf("  %-20s %-14s %-14s\n", "attempt", original.is_object() ? std::to_string(original.value("id", 0)).c_str() : "-",
              std::to_string(fresh.value("id", 0)).c_str());
  for (const char* key : {"compiled", "correct", "speedup", "held_out_correct", "held_out_speedup", "score"})
    std::printf("  %-20s %-14s %-14s\n", key, column(original, key).c_str(), column(fresh, key).c_str());
  return kExitOk;
}

}  // namespace

void addReproduceCommands(CLI::App& app, int& exitCode) {
  auto reproSha = std::make_shared<std::string>();
  auto* repro = app.add_subcommand("reproduce", "Re-score an archived snapshot and show the result beside the original");
  repro->add_option("snapshot", *reproSha, "Snapshot SHA-256")->required();
  repro->callback([&exitCode, reproSha] { exitCode = runReproduce(*reproSha); });

}

}  // namespace akad::cli
