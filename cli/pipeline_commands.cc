#include "cli/pipeline_commands.h"

#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>

#include "cli/aka_commands.h"
#include "cli/options.h"
#include "common/sha256.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace akad::cli {
namespace {

std::string str(const json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : "";
}

std::string fmt(const json& v, const char* format = "%.3f") {
  if (!v.is_number()) return "-";
  char buf[64];
  std::snprintf(buf, sizeof buf, format, v.get<double>());
  return buf;
}

std::string percent(const json& v) {
  if (!v.is_number()) return "-";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f%%", 100 * v.get<double>());
  return buf;
}

void printReport(const json& result) {
  const json& r = result.at("report");
  const json& run = result.at("run");
  std::cout << "run " << str(run, "id") << " (" << str(run, "state") << ")"
            << (str(run, "label").empty() ? "" : "  " + str(run, "label")) << "\n\n";
  std::printf("  %-9s %-24s %-9s %-8s %-8s %-9s %-9s %-8s %s\n", "ATTEMPT", "TASK", "STATE", "COMPILED", "CORRECT",
              "SPEEDUP", "HELD-OUT", "SCORE", "WHY");
  for (const json& a : r.at("per_attempt")) {
    std::string held = a.value("held_out_correct", false) ? fmt(a["held_out_speedup"], "%.2fx") : "fail";
    std::string why = a.value("failure", std::string());
    if (why.size() > 70) why = why.substr(0, 67) + "...";
    std::printf("  %-9s %-24s %-9s %-8s %-8s %-9s %-9s %-8s %s\n", str(a, "attempt").c_str(), str(a, "task").c_str(),
                str(a, "state").c_str(), a.value("compiled", false) ? "yes" : "no",
                a.value("correct", false) ? "yes" : "no", fmt(a["speedup"], "%.2fx").c_str(), held.c_str(),
                fmt(a["score"], "%.1f").c_str(), why.c_str());
  }
  const json& f = r.at("fast_p");
  std::cout << "\n  attempts                   " << r.value("attempts", 0) << "\n"
            << "  compile rate               " << percent(r["compile_rate"]) << "\n"
            << "  correctness rate           " << percent(r["correctness_rate"]) << "\n"
            << "  geomean speedup (correct)  " << fmt(r["geomean_speedup"], "%.3fx") << "\n"
            << "  fast_0 / 1 / 1.5 / 2       " << percent(f["fast_0"]) << " / " << percent(f["fast_1"]) << " / "
            << percent(f["fast_1.5"]) << " / " << percent(f["fast_2"]) << "\n"
            << "  held-out correctness kept  " << percent(r["held_out_correctness_retention"]) << "\n"
            << "  held-out speedup kept      " << fmt(r["held_out_speedup_retention"], "%.3f") << "\n"
            << "  mean arena score           " << fmt(r["mean_arena_score"], "%.1f") << "\n";
}

int showReport(const std::string& id, const std::string& format) {
  int exitCode = kExitOk;
  auto result = callDaemon("run.report", json{{"id", id}}, exitCode);
  if (!result) return exitCode;
  if (format == "csv") std::cout << str(*result, "csv");
  else if (cliOptions().json || format == "json") printJson(*result);
  else printReport(*result);
  return kExitOk;
}

// The progress line a terminal shows while a run goes on.
class Progress {
 public:
  explicit Progress(bool tty) : tty_(tty) {}
  void onEvent(const json& ev) {
    const std::string kind = str(ev, "kind");
    const json& data = ev.value("data", json::object());
    if (kind == "run.submitted") total_ = data.value("attempts", total_);
    if (kind == "attempt.state" && ev.contains("attempt_id")) state_[ev["attempt_id"].dump()] = str(data, "state");
    if (kind == "attempt.stage" && ev.contains("attempt_id")) stage_[ev["attempt_id"].dump()] = str(data, "stage");
    if (!tty_) {
      std::cout << str(ev, "at") << "  " << kind;
      if (ev.contains("attempt_id") && !ev["attempt_id"].is_null()) std::cout << " attempt " << ev["attempt_id"].dump();
      for (const auto& [k, v] : data.items()) std::cout << " " << k << "=" << (v.is_string() ? v.get<std::string>() : v.dump());
      std::cout << std::endl;
      return;
    }
    draw();
  }
  void done() {
    if (tty_) std::cout << "\n";
  }

