#include "daemon/tenants.h"

#include <pwd.h>

#include <vector>

#include <yaml-cpp/yaml.h>

#include "common/log.h"
#include "common/protocol.h"

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

namespace {

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
  YAML::Node root;
  try {
    root = YAML::LoadFile(file.string());
  } catch (const YAML::Exception& e) {
    return Error{"tenant policy " + file.string() + ": " + e.what()};
  }
  std::vector<std::string> problems;
  TenantPolicy policy;
  if (root.IsNull()) return policy;  // an empty file: root is the only admin
  if (!root.IsMap()) return Error{"tenant policy " + file.string() + ": expected a mapping with 'admins'"};
  for (const auto& kv : root) {
    const std::string key = kv.first.as<std::string>();
    if (key != "admins") problems.push_back("unknown key '" + key + "'");
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
