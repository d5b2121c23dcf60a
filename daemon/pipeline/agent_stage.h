#pragma once
// Stage 2 of an attempt: the agent runs in its own akabox sandbox with the workspace as its
// working directory. The task's harness, held-out configurations and solution are not in the
// sandbox (only the `reference` agent gets the solution, read-only at /solution).

#include <filesystem>
#include <map>
#include <string>

#include <nlohmann/json.hpp>

#include "common/result.h"
#include "daemon/pipeline/agent.h"
#include "daemon/pipeline/score.h"
#include "daemon/pipeline/task.h"

namespace akad {

struct AgentStageOptions {
  ImageProfile image;
  std::vector<std::string> gpus;
  std::map<std::string, std::string> credentials;  // values for the agent's `credentials`
  double time_limit_s = 0;                         // 0: min(agent's, task's)
  bool allow_network = true;                       // an operator can forbid agents the network
  std::filesystem::path logs_dir;
  SandboxCanceller* canceller = nullptr;
  uid_t outside_uid = 0;  // the host uid the agent runs as (0: the workspace's owner)
  gid_t outside_gid = 0;
};

// Runs the agent; an agent that fails or times out is a result (its workspace is still
// snapshotted and scored), not an error. Errors are set-up failures.
Result<nlohmann::json> runAgentStage(const Task& task, const AgentDefinition& agent,
                                     const std::filesystem::path& workspace,
                                     const AgentStageOptions& options);

}  // namespace akad
