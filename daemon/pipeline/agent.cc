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
    if (!isAgentName(a.name)) return bad("name", "'" + a.name + "' must match " + kAgentNameRule);
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
    if (root["image"]) {
      static const std::regex imageRe("[a-z0-9][a-z0-9-]{0,63}");
      a.image = root["image"].as<std::string>();
      if (!std::regex_match(a.image, imageRe)) return bad("image", "'" + a.image + "' is not an image name ([a-z0-9-]+)");
    }
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

NetworkLevel networkLevel(const AgentDefinition& a) {
  return a.network_host ? NetworkLevel::Host : a.network_allow ? NetworkLevel::Allow : NetworkLevel::None;
}

const char* networkLevelName(NetworkLevel level) {
  return level == NetworkLevel::Host ? "host" : level == NetworkLevel::Allow ? "allow" : "none";
}

Result<NetworkLevel> parseNetworkLevel(const std::string& text) {
  if (text == "none") return NetworkLevel::None;
  if (text == "allow") return NetworkLevel::Allow;
  if (text == "host") return NetworkLevel::Host;
  return Error{"a network is none, allow or host, got '" + text + "'"};
}

Status restrictNetwork(AgentDefinition& a, NetworkLevel level, const std::vector<std::string>& allow) {
  const NetworkLevel has = networkLevel(a);
  if (level > has)
    return Error{std::string("agent '") + a.name + "' has network '" + networkLevelName(has) + "'; a run may not give it '" +
                 networkLevelName(level) + "'"};
  if (level == NetworkLevel::Allow && has == NetworkLevel::Host)
    return Error{"agent '" + a.name + "' has the host network and no allow list to narrow it to"};
  if (!allow.empty()) {
    if (level != NetworkLevel::Allow) return Error{"an allow list narrows network: allow only"};
    for (const std::string& e : allow)
      if (std::find(a.allow.begin(), a.allow.end(), e) == a.allow.end())
        return Error{"'" + e + "' is not on agent '" + a.name + "''s allow list; a run may only narrow it"};
    a.allow = allow;
  }
  a.network_host = level == NetworkLevel::Host;
  a.network_allow = level == NetworkLevel::Allow;
  if (level != NetworkLevel::Allow) a.allow.clear();
  return {};
}

Status applyRunNetwork(AgentDefinition& a, const nlohmann::json& options) {
  if (!options.is_object() || (!options.contains("network") && !options.contains("allow"))) return {};
  NetworkLevel level = networkLevel(a);
  if (auto n = options.find("network"); n != options.end() && n->is_string()) {
    auto parsed = parseNetworkLevel(n->get<std::string>());
    if (!parsed) return parsed.error();
    level = *parsed;
  }
  std::vector<std::string> allow;
  if (auto l = options.find("allow"); l != options.end() && l->is_array())
    for (const auto& e : *l)
      if (e.is_string()) allow.push_back(e.get<std::string>());
  return restrictNetwork(a, level, allow);
}

bool capNetwork(AgentDefinition& a, NetworkLevel cap) {
  const NetworkLevel has = networkLevel(a);
  if (has <= cap) return false;
  const NetworkLevel to = has == NetworkLevel::Host && cap == NetworkLevel::Allow ? NetworkLevel::None : cap;
  (void)restrictNetwork(a, to, {});
  return true;
}

bool isAgentName(const std::string& name) {
  if (name.empty() || name.size() > 64) return false;
  for (std::size_t i = 0; i < name.size(); ++i) {
    const char c = name[i];
    const bool alnum = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
    if (!alnum && (i == 0 || (c != '_' && c != '-'))) return false;
  }
  return true;
}

Result<AgentDefinition> findAgent(const fs::path& agentsDir, const std::string& name) {
  if (!isAgentName(name)) return Error{"agent name '" + name + "' must match " + kAgentNameRule};
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

nlohmann::json agentToJson(const AgentDefinition& a) {
  return {{"name", a.name},
          {"description", a.description},
          {"command", a.command},
          {"network_host", a.network_host},
          {"network_allow", a.network_allow},
          {"allow", a.allow},
          {"time_limit_s", a.time_limit_s},
          {"mount_solution", a.mount_solution},
          {"credentials", a.credentials},
          {"env", a.env},
          {"image", a.image},
          {"template", a.template_only}};
}

Result<AgentDefinition> agentFromJson(const nlohmann::json& j) {
  try {
    AgentDefinition a;
    a.name = j.at("name").get<std::string>();
    a.description = j.at("description").get<std::string>();
    a.command = j.at("command").get<std::vector<std::string>>();
    a.network_host = j.at("network_host").get<bool>();
    a.network_allow = j.at("network_allow").get<bool>();
    a.allow = j.at("allow").get<std::vector<std::string>>();
    a.time_limit_s = j.at("time_limit_s").get<double>();
    a.mount_solution = j.at("mount_solution").get<bool>();
    a.credentials = j.at("credentials").get<std::vector<std::string>>();
    a.env = j.at("env").get<std::map<std::string, std::string>>();
    a.image = j.at("image").get<std::string>();
    a.template_only = j.at("template").get<bool>();
    if (a.command.empty()) return Error{"the agent definition has no command"};
    return a;
  } catch (const nlohmann::json::exception& e) {
    return Error{std::string("malformed agent definition: ") + e.what()};
  }
}

}  // namespace akad
