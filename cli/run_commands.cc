#include "cli/run_commands.h"

#include <cstdio>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "cli/json_text.h"
#include "cli/options.h"
#include "cli/progress.h"

#include <unistd.h>
#include <cstdlib>
#include "common/protocol.h"

namespace akad::cli {

using nlohmann::json;

namespace {

struct SubmitArgs {
  std::vector<std::string> tasks;
  std::string agent;
  std::string agentCommand;
  int attempts = 1;
  std::string label;
  std::vector<std::string> options;
  std::vector<std::string> passEnv;
  std::string gpuModel;
  int gpuShare = 0;
  double agentTimeLimit = 0;
  std::string network;
  std::vector<std::string> allow;
  bool watch = false;
  bool wait = false;
};

std::string countsText(const json& run) {
  const json& c = run.at("counts");
  std::string out = std::to_string(c.value("total", 0)) + " attempt(s)";
  std::string parts;
  for (const char* s : {"queued", "running", "scored", "failed", "cancelled", "interrupted"}) {
    if (c.value(s, 0) > 0) parts += (parts.empty() ? "" : ", ") + std::string(s) + " " + std::to_string(c.value(s, 0));
  }
  return parts.empty() ? out : out + ": " + parts;
}

void printEventHuman(const json& ev) {
  std::string details;
  if (auto d = ev.find("data"); d != ev.end() && d->is_object()) {
    for (const auto& [k, v] : d->items()) {
      details += " " + k + "=" + (v.is_string() ? v.get<std::string>() : v.dump());
    }
  }
  std::cout << str(ev, "at") << "  " << str(ev, "kind");
  if (auto a = ev.find("attempt_id"); a != ev.end() && !a->is_null()) std::cout << " attempt " << a->dump();
  std::cout << details << std::endl;
}

int runSubmit(const SubmitArgs& a) {
  json options = json::object();
  for (const std::string& kv : a.options) {
    auto eq = kv.find('=');
    if (eq == std::string::npos || eq == 0) return usageError("--option wants KEY=VALUE, got \"" + kv + "\"");
    // Values that parse as JSON (numbers, true, {"a":1}) keep their type; the rest are strings.
    std::string value = kv.substr(eq + 1);
    json parsed = json::parse(value, nullptr, false);
    options[kv.substr(0, eq)] = parsed.is_discarded() ? json(value) : parsed;
  }
  // Credentials go from the user's environment to the daemon's memory, never to its store.
  for (const std::string& name : a.passEnv) {
    const char* v = std::getenv(name.c_str());
    if (v == nullptr) return usageError("--pass-env " + name + ": the variable is not set in this environment");
    options["credentials"][name] = v;
  }
  if (!a.gpuModel.empty()) options["gpu_model"] = a.gpuModel;
  if (a.gpuShare > 0) options["gpu_share"] = a.gpuShare;
  if (a.agentTimeLimit > 0) options["agent_time_limit_s"] = a.agentTimeLimit;
  if (!a.network.empty()) options["network"] = a.network;
  if (!a.allow.empty()) options["allow"] = a.allow;
  json params{{"tasks", a.tasks}, {"attempts", a.attempts}, {"options", options}};
  if (!a.agent.empty()) params["agent"] = a.agent;
  if (!a.agentCommand.empty()) params["agent_command"] = a.agentCommand;
  if (!a.label.empty()) params["label"] = a.label;

  auto client = connectDaemon();
  if (!client) return reportError(client.error());
  auto result = client->call("run.submit", params);
  if (!result) return reportError(result.error());
  const json& run = result->at("run");
  if (cliOptions().json) printJson(*result);
  else {
    std::cout << "submitted run " << str(run, "id") << " (" << str(run, "state") << "): "
              << run.at("params").at("task_ids").size() << " task(s), " << countsText(run) << "\n";
  }
  if (a.wait) return followRun(*client, str(run, "id"), true);
  if (!a.watch) return kExitOk;
  std::string id = str(run, "id");
  auto watched = client->stream("run.watch", json{{"id", id}}, [](const json& ev) {
    if (cliOptions().json) std::cout << ev.dump(-1, ' ', false, json::error_handler_t::replace) << std::endl;
    else printEventHuman(ev);
  });
  if (!watched) return reportError(watched.error());
  if (cliOptions().json) printJson(*watched);
  else std::cout << "run " << id << " ended: " << str(watched->at("run"), "state") << "\n";
  return kExitOk;
}

int runStatusList(const std::string& state, int limit) {
  json params{{"limit", limit}};
  if (!state.empty()) params["state"] = state;
  int exitCode = kExitOk;
  auto result = callDaemon("run.list", params, exitCode);
  if (!result) return exitCode;
  if (cliOptions().json) {
    printJson(*result);
    return kExitOk;
  }
  const json& runs = result->at("runs");
  if (runs.empty()) {
    std::cout << "no runs" << (state.empty() ? "" : " in state " + state) << "\n";
    return kExitOk;
  }
  std::printf("%-12s %-10s %-9s %-24s %s\n", "RUN", "STATE", "ATTEMPTS", "CREATED", "LABEL");
  for (const json& r : runs) {
    const json& c = r.at("counts");
    std::string attempts = std::to_string(c.value("total", 0) - c.value("queued", 0) - c.value("running", 0)) + "/" +
                           std::to_string(c.value("total", 0));
    std::printf("%-12s %-10s %-9s %-24s %s\n", str(r, "id").c_str(), str(r, "state").c_str(), attempts.c_str(),
                str(r, "created_at").c_str(), str(r, "label").c_str());
  }
  return kExitOk;
}

int runStatusOne(const std::string& id) {
  int exitCode = kExitOk;
  auto result = callDaemon("run.get", json{{"id", id}}, exitCode);
  if (!result) return exitCode;
  if (cliOptions().json) {
    printJson(*result);
    return kExitOk;
  }
  const json& r = result->at("run");
  std::cout << "run " << str(r, "id") << "  " << str(r, "state") << "\n"
            << "  label      " << str(r, "label") << "\n"
            << "  agent      " << (r.at("agent").is_string() ? str(r, "agent") : "(none)") << "\n";
  if (r.at("agent_command").is_string()) std::cout << "  command    " << str(r, "agent_command") << "\n";
  std::cout << "  submitted  " << str(r, "created_at") << " by uid " << r.value("submitter_uid", -1) << "\n";
  if (r.at("ended_at").is_string()) std::cout << "  ended      " << str(r, "ended_at") << "\n";
  std::cout << "  attempts   " << countsText(r) << "\n\n";
  std::printf("  %-8s %-28s %-4s %-12s %-10s %s\n", "ATTEMPT", "TASK", "#", "STATE", "STAGE", "ERROR");
  for (const json& a : result->at("attempts")) {
    std::printf("  %-8lld %-28s %-4lld %-12s %-10s %s\n", static_cast<long long>(a.value("id", 0LL)),
                str(a, "task_id").c_str(), static_cast<long long>(a.value("attempt_index", 0LL)),
                str(a, "state").c_str(), a.at("stage").is_string() ? str(a, "stage").c_str() : "-",
                a.at("error").is_string() ? str(a, "error").c_str() : "");
  }
  return kExitOk;
}

int runWatch(const std::string& id, bool replay) {
  auto client = connectDaemon();
  if (!client) return reportError(client.error());
  // On a terminal, a progress bar; in scripts (--json or a pipe), the events themselves.
  if (replay && !cliOptions().json && ::isatty(STDOUT_FILENO)) return followRun(*client, id, false);
  auto result = client->stream("run.watch", json{{"id", id}, {"from_start", replay}}, [](const json& ev) {
    if (cliOptions().json) std::cout << ev.dump(-1, ' ', false, json::error_handler_t::replace) << std::endl;
    else printEventHuman(ev);
  });
  if (!result) return reportError(result.error());
  if (cliOptions().json) std::cout << result->dump(-1, ' ', false, json::error_handler_t::replace) << std::endl;
  else std::cout << "run " << id << " ended: " << str(result->at("run"), "state") << "\n";
  return kExitOk;
}

int runCancel(const std::string& id) {
  int exitCode = kExitOk;
  auto result = callDaemon("run.cancel", json{{"id", id}}, exitCode);
  if (!result) return exitCode;
  if (cliOptions().json) printJson(*result);
  else std::cout << "cancelled run " << id << " (" << countsText(result->at("run")) << ")\n";
  return kExitOk;
}

}  // namespace

void addRunCommands(CLI::App& app, int& exitCode) {
  auto submit = std::make_shared<SubmitArgs>();
  auto* sub = app.add_subcommand("submit", "Submit a run: every selected task x --attempts attempts, queued");
  sub->add_option("tasks", submit->tasks, "Task selectors: a suite (cpu), a task (cpu/softmax) or a glob (cpu/*)")
      ->required();
  sub->add_option("--agent", submit->agent, "Agent to run (e.g. noop)");
  sub->add_option("--agent-command", submit->agentCommand, "Command to run as the agent, instead of a named agent");
  sub->add_option("-n,--attempts", submit->attempts, "Attempts per task")->check(CLI::Range(1, 100));
  sub->add_option("--label", submit->label, "Free text to recognise the run by");
  sub->add_option("-o,--option", submit->options, "Run option KEY=VALUE (VALUE parsed as JSON if it can be)");
  sub->add_flag("-w,--watch", submit->watch, "Follow the run's events until it ends");
  sub->add_flag("--wait", submit->wait, "Wait for the run with a progress bar, then print its report");
  sub->add_option("--pass-env", submit->passEnv, "Give the agent this variable from your environment (API keys; kept in memory only)");
  sub->add_option("--gpu-model", submit->gpuModel, "Lease only GPUs whose model contains this text");
  sub->add_option("--gpu-share", submit->gpuShare,
                  "Let up to N of this run's attempts share one GPU (never with other runs); its timings are labelled gpu_shared");
  sub->add_option("--agent-time-limit", submit->agentTimeLimit, "Seconds the agent may run (default: the agent's and task's limits)")
      ->check(CLI::PositiveNumber);
  sub->add_option("--network", submit->network, "Narrow the agent's network: none or allow (never more than its own)")
      ->check(CLI::IsMember({"none", "allow", "host"}));
  sub->add_option("--allow", submit->allow, "Narrow the agent's allow list to these host:port entries (repeatable)");
  sub->callback([&exitCode, submit] { exitCode = runSubmit(*submit); });

  auto statusRun = std::make_shared<std::string>();
  auto statusState = std::make_shared<std::string>();
  auto statusLimit = std::make_shared<int>(50);
  auto* status = app.add_subcommand("status", "List runs, or show one run and its attempts");
  status->add_option("run", *statusRun, "Run id (r-xxxxxxxx); without it, list runs");
  status->add_option("--state", *statusState, "List only runs in this state")
      ->check(CLI::IsMember({"queued", "running", "done", "cancelled", "failed"}));
  status->add_option("--limit", *statusLimit, "List at most this many runs, newest first")->check(CLI::Range(1, 1000));
  status->callback([&exitCode, statusRun, statusState, statusLimit] {
    exitCode = statusRun->empty() ? runStatusList(*statusState, *statusLimit) : runStatusOne(*statusRun);
  });

  auto watchRun = std::make_shared<std::string>();
  auto watchNew = std::make_shared<bool>(false);
  auto* watch = app.add_subcommand("watch", "Print a run's events as they happen, until the run ends");
  watch->add_option("run", *watchRun, "Run id")->required();
  watch->add_flag("--new-only", *watchNew, "Skip the events recorded before now");
  watch->callback([&exitCode, watchRun, watchNew] { exitCode = runWatch(*watchRun, !*watchNew); });

  auto cancelRun = std::make_shared<std::string>();
  auto* cancel = app.add_subcommand("cancel", "Cancel a run and its unfinished attempts");
  cancel->add_option("run", *cancelRun, "Run id")->required();
  cancel->callback([&exitCode, cancelRun] { exitCode = runCancel(*cancelRun); });
}

}  // namespace akad::cli
