#include "daemon/pipeline/agent_stage.h"

#include <sys/stat.h>

#include <algorithm>
#include <memory>

#include "daemon/pipeline/egress_proxy.h"
#include "daemon/pipeline/files.h"

namespace fs = std::filesystem;

namespace akad {
namespace {

// Where the sandbox sees the proxy's socket and the bridge, and the port the bridge offers.
constexpr const char* kNetDirInSandbox = "/.akad-net";
constexpr const char* kBridgeInSandbox = "/.akad-net-bridge";
constexpr int kProxyPort = 3128;

// The agent's sandbox: its command, the image's binds and variables with the agent's own, the
// task's description, the credentials it names, and the limits.
SandboxRequest agentRequest(const Task& task, const AgentDefinition& agent, const fs::path& workspace,
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
  return r;
}

// network: allow: the sandbox keeps its loopback-only namespace; the bridge in it carries the
// agent's proxy connections to the egress proxy, which decides (egress_proxy.h). Starts the
// proxy on a socket in `netDir` and wraps the request's command in the bridge.
Result<std::unique_ptr<EgressProxy>> routeThroughProxy(const AgentDefinition& agent, const fs::path& netDir,
                                                       SandboxRequest& r) {
  EgressPolicy policy;
  for (const std::string& entry : agent.allow) {
    auto rule = parseEgressRule(entry);
    if (!rule) return rule.error();
    policy.allow.push_back(*rule);
  }
  std::error_code ec;
  fs::remove_all(netDir, ec);
  if (::mkdir(netDir.c_str(), 0755) != 0) return errnoError("cannot create " + netDir.string());
  auto proxy = EgressProxy::start(netDir / "proxy.sock", policy);
  if (!proxy) return proxy.error();
  const fs::path bridge = netBridgePath();
  r.binds.push_back({netDir, kNetDirInSandbox, false});
  r.binds.push_back({bridge, kBridgeInSandbox, false});
  std::vector<std::string> wrapped = {kBridgeInSandbox, "--listen", std::to_string(kProxyPort), "--proxy",
                                      std::string(kNetDirInSandbox) + "/proxy.sock", "--"};
  wrapped.insert(wrapped.end(), r.command.begin(), r.command.end());
  r.command = std::move(wrapped);
  const std::string url = "http://127.0.0.1:" + std::to_string(kProxyPort);
  for (const char* k : {"HTTPS_PROXY", "HTTP_PROXY", "https_proxy", "http_proxy"}) r.env[k] = url;
  for (const char* k : {"NO_PROXY", "no_proxy"}) r.env[k] = "localhost,127.0.0.1,::1";
  return proxy;
}

// Stops the proxy and keeps every connection and refusal, one JSON line each (`akactl logs
// ATTEMPT --stage network`); returns its summary.
Result<nlohmann::json> recordNetwork(EgressProxy& proxy, const fs::path& logsDir, const fs::path& netDir) {
  proxy.stop();
  std::string lines;
  for (const auto& e : proxy.log()) lines += e.dump() + "\n";
  if (auto st = writeFile(logsDir / "network.jsonl", lines); !st) return st.error();
  std::error_code ec;
  fs::remove_all(netDir, ec);
  return proxy.summary();
}

}  // namespace

Result<nlohmann::json> runAgentStage(const Task& task, const AgentDefinition& agent,
                                     const std::filesystem::path& workspace,
                                     const AgentStageOptions& o) {
  SandboxRequest r = agentRequest(task, agent, workspace, o);
  std::unique_ptr<EgressProxy> proxy;
  const fs::path netDir = o.logs_dir.parent_path() / "net";
  if (agent.network_allow && o.allow_network) {
    auto started = routeThroughProxy(agent, netDir, r);
    if (!started) return started.error();
    proxy = std::move(*started);
  }
  auto outcome = runSandbox(r, o.canceller);
  nlohmann::json network = nlohmann::json::object();
  if (proxy) {
    auto recorded = recordNetwork(*proxy, o.logs_dir, netDir);
    if (!recorded) return recorded.error();
    network = *recorded;
  }
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
  if (proxy) out["network"] = network;
  return out;
}

}  // namespace akad
