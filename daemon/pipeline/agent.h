#pragma once
// An agent: a named command template run in the attempt's sandbox with the workspace as its
// working directory (images/agents/<name>.yaml), or an ad-hoc command from `akactl submit
// --agent-command`.

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

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
  // An image profile (images/<name>/image.yaml) laid over the task's for this agent's sandbox
  // only: the agent's own program and what it needs (agent-cli: Claude Code and Codex). The
  // scorer's sandboxes never see it.
  std::string image;
  bool template_only = false;  // a real CLI agent: needs network and keys to be useful
};

// How much network an agent has: none < allow (its list, through the egress proxy) < host.
enum class NetworkLevel { None = 0, Allow = 1, Host = 2 };
NetworkLevel networkLevel(const AgentDefinition& agent);
const char* networkLevelName(NetworkLevel level);
Result<NetworkLevel> parseNetworkLevel(const std::string& text);
// Narrows the agent's network to at most `level` and, when `allow` is not empty, to those of
// its allow-list entries (which must all be on its list). Widening is an error: a run may take
// network away from an agent, never give it more.
Status restrictNetwork(AgentDefinition& agent, NetworkLevel level, const std::vector<std::string>& allow);
// The run's options `network` and `allow` (akactl submit --network, --allow), applied with
// restrictNetwork; absent options change nothing.
Status applyRunNetwork(AgentDefinition& agent, const nlohmann::json& options);
// Takes the agent down to `cap` where it has more (host over an allow cap becomes none: it has
// no list). Returns whether it changed anything.
bool capNetwork(AgentDefinition& agent, NetworkLevel cap);

// The one rule for an agent's name, wherever one comes in (run.submit's `agent`, an agent file,
// a lookup): [a-z0-9][a-z0-9_-]{0,63}. The name is a file name (<agentsDir>/<name>.yaml) and
// lands in paths and log fields; no dot, so it can never be "..", a hidden file or carry a
// second extension.
inline constexpr const char* kAgentNameRule = "[a-z0-9][a-z0-9_-]{0,63}";
bool isAgentName(const std::string& name);

// An agent file whose `name` is not the file's own name or breaks isAgentName is refused.
Result<AgentDefinition> loadAgent(const std::filesystem::path& file);
// Finds <agentsDir>/<name>.yaml; the name must pass isAgentName.
Result<AgentDefinition> findAgent(const std::filesystem::path& agentsDir, const std::string& name);
std::vector<AgentDefinition> listAgents(const std::filesystem::path& agentsDir);
// `akactl submit --agent-command 'CMD'`: run CMD with /bin/sh -c, no network.
AgentDefinition adHocAgent(const std::string& shellCommand, double timeLimitS);

// A resolved definition as JSON and back, for a program that runs the attempt elsewhere (the
// Slurm executor's node program): every field, the limits already applied.
nlohmann::json agentToJson(const AgentDefinition& agent);
Result<AgentDefinition> agentFromJson(const nlohmann::json& j);

}  // namespace akad