 private:
  void draw() {
    int queued = 0, running = 0, ended = 0;
    for (const auto& [id, s] : state_) {
      if (s == "running") ++running;
      else if (s == "queued") ++queued;
      else ++ended;
    }
    const int total = std::max<int>(total_, static_cast<int>(state_.size()));
    queued += total - static_cast<int>(state_.size());
    const int width = 30;
    const int filled = total > 0 ? width * ended / total : 0;
    std::string bar(filled, '#');
    bar += std::string(width - filled, '-');
    std::string stage;
    for (const auto& [id, s] : state_)
      if (s == "running" && stage_.count(id)) stage = "attempt " + id + ": " + stage_[id];
    std::printf("\r[%s] %d/%d done, %d running, %d queued  %-40.40s", bar.c_str(), ended, total, running, queued,
                stage.c_str());
    std::fflush(stdout);
  }

  bool tty_;
  int total_ = 0;
  std::map<std::string, std::string> state_;
  std::map<std::string, std::string> stage_;
};

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

int runTasksValidate(const std::vector<std::string>& selectors, double minSpeedup) {
  auto client = connectDaemon();
  if (!client) return reportError(client.error());
  json params{{"min_speedup", minSpeedup}};
  if (!selectors.empty()) params["tasks"] = selectors;
  auto result = client->stream("tasks.validate", params, [](const json& ev) {
    if (cliOptions().json || str(ev, "state") != "done") return;
    const json& r = ev.at("result");
    auto speed = [](const json& side) { return side.is_object() ? fmt(side.value("speedup", json()), "%.2fx") : "-"; };
    auto passes = [](const json& side) {
      return side.is_object() && side.value("correct", false) && side.value("held_out_correct", false) ? "passes" : "FAILS";
    };
    std::printf("%-28s %-4s baseline %-6s solution %-7s (held-out %s) broken %s\n", str(r, "task").c_str(),
                r.value("ok", false) ? "ok" : "FAIL", passes(r.value("baseline", json())),
                speed(r.value("solution", json())).c_str(),
                r.contains("solution") ? fmt(r["solution"].value("held_out_speedup", json()), "%.2fx").c_str() : "-",
                r.contains("broken") ? (r["broken"].value("compiled", true) ? "compiled!" : "rejected") : "-");
    for (const json& p : r.value("problems", json::array())) std::cout << "    problem: " << p.get<std::string>() << "\n";
    std::fflush(stdout);
  });
  if (!result) return reportError(result.error());
  if (cliOptions().json) printJson(*result);
  return result->value("ok", false) ? kExitOk : kExitDaemonError;
}

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

int base64Value(char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+') return 62;
  if (c == '/') return 63;
  return -1;
}

int runSnapshotExport(const std::string& sha, const std::string& out) {
  auto client = connectDaemon();
  if (!client) return reportError(client.error());
  const fs::path archive = out.empty() ? fs::path(sha + ".tar.zst") : fs::path(out);
  const fs::path tmp = archive.string() + ".part";
  std::ofstream file(tmp, std::ios::binary | std::ios::trunc);
  if (!file) return reportError(Error{"cannot write " + tmp.string()});
  Sha256 hash;
  bool bad = false;
  auto result = client->stream("snapshot.export", json{{"snapshot", sha}}, [&](const json& ev) {
    const std::string enc = str(ev, "chunk");
    std::string bytes;
    for (std::size_t i = 0; i + 3 < enc.size() + 0 && i < enc.size(); i += 4) {
      int v[4];
      for (int k = 0; k < 4; ++k) v[k] = enc[i + k] == '=' ? 0 : base64Value(enc[i + k]);
      if (v[0] < 0 || v[1] < 0 || v[2] < 0 || v[3] < 0) bad = true;
      uint32_t n = (v[0] << 18) | (v[1] << 12) | (v[2] << 6) | v[3];
      bytes += static_cast<char>((n >> 16) & 0xff);
      if (enc[i + 2] != '=') bytes += static_cast<char>((n >> 8) & 0xff);
      if (enc[i + 3] != '=') bytes += static_cast<char>(n & 0xff);
    }
    hash.update(bytes);
    file.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  });
  file.close();
  std::error_code ec;
  if (!result) {
    fs::remove(tmp, ec);
    return reportError(result.error());
  }
  const std::string got = hash.hexDigest();
  if (bad || !file || got != sha) {
    fs::remove(tmp, ec);
    return reportError(Error{"the exported archive does not hash to " + sha + " (got " + got + "); nothing written"});
  }
  fs::rename(tmp, archive, ec);
  fs::path manifest = archive;
  const std::string name = archive.filename().string();
  const std::string stem = name.size() > 8 && name.substr(name.size() - 8) == ".tar.zst" ? name.substr(0, name.size() - 8) : name;
  manifest = archive.parent_path() / (stem + ".json");
  std::ofstream(manifest) << result->at("manifest").dump(2) << "\n";
  if (cliOptions().json) printJson(json{{"archive", archive.string()}, {"manifest", manifest.string()}, {"sha256", sha}});
  else std::cout << "wrote " << archive.string() << " and " << manifest.string() << " (sha256 " << sha << ", verified)\n";
  return kExitOk;
}

}  // namespace

