#include "daemon/tenants.h"

#include <regex>

#include <pwd.h>

#include <vector>

#include "common/config_check.h"
#include "common/log.h"
#include "common/protocol.h"
#include "common/yaml_json.h"
#include "daemon/store.h"

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

// A mapping of limits over `base`, each checked by the one config validator: counts are whole
// numbers, times and rates any number, all from 0 (no limit) to a ceiling.
TenantLimits readLimitMap(ConfigCheck& check, const nlohmann::json& node, const std::string& path, TenantLimits base) {
  if (!check.map(node, path, "limits")) return base;
  check.onlyKeys(node, path,
                 {"max_queued_attempts", "max_concurrent_attempts", "max_agent_time_s", "max_connections",
                  "requests_per_second", "gpu_hours_per_day", "agent_network", "slurm_account"},
                 "limit");
  check.readNumber<std::int64_t>(node, path, "max_queued_attempts", base.max_queued_attempts, 0, 10'000'000);
  check.readNumber<std::int64_t>(node, path, "max_concurrent_attempts", base.max_concurrent_attempts, 0, 10'000);
  check.readNumber<std::int64_t>(node, path, "max_connections", base.max_connections, 0, 1'000'000);
  check.readNumber(node, path, "max_agent_time_s", base.max_agent_time_s, 0.0, 86400.0);
  check.readNumber(node, path, "requests_per_second", base.requests_per_second, 0.0, 1e6);
  check.readNumber(node, path, "gpu_hours_per_day", base.gpu_hours_per_day, 0.0, 1e6);
  std::string mode;
  if (const nlohmann::json* v = check.member(node, path, "agent_network"); v && check.string(*v, keyPath(path, "agent_network"), mode)) {
    if (mode == "none" || mode == "allow" || mode == "host") base.agent_network = mode;
    else check.fail(keyPath(path, "agent_network"), "must be none, allow or host");
  }
  // The account goes on sbatch's command line: nothing that could read as an option.
  static const std::regex accountName("[A-Za-z0-9_.-]{1,64}");
  std::string account;
  if (const nlohmann::json* v = check.member(node, path, "slurm_account"); v && check.string(*v, keyPath(path, "slurm_account"), account)) {
    if (std::regex_match(account, accountName)) base.slurm_account = account;
    else check.fail(keyPath(path, "slurm_account"), "must be a Slurm account name (letters, digits, _ . -)");
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

// The admins: user names or uids.
void readAdmins(ConfigCheck& check, const nlohmann::json& root, TenantPolicy& policy) {
  std::vector<std::string> admins;
  if (!check.readStrings(root, "", "admins", admins)) return;
  for (const std::string& who : admins) {
    if (auto uid = resolveUser(who)) policy.admins.insert(*uid);
    else check.fail("", "admins: " + uid.error().message);
  }
}

// Each tenant's limits over the policy's defaults, by user name or uid.
void readTenants(ConfigCheck& check, const nlohmann::json& root, TenantPolicy& policy) {
  const nlohmann::json* tenants = check.member(root, "", "tenants");
  if (!tenants || !check.map(*tenants, "tenants", "user names or uids to their limits")) return;
  for (auto it = tenants->begin(); it != tenants->end(); ++it) {
    auto uid = resolveUser(it.key());
    if (!uid) check.fail("", "tenants: " + uid.error().message);
    else policy.tenants[*uid] = readLimitMap(check, *it, keyPath("tenants", it.key()), policy.defaults);
  }
}

}  // namespace

Result<TenantPolicy> loadTenantPolicy(const std::filesystem::path& file) {
  auto loaded = loadYamlDocument(file);
  if (!loaded) return Error{"tenant policy " + loaded.error().message};
  TenantPolicy policy;
  if (loaded->root.is_null()) return policy;  // an empty file: root is the only admin
  // Its problems name the key bare ("limits.max_connections must be ..."), as they always have.
  ConfigCheck check("tenant policy " + file.string(), &loaded->texts, ConfigCheck::Naming::Bare);
  if (!check.map(loaded->root, "", "admins, limits and tenants")) return check.error();
  check.onlyKeys(loaded->root, "", {"admins", "limits", "tenants"}, "key");
  if (const nlohmann::json* limits = check.member(loaded->root, "", "limits"))
    policy.defaults = readLimitMap(check, *limits, "limits", policy.defaults);
  readTenants(check, loaded->root, policy);
  readAdmins(check, loaded->root, policy);
  if (!check.ok()) return check.error();
  return policy;
}

}  // namespace akad
