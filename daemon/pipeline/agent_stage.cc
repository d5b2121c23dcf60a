#include "daemon/pipeline/agent_stage.h"

#include <algorithm>

namespace akad {

Result<nlohmann::json> runAgentStage(const Task& task, const AgentDefinition& agent,
                                     const std::filesystem::path& workspace,
                                     const AgentStageOptions& o) {
  SandboxRequest r;
  r.workspace = workspace;
  r.command = agent.command;
  r.binds = o.image.binds;
  r.env = o.image.env;
  for (const auto& [k, v] : agent.env) r.env[k] = v;
  std::string editable;
  for (const auto& e : task.editable) editable += (editable.empty() ? "" : " ") + e;
  r.env["AKA_TASK"] = task.id;
  r.env["AKA_PROMPT"] = task.prompt;
  r.env["AKA_PROMPT_FILE"] = "/workspace/PROMPT.md";
  r.env["AKA_EDITABLE"] = editable;
  for (const auto& name : agent.credentials) {
    auto it = o.credentials.find(name);
    if (it != o.credentials.end()) r.env[name] = it->second;
  }
  if (agent.mount_solution) r.binds.push_back({task.solutionDir(), "/solution", false});
  r.network_host = agent.network_host && o.allow_network;
  r.memory_bytes = task.limits.memory_bytes;
  r.pids = std::max(task.limits.pids, 512);
  r.wall_s = o.time_limit_s > 0 ? o.time_limit_s : std::min(agent.time_limit_s, task.limits.agent_s);
  r.gpus = task.gpu ? o.gpus : std::vector<std::string>{};
  r.outside_uid = o.outside_uid;
  r.outside_gid = o.outside_gid;
  r.stdout_file = o.logs_dir / "agent.out";
  r.stderr_file = o.logs_dir / "agent.err";
  auto outcome = runSandbox(r, o.canceller);
  if (!outcome) return outcome.error();
  if (outcome->status == "setup-failed")
    return Error{"the agent's sandbox could not be set up: " + outcome->describe()};
  nlohmann::json out = {{"agent", agent.name},
                        {"status", outcome->status},
                        {"exit_code", outcome->exit_code},
                        {"summary", outcome->describe()},
                        {"timed_out", outcome->status == "wall-timeout"},
                        {"wall_s", outcome->wall_s},
                        {"sandbox", outcome->result}};
  return out;
}

}  // namespace akad