int followRun(Client& client, const std::string& runId, bool report) {
  Progress progress(!cliOptions().json && ::isatty(STDOUT_FILENO));
  auto watched = client.stream("run.watch", json{{"id", runId}}, [&](const json& ev) {
    if (cliOptions().json) std::cout << ev.dump(-1, ' ', false, json::error_handler_t::replace) << std::endl;
    else progress.onEvent(ev);
  });
  progress.done();
  if (!watched) return reportError(watched.error());
  if (!report) {
    if (cliOptions().json) printJson(*watched);
    else std::cout << "run " << runId << " ended: " << str(watched->at("run"), "state") << "\n";
    return kExitOk;
  }
  return showReport(runId, cliOptions().json ? "json" : "text");
}

void addPipelineCommands(CLI::App& app, int& exitCode) {
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

  auto reproSha = std::make_shared<std::string>();
  auto* repro = app.add_subcommand("reproduce", "Re-score an archived snapshot and show the result beside the original");
  repro->add_option("snapshot", *reproSha, "Snapshot SHA-256")->required();
  repro->callback([&exitCode, reproSha] { exitCode = runReproduce(*reproSha); });

  auto* tasks = app.add_subcommand("tasks", "The daemon's task suites");
  tasks->require_subcommand(1);
  tasks->add_subcommand("list", "Every task and whether its task.yaml is valid")->callback([&exitCode] { exitCode = runTasksList(); });
  auto validateSel = std::make_shared<std::vector<std::string>>();
  auto minSpeedup = std::make_shared<double>(1.2);
  auto* validate = tasks->add_subcommand("validate", "Score baseline, solution and a broken build of each task");
  validate->add_option("tasks", *validateSel, "Task selectors (default: every task)");
  validate->add_option("--min-speedup", *minSpeedup, "The solution must be faster than this")->capture_default_str();
  validate->callback([&exitCode, validateSel, minSpeedup] { exitCode = runTasksValidate(*validateSel, *minSpeedup); });
  addAkaTaskCommands(*tasks, exitCode);

  app.add_subcommand("gpus", "GPUs the daemon may lease, and who holds each")->callback([&exitCode] {
    exitCode = runSimpleList("gpus.list", "gpus");
  });
  app.add_subcommand("agents", "Defined agents")->callback([&exitCode] { exitCode = runSimpleList("agents.list", "agents"); });

  // The daemon-backed half of `akactl snapshot` (the local half is in snapshot_commands.cc).
  CLI::App* snapshot = app.get_subcommand("snapshot");
  snapshot->add_subcommand("list", "Snapshots in the daemon's store")->callback([&exitCode] {
    int code = kExitOk;
    auto r = callDaemon("snapshot.list", json::object(), code);
    exitCode = code;
    if (!r) return;
    if (cliOptions().json) return printJson(*r);
    std::printf("%-64s %-10s %-6s %-24s %-8s %s\n", "SHA256", "BYTES", "FILES", "TASK", "ATTEMPT", "AGENT");
    for (const json& s : r->at("snapshots")) {
      const json& m = s.value("metadata", json::object());
      std::printf("%-64s %-10s %-6s %-24s %-8s %s%s\n", str(s, "sha256").c_str(), s.value("archive_size", json(0)).dump().c_str(),
                  s.value("files", json(0)).dump().c_str(), str(m, "task").c_str(), m.value("attempt", json("-")).dump().c_str(),
                  str(m, "agent").c_str(), s.value("corrupt", false) ? "  CORRUPT" : "");
    }
  });
  auto showSha = std::make_shared<std::string>();
  auto* show = snapshot->add_subcommand("show", "A stored snapshot's manifest");
  show->add_option("snapshot", *showSha, "SHA-256")->required();
  show->callback([&exitCode, showSha] {
    int code = kExitOk;
    auto r = callDaemon("snapshot.show", json{{"snapshot", *showSha}}, code);
    if (r) printJson(*r);
    exitCode = code;
  });
  auto exportSha = std::make_shared<std::string>();
  auto exportOut = std::make_shared<std::string>();
  auto* exp = snapshot->add_subcommand("export", "Fetch a stored archive and its manifest (hash checked)");
  exp->add_option("snapshot", *exportSha, "SHA-256")->required();
  exp->add_option("-o,--output", *exportOut, "Archive file to write (default <sha>.tar.zst)");
  exp->callback([&exitCode, exportSha, exportOut] { exitCode = runSnapshotExport(*exportSha, *exportOut); });
  snapshot->add_subcommand("gc", "Remove snapshots no run references (root only)")->callback([&exitCode] {
    int code = kExitOk;
    auto r = callDaemon("snapshot.gc", json::object(), code);
    if (r) printJson(*r);
    exitCode = code;
  });
}

}  // namespace akad::cli
