#include "cli/report_commands.h"

#include <cstdio>
#include <iostream>
#include <memory>

#include "cli/json_text.h"
#include "cli/options.h"
#include "cli/report_text.h"

using nlohmann::json;

namespace akad::cli {
int showReport(const std::string& id, const std::string& format) {
  int exitCode = kExitOk;
  auto result = callDaemon("run.report", json{{"id", id}}, exitCode);
  if (!result) return exitCode;
  if (format == "csv") std::cout << str(*result, "csv");
  else if (cliOptions().json || format == "json") printJson(*result);
  else std::cout << reportText(*result);
  return kExitOk;
}

namespace {

int runResults(const std::string& id) {
  int exitCode = kExitOk;
  std::string runId = id;
  if (runId.empty()) {
    auto list = callDaemon("run.list", json{{"limit", 1}}, exitCode);
    if (!list) return exitCode;
    if (list->at("runs").empty()) {
      std::cout << "no runs\n";
      return kExitOk;
    }
    runId = str(list->at("runs")[0], "id");
  }
  auto result = callDaemon("run.get", json{{"id", runId}}, exitCode);
  if (!result) return exitCode;
  if (cliOptions().json) {
    printJson(*result);
    return kExitOk;
  }
  std::cout << "run " << runId << "\n";
  for (const json& a : result->at("attempts")) {
    std::cout << "\nattempt " << a.value("id", 0) << "  " << str(a, "task_id") << "  " << str(a, "state") << "\n";
    if (a.at("error").is_string()) std::cout << "  error: " << str(a, "error") << "\n";
    const json& r = a.at("result");
    if (!r.is_object()) continue;
    if (r.contains("snapshot")) std::cout << "  snapshot " << str(r, "snapshot") << "\n";
    if (r.contains("agent")) std::cout << "  agent    " << str(r["agent"], "summary") << (r["agent"].value("timed_out", false) ? " (timed out)" : "") << "\n";
    if (r.contains("agent") && r["agent"].contains("network")) {
      const json& n = r["agent"]["network"];
      std::cout << "  network  " << n.value("connections", 0) << " connection(s), " << n.value("denied", 0)
                << " refused, " << n.value("bytes_up", 0) << " bytes out, " << n.value("bytes_down", 0)
                << " bytes in (akactl logs ATTEMPT --stage network)\n";
    }
    // Named copies: a range-for over value(...).items() would iterate a destroyed temporary.
    const json gates = r.value("gates", json::object());
    for (const auto& [name, g] : gates.items()) {
      std::cout << "  " << name << ": " << (g.value("pass", false) ? "pass" : "FAIL");
      if (g.contains("speedup")) std::cout << "  speedup " << fmt(g["speedup"], "%.3fx");
      if (g.contains("speedup_interval")) {
        const json& i = g["speedup_interval"];
        std::cout << " [" << fmt(i.value("low", json()), "%.3f") << ", " << fmt(i.value("high", json()), "%.3f") << "]"
                  << (i.value("within_noise", false) ? " within noise" : "");
      }
      if (g.contains("reason")) std::cout << "  (" << str(g, "reason").substr(0, 200) << ")";
      std::cout << "\n";
      const json configs = g.value("configs", json::array());
      for (const json& c : configs) {
        // Held-out configurations reach a tenant as an id and a speedup only (docs/scoring.md).
        const json baseline = c.value("baseline", json::object()), candidate = c.value("candidate", json::object());
        std::cout << "      " << str(c, "name") << ": ";
        if (baseline.contains("median_ns") && candidate.contains("median_ns"))
          std::cout << "baseline " << fmt(baseline["median_ns"], "%.0f") << " ns, candidate " << fmt(candidate["median_ns"], "%.0f")
                    << " ns (IQR " << fmt(candidate.value("iqr_ns", json()), "%.0f") << "), ";
        std::cout << "speedup " << fmt(c.value("speedup", json()), "%.3fx") << "\n";
      }
    }
    if (!r.value("ignored_changes", json::array()).empty())
      std::cout << "  ignored changes (not editable): " << r["ignored_changes"].dump() << "\n";
    std::cout << "  score " << fmt(r.value("score", json()), "%.1f") << "\n";
  }
  return kExitOk;
}

int runLogs(long long attempt, const std::string& stage) {
  int exitCode = kExitOk;
  json params{{"id", attempt}};
  if (!stage.empty()) params["stage"] = stage;
  auto result = callDaemon("attempt.logs", params, exitCode);
  if (!result) return exitCode;
  if (cliOptions().json) {
    printJson(*result);
    return kExitOk;
  }
  if (result->at("logs").empty()) std::cout << "no logs for attempt " << attempt << (stage.empty() ? "" : " stage " + stage) << "\n";
  for (const json& l : result->at("logs")) std::cout << "==> " << str(l, "file") << " <==\n" << str(l, "text") << "\n";
  return kExitOk;
}

}  // namespace

void addReportCommands(CLI::App& app, int& exitCode) {
  auto reportRun = std::make_shared<std::string>();
  auto reportCsv = std::make_shared<bool>(false);
  auto* report = app.add_subcommand("report", "A run's report: rates, speedups, fast_p, held-out retention, scores");
  report->add_option("run", *reportRun, "Run id")->required();
  report->add_flag("--csv", *reportCsv, "One CSV row per attempt");
  report->callback([&exitCode, reportRun, reportCsv] { exitCode = showReport(*reportRun, *reportCsv ? "csv" : "text"); });

  auto resultsRun = std::make_shared<std::string>();
  auto* results = app.add_subcommand("results", "Every attempt of a run (default: the newest) with its gates and timings");
  results->add_option("run", *resultsRun, "Run id");
  results->callback([&exitCode, resultsRun] { exitCode = runResults(*resultsRun); });

  auto logsAttempt = std::make_shared<long long>(0);
  auto logsStage = std::make_shared<std::string>();
  auto* logs = app.add_subcommand("logs", "An attempt's logs (agent, compile, correctness, ...)");
  logs->add_option("attempt", *logsAttempt, "Attempt number")->required()->check(CLI::PositiveNumber);
  logs->add_option("--stage", *logsStage,
                   "agent, network (the egress proxy's log), compile, generate, correctness, performance or held_out")
      ->check(CLI::IsMember({"agent", "network", "compile", "generate", "correctness", "performance", "held_out", "all"}));
  logs->callback([&exitCode, logsAttempt, logsStage] { exitCode = runLogs(*logsAttempt, *logsStage); });

}

}  // namespace akad::cli
