#include "daemon/tenants.h"

#include <regex>

#include <pwd.h>

#include <vector>

#include <yaml-cpp/yaml.h>

#include "common/log.h"
#include "common/protocol.h"
#include "daemon/store.h"
#include "common/yaml_file.h"

namespace akad {

Status TenantPolicy::mayAccess(const Peer& peer, bool owns, const std::string& what) const {
  if (owns || isAdmin(peer)) return {};
  log::warn("denied: uid ", peer.uid, " (pid ", peer.pid, ") asked for ", what, ", which is another tenant's");
  return Error{what + " belongs to another user", protocol::kPermissionDenied};
}

Status TenantPolicy::mustBeAdmin(const Peer& peer, const std::string& action) const {
  if (isAdmin(peer)) return {};
  log::warn("denied: uid ", peer.uid, " (pid ", peer.pid, ") asked to ", action, ", which only admins may");
  return Error{"only an admin may " + action + " (root, or a user in the daemon's tenant policy)",
               protocol::kPermissionDenied};
}

TenantLimits TenantPolicy::limitsFor(uid_t uid) const {
  if (isAdmin(uid)) return TenantLimits::unlimited();
  auto it = tenants.find(uid);
  return it == tenants.end() ? defaults : it->second;
}

nlohmann::json TenantLimits::toJson() const {
  return {{"max_queued_attempts", max_queued_attempts},
          {"max_concurrent_attempts", max_concurrent_attempts},
          {"max_agent_time_s", max_agent_time_s},
          {"max_connections", max_connections},
          {"requests_per_second", requests_per_second},
          {"gpu_hours_per_day", gpu_hours_per_day},
          {"agent_network", agent_network},
          {"slurm_account", slurm_account}};
}

Status applyTenantLimits(NewRun& run, const Peer& peer, const TenantPolicy& policy) {
  const TenantLimits limits = policy.limitsFor(peer.uid);
  run.maxOpenAttempts = limits.max_queued_attempts;
  const nlohmann::json options = run.params.value("options", nlohmann::json::object());
  if (limits.max_agent_time_s > 0 && options.contains("agent_time_limit_s") &&
      options["agent_time_limit_s"].is_number() && options["agent_time_limit_s"].get<double>() > limits.max_agent_time_s) {
    log::warn("refused: uid ", peer.uid, " asked for an agent time of ", options["agent_time_limit_s"].dump(),
              " s, over its ceiling");
    return Error{"agent_time_limit_s " + options["agent_time_limit_s"].dump() + " is above your ceiling of " +
                     nlohmann::json(limits.max_agent_time_s).dump() + " s (akactl quota)",
                 protocol::kQuotaExceeded};
  }
  return {};
}

namespace {

// One limit from the policy file: a number >= 0 (integral where the field is a count).
void readLimit(const YAML::Node& value, const std::string& where, bool integral, double ceiling, double& out,
               std::vector<std::string>& problems) {
  double v = 0;
  try {
    if (!value.IsScalar()) throw YAML::Exception(YAML::Mark::null_mark(), "not a scalar");
    v = value.as<double>();
  } catch (const YAML::Exception&) {
    problems.push_back(where + " must be a number");
    return;
  }
  if (!(v >= 0) || v > ceiling) {
    problems.push_back(where + " must be between 0 (no limit) and " + std::to_string(static_cast<long long>(ceiling)));
    return;
  }
  if (integral && v != static_cast<double>(static_cast<long long>(v))) {
    problems.push_back(where + " must be a whole number");
    return;
  }
  out = v;
}

// A mapping of limits over `base`; unknown names are problems.
TenantLimits readLimits(const YAML::Node& node, const std::string& where, TenantLimits base,
                        std::vector<std::string>& problems) {
  if (!node.IsMap()) {
    problems.push_back(where + " must be a mapping of limits");
    return base;
  }
  for (const auto& kv : node) {
    const std::string key = kv.first.as<std::string>();
    const std::string at = where + "." + key;
    double v = 0;
    auto count = [&](std::int64_t& field, double ceiling) {
      v = static_cast<double>(field);
      readLimit(kv.second, at, true, ceiling, v, problems);
      field = static_cast<std::int64_t>(v);
    };
    if (key == "max_queued_attempts") count(base.max_queued_attempts, 1e7);
    else if (key == "max_concurrent_attempts") count(base.max_concurrent_attempts, 1e4);
    else if (key == "max_connections") count(base.max_connections, 1e6);
    else if (key == "max_agent_time_s") readLimit(kv.second, at, false, 86400, base.max_agent_time_s, problems);
    else if (key == "requests_per_second") readLimit(kv.second, at, false, 1e6, base.requests_per_second, problems);
    else if (key == "gpu_hours_per_day") readLimit(kv.second, at, false, 1e6, base.gpu_hours_per_day, problems);
    else if (key == "agent_network") {
      const std::string mode = kv.second.IsScalar() ? kv.second.as<std::string>() : std::string();
      if (mode != "none" && mode != "allow" && mode != "host") problems.push_back(at + " must be none, allow or host");
      else base.agent_network = mode;
    } else if (key == "slurm_account") {
      static const std::regex name("[A-Za-z0-9_.-]{1,64}");
      const std::string account = kv.second.IsScalar() ? kv.second.as<std::string>() : std::string();
      if (!std::regex_match(account, name)) problems.push_back(at + " must be a Slurm account name (letters, digits, _ . -)");
      else base.slurm_account = account;
    }
    else
      problems.push_back("unknown limit '" + at +
                         "' (known: max_queued_attempts, max_concurrent_attempts, max_agent_time_s, "
                         "max_connections, requests_per_second, gpu_hours_per_day, agent_network, slurm_account)");
  }
  return base;
}

// A user name or a uid, as the policy file gives it.
Result<uid_t> resolveUser(const std::string& who) {
  if (!who.empty() && who.find_first_not_of("0123456789") == std::string::npos) {
    if (who.size() > 10) return Error{"uid '" + who + "' is out of range"};
    const unsigned long uid = std::stoul(who);
    if (uid > 4294967294ul) return Error{"uid '" + who + "' is out of range"};
    return static_cast<uid_t>(uid);
  }
  std::vector<char> buf(16384);
  passwd pw{};
  passwd* found = nullptr;
  const int err = ::getpwnam_r(who.c_str(), &pw, buf.data(), buf.size(), &found);
  if (err != 0) return errnoError("cannot look up user '" + who + "'", err);
  if (found == nullptr) return Error{"no user '" + who + "' on this machine"};
  return found->pw_uid;
}

}  // namespace

Result<TenantPolicy> loadTenantPolicy(const std::filesystem::path& file) {
  auto loaded = loadYamlFile(file);
  if (!loaded) return Error{"tenant policy " + loaded.error().message};
  YAML::Node root = *loaded;
  std::vector<std::string> problems;
  TenantPolicy policy;
  if (root.IsNull()) return policy;  // an empty file: root is the only admin
  if (!root.IsMap()) return Error{"tenant policy " + file.string() + ": expected a mapping with 'admins', 'limits', 'tenants'"};
  for (const auto& kv : root) {
    const std::string key = kv.first.as<std::string>();
    if (key != "admins" && key != "limits" && key != "tenants")
      problems.push_back("unknown key '" + key + "' (known: admins, limits, tenants)");
  }
  if (const YAML::Node limits = root["limits"]) policy.defaults = readLimits(limits, "limits", policy.defaults, problems);
  if (const YAML::Node tenants = root["tenants"]) {
    if (!tenants.IsMap()) {
      problems.push_back("'tenants' must map user names or uids to their limits");
    } else {
      for (const auto& kv : tenants) {
        const std::string who = kv.first.as<std::string>();
        auto uid = resolveUser(who);
        if (!uid) {
          problems.push_back("tenants: " + uid.error().message);
          continue;
        }
        policy.tenants[*uid] = readLimits(kv.second, "tenants." + who, policy.defaults, problems);
      }
    }
  }
  if (const YAML::Node admins = root["admins"]) {
    if (!admins.IsSequence()) {
      problems.push_back("'admins' must be a list of user names or uids");
    } else {
      for (const auto& a : admins) {
        if (!a.IsScalar()) {
          problems.push_back("'admins' holds something that is not a user name or uid");
          continue;
        }
        auto uid = resolveUser(a.as<std::string>());
        if (!uid) problems.push_back("admins: " + uid.error().message);
        else policy.admins.insert(*uid);
      }
    }
  }
  if (!problems.empty()) {
    std::string message = "tenant policy " + file.string() + ":";
    for (const auto& p : problems) message += "\n  " + p;
    return Error{message};
  }
  return policy;
}

}  // namespace akad
