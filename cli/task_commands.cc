#include "cli/task_commands.h"

#include <cstdio>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "cli/aka_commands.h"
#include "cli/json_text.h"
#include "cli/options.h"

using nlohmann::json;

namespace akad::cli {
namespace {

int runTasksList() {
  int exitCode = kExitOk;
  auto result = callDaemon("tasks.list", json::object(), exitCode);
  if (!result) return exitCode;
  if (cliOptions().json) {
    printJson(*result);
    return kExitOk;
  }
  std::printf("%-28s %-4s %-9s %-8s %-9s %s\n", "TASK", "GPU", "IMAGE", "VISIBLE", "HELD-OUT", "TITLE");
  for (const json& t : result->at("tasks"))
    std::printf("%-28s %-4s %-9s %-8d %-9d %s\n", str(t, "id").c_str(), t.value("gpu", false) ? "yes" : "no",
                str(t, "image").c_str(), t.value("visible", 0), t.value("held_out", 0), str(t, "title").c_str());
  for (const json& e : result->at("errors")) std::cout << "invalid: " << e.get<std::string>() << "\n";
  printAkaTaskListing(*result);
  return result->at("errors").empty() ? kExitOk : kExitDaemonError;
}

int runTasksValidate(const std::vector<std::string>& selectors, double minSpeedup, int parallel) {
  auto client = connectDaemon();
  if (!client) return reportError(client.error());
  json params{{"min_speedup", minSpeedup}};
  if (parallel != 1) params["parallel"] = parallel;
  if (!selectors.empty()) params["tasks"] = selectors;
  auto result = client->stream("tasks.validate", params, [](const json& ev) {
    if (cliOptions().json || str(ev, "state") != "done") return;
    const json& r = ev.at("result");
    auto speed = [](const json& side) { return side.is_object() ? fmt(side.value("speedup", json()), "%.2fx") : "-"; };
    auto passes = [](const json& side) {
      if (side.is_object() && side.value("kernel", true) == false) return "none";  // AKA's torch2hip: no pristine kernel
      // A side without held-out configurations (an imported task without shapes) has no verdict on them.
      return side.is_object() && side.value("correct", false) && side.value("held_out_correct", true) ? "passes" : "FAILS";
    };
    std::printf("%-28s %-4s baseline %-6s solution %-7s (held-out %s) broken %s\n", str(r, "task").c_str(),
                r.value("ok", false) ? "ok" : "FAIL", passes(r.value("baseline", json())),
                speed(r.value("solution", json())).c_str(),
                r.contains("solution") && r["solution"].is_object()
                    ? fmt(r["solution"].value("held_out_speedup", json()), "%.2fx").c_str()
                    : "-",
                r.contains("broken") && r["broken"].is_object() ? (r["broken"].value("compiled", true) ? "compiled!" : "rejected")
                                                                : "-");
    for (const json& p : r.value("problems", json::array())) std::cout << "    problem: " << p.get<std::string>() << "\n";
    std::fflush(stdout);
  });
  if (!result) return reportError(result.error());
  if (cliOptions().json) printJson(*result);
  return result->value("ok", false) ? kExitOk : kExitDaemonError;
}

}  // namespace

void addTaskCommands(CLI::App& app, int& exitCode) {
  auto* tasks = app.add_subcommand("tasks", "The daemon's task suites");
  tasks->require_subcommand(1);
  tasks->add_subcommand("list", "Every task and whether its task.yaml is valid")->callback([&exitCode] { exitCode = runTasksList(); });
  auto validateSel = std::make_shared<std::vector<std::string>>();
  auto minSpeedup = std::make_shared<double>(1.2);
  auto* validate = tasks->add_subcommand("validate", "Score baseline, solution and a broken build of each task");
  validate->add_option("tasks", *validateSel, "Task selectors (default: every task)");
  validate->add_option("--min-speedup", *minSpeedup, "The solution must be faster than this")->capture_default_str();
  auto parallel = std::make_shared<int>(1);
  validate->add_option("--parallel", *parallel,
                       "Tasks validated at once where nothing is timed (imported AKA tasks, on one GPU)")
      ->check(CLI::Range(1, 64))
      ->capture_default_str();
  validate->callback([&exitCode, validateSel, minSpeedup, parallel] {
    exitCode = runTasksValidate(*validateSel, *minSpeedup, *parallel);
  });
  addAkaTaskCommands(*tasks, exitCode);

}

}  // namespace akad::cli
