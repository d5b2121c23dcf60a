#pragma once
// An agent: a named command template run in the attempt's sandbox with the workspace as its
// working directory (images/agents/<name>.yaml), or an ad-hoc command from `akactl submit
// --agent-command`.

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "common/result.h"

namespace akad {

struct AgentDefinition {
  std::string name;
  std::string description;
  std::vector<std::string> command;
  bool network_host = false;
  // `network: allow`: the hosts the agent may reach through the egress proxy, "host:port" or
  // "host:port private" (egress_proxy.h).
  bool network_allow = false;
  std::vector<std::string> allow;
  double time_limit_s = 600;
  bool mount_solution = false;  // only the `reference` agent: the task's solution at /solution
  std::vector<std::string> credentials;  // environment variables the user must provide
  std::map<std::string, std::string> env;
  bool template_only = false;  // a real CLI agent: needs network and keys to be useful
};

Result<AgentDefinition> loadAgent(const std::filesystem::path& file);
// Finds <agentsDir>/<name>.yaml; the name must be [a-z0-9_-]+.
Result<AgentDefinition> findAgent(const std::filesystem::path& agentsDir, const std::string& name);
std::vector<AgentDefinition> listAgents(const std::filesystem::path& agentsDir);
// `akactl submit --agent-command 'CMD'`: run CMD with /bin/sh -c, no network.
AgentDefinition adHocAgent(const std::string& shellCommand, double timeLimitS);

}  // namespace akad
