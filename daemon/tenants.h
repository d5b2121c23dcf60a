#pragma once
// Who may see and do what on a shared daemon (docs/operations.md, "Multi-tenant deployment").
// A tenant is the caller's uid, as the kernel reports it (SO_PEERCRED). A tenant sees and acts
// on its own runs, attempts, logs, reports and snapshots only; admins (root, and the users the
// policy file names) see everything and alone may do what changes the daemon for everyone
// (tasks.validate, snapshot.gc). A refusal is an error with code kPermissionDenied, logged with
// the caller.

#include <sys/types.h>

#include <cstdint>
#include <filesystem>
#include <map>
#include <set>
#include <string>

#include <nlohmann/json.hpp>

#include "common/result.h"
#include "daemon/methods.h"

namespace akad {

// What one tenant may use. 0 means no limit. Admins have no limits.
struct TenantLimits {
  std::int64_t max_queued_attempts = 1000;   // its attempts queued or running at once
  std::int64_t max_concurrent_attempts = 0;  // running at once (0: as many as there are workers)
  double max_agent_time_s = 4 * 3600;        // the longest agent run it may ask for, and the cap on defaults
  std::int64_t max_connections = 64;         // open connections to the socket
  double requests_per_second = 100;          // sustained; a burst of twice that (at least 10) is allowed
  double gpu_hours_per_day = 0;              // GPU lease time over the last 24 hours
  std::string agent_network = "allow";       // the most network its agents may have: none, allow, host
  std::string slurm_account;                 // akad --executor slurm: its jobs' account (empty: --slurm-account)
  nlohmann::json toJson() const;
  // No limit on anything: an admin's.
  static TenantLimits unlimited() {
    return TenantLimits{0, 0, 0, 0, 0, 0, "host", ""};
  }
};

struct TenantPolicy {
  std::set<uid_t> admins;  // besides root
  TenantLimits defaults;
  std::map<uid_t, TenantLimits> tenants;  // overrides, whole: unset fields take the defaults

  // The limits of `uid`; an admin's are all 0 (none).
  TenantLimits limitsFor(uid_t uid) const;
  bool isAdmin(uid_t uid) const { return uid == 0 || admins.count(uid) > 0; }

  bool isAdmin(const Peer& peer) const { return isAdmin(peer.uid); }
  // Ok for an admin or for the owner (the uid that submitted the run); otherwise a
  // kPermissionDenied error that names `what` and nothing of its owner.
  Status mayAccess(const Peer& peer, std::int64_t ownerUid, const std::string& what) const {
    return mayAccess(peer, static_cast<std::int64_t>(peer.uid) == ownerUid, what);
  }
  // The same where ownership is known otherwise (a snapshot is a tenant's when one of its runs
  // recorded it).
  Status mayAccess(const Peer& peer, bool owns, const std::string& what) const;
  Status mustBeAdmin(const Peer& peer, const std::string& action) const;
};

struct NewRun;
// Puts the caller's quota on a run it submits: its open attempts (checked by the store when the
// run is added) and its agent time ceiling (a larger agent_time_limit_s is refused here).
Status applyTenantLimits(NewRun& run, const Peer& peer, const TenantPolicy& policy);

// Reads the policy file (YAML):
//   admins: [alice, 1001]      # user names (resolved now) or uids; optional
//   limits: {max_queued_attempts: 200, ...}   # every tenant's, replacing the built-in ones
//   tenants: {bob: {max_concurrent_attempts: 1}, 1005: {...}}   # per tenant, over `limits`
// Unknown keys, unknown users and anything not in that shape are refused with every problem
// named, one line each, by the one config validator (common/config_check.h). A missing file is
// an error; main() decides whether a default path may be absent.
Result<TenantPolicy> loadTenantPolicy(const std::filesystem::path& file);

}  // namespace akad
