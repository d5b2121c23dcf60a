#include "daemon/pipeline/agent.h"

#include <algorithm>
#include <regex>

#include <yaml-cpp/yaml.h>

#include "daemon/pipeline/egress_proxy.h"
#include "daemon/yaml_file.h"

namespace fs = std::filesystem;

namespace akad {

Result<AgentDefinition> loadAgent(const fs::path& file) {
  auto loaded = loadYamlFile(file);
  if (!loaded) return Error{"cannot read the agent definition: " + loaded.error().message};
  YAML::Node root = *loaded;
  auto bad = [&](const std::string& field, const std::string& what) {
    return Error{file.string() + ": " + field + ": " + what};
  };
  if (!root.IsMap()) return bad("(top level)", "must be a map");
  AgentDefinition a;
  try {
    if (!root["name"] || !root["name"].IsScalar()) return bad("name", "missing");
    a.name = root["name"].as<std::string>();
    if (a.name != file.stem().string()) return bad("name", "'" + a.name + "' must equal the file name");
    a.description = root["description"] ? root["description"].as<std::string>() : "";
    const YAML::Node cmd = root["command"];
    if (!cmd || !cmd.IsSequence() || cmd.size() == 0) return bad("command", "must be a non-empty list (argv)");
    for (const auto& c : cmd) a.command.push_back(c.as<std::string>());
    const std::string net = root["network"] ? root["network"].as<std::string>() : "none";
    if (net != "none" && net != "host" && net != "allow") return bad("network", "must be none, allow or host");
    a.network_host = net == "host";
    a.network_allow = net == "allow";
    if (const YAML::Node allow = root["allow"]) {
      if (!a.network_allow) return bad("allow", "is for network: allow only");
      if (!allow.IsSequence()) return bad("allow", "must be a list of host:port entries");
      for (const auto& e : allow) {
        const std::string entry = e.as<std::string>();
        if (auto r = parseEgressRule(entry); !r) return bad("allow", r.error().message);
        a.allow.push_back(entry);
      }
    }
    if (a.network_allow && a.allow.empty()) return bad("allow", "network: allow needs a list of host:port entries");
    if (root["time_limit_s"]) a.time_limit_s = root["time_limit_s"].as<double>();
    if (a.time_limit_s <= 0) return bad("time_limit_s", "must be positive");
    if (root["mount_solution"]) a.mount_solution = root["mount_solution"].as<bool>();
    if (root["template"]) a.template_only = root["template"].as<bool>();
    if (const YAML::Node creds = root["credentials"]) {
      if (!creds.IsSequence()) return bad("credentials", "must be a list of variable names");
      for (const auto& c : creds) a.credentials.push_back(c.as<std::string>());
    }
    if (const YAML::Node env = root["env"]) {
      if (!env.IsMap()) return bad("env", "must be a map");
      for (const auto& kv : env) a.env[kv.first.as<std::string>()] = kv.second.as<std::string>();
    }
  } catch (const YAML::Exception& e) {
    return bad("(value)", std::string("wrong type: ") + e.what());
  }
  return a;
}

Result<AgentDefinition> findAgent(const fs::path& agentsDir, const std::string& name) {
  static const std::regex nameRe("[a-z0-9][a-z0-9_-]{0,63}");
  if (!std::regex_match(name, nameRe)) return Error{"agent name '" + name + "' must match [a-z0-9][a-z0-9_-]*"};
  const fs::path file = agentsDir / (name + ".yaml");
  if (!fs::exists(file)) {
    std::string known;
    for (const auto& a : listAgents(agentsDir)) known += (known.empty() ? "" : ", ") + a.name;
    return Error{"unknown agent '" + name + "' (defined: " + known + ")"};
  }
  return loadAgent(file);
}

std::vector<AgentDefinition> listAgents(const fs::path& agentsDir) {
  std::vector<AgentDefinition> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(agentsDir, ec)) {
    if (e.path().extension() != ".yaml") continue;
    if (auto a = loadAgent(e.path())) out.push_back(std::move(*a));
  }
  std::sort(out.begin(), out.end(), [](const auto& x, const auto& y) { return x.name < y.name; });
  return out;
}

AgentDefinition adHocAgent(const std::string& shellCommand, double timeLimitS) {
  AgentDefinition a;
  a.name = "ad-hoc";
  a.description = "ad-hoc command from akactl submit --agent-command";
  a.command = {"/bin/sh", "-c", shellCommand};
  a.time_limit_s = timeLimitS;
  return a;
}

}  // namespace akad
