#include "daemon/pipeline/agent.h"

#include <algorithm>
#include <regex>

#include "common/config_check.h"
#include "common/yaml_json.h"
#include "daemon/pipeline/egress_proxy.h"

namespace fs = std::filesystem;

namespace akad {

namespace {

using nlohmann::json;

// network (none, allow or host) and, for allow, the host:port entries it may reach.
void readNetwork(ConfigCheck& check, const json& root, AgentDefinition& a) {
  std::string net = "none";
  check.readString(root, "", "network", net);
  if (net != "none" && net != "host" && net != "allow") check.fail("network", "must be none, allow or host, not '" + net + "'");
  a.network_host = net == "host";
  a.network_allow = net == "allow";
  if (const json* allow = check.member(root, "", "allow")) {
    if (!a.network_allow) check.fail("allow", "is for network: allow only");
    if (!allow->is_array()) check.fail("allow", "must be a list of host:port entries");
    else if (check.strings(*allow, "allow", a.allow))
      for (std::size_t i = 0; i < a.allow.size(); ++i)
        if (auto r = parseEgressRule(a.allow[i]); !r) check.fail(indexPath("allow", i), r.error().message);
  }
  if (a.network_allow && a.allow.empty()) check.fail("allow", "network: allow needs a list of host:port entries");
}

// What runs: the command, its time, the image laid over the task's, the environment.
void readCommand(ConfigCheck& check, const json& root, AgentDefinition& a) {
  if (check.readStrings(root, "", "command", a.command, ConfigCheck::Required) && a.command.empty())
    check.fail("command", "must be a non-empty list (argv)");
  if (check.readNumber(root, "", "time_limit_s", a.time_limit_s, 0.0, 1e9) && a.time_limit_s <= 0)
    check.fail("time_limit_s", "must be positive");
  check.readBool(root, "", "mount_solution", a.mount_solution);
  check.readBool(root, "", "template", a.template_only);
  static const std::regex imageRe("[a-z0-9][a-z0-9-]{0,63}");
  if (check.readString(root, "", "image", a.image) && !a.image.empty() && !std::regex_match(a.image, imageRe))
    check.fail("image", "'" + a.image + "' is not an image name ([a-z0-9-]+)");
  check.readStrings(root, "", "credentials", a.credentials);
  if (const json* env = check.member(root, "", "env")) check.stringMap(*env, "env", a.env);
}

}  // namespace

Result<AgentDefinition> loadAgent(const fs::path& file) {
  auto doc = loadYamlDocument(file);
  if (!doc) return Error{"cannot read the agent definition: " + doc.error().message};
  const json& root = doc->root;
  ConfigCheck check(file.string(), &doc->texts);
  AgentDefinition a;
  if (!check.map(root, "")) return check.error();
  check.onlyKeys(root, "", {"name", "description", "command", "network", "allow", "time_limit_s", "mount_solution", "image",
                            "template", "credentials", "env"});
  if (check.readString(root, "", "name", a.name, ConfigCheck::Required)) {
    if (a.name != file.stem().string()) check.fail("name", "'" + a.name + "' must equal the file name");
    if (!isAgentName(a.name)) check.fail("name", "'" + a.name + "' must match " + kAgentNameRule);
  }
  check.readString(root, "", "description", a.description);
  readCommand(check, root, a);
  readNetwork(check, root, a);
  if (!check.ok()) return check.error();
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
