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
#include <set>
#include <string>

#include "common/result.h"
#include "daemon/methods.h"

namespace akad {

struct TenantPolicy {
  std::set<uid_t> admins;  // besides root

  bool isAdmin(const Peer& peer) const { return peer.uid == 0 || admins.count(peer.uid) > 0; }
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

// Reads the policy file (YAML):
//   admins: [alice, 1001]      # user names (resolved now) or uids; optional
// Unknown keys, unknown users and anything not in that shape are refused with every problem
// named. A missing file is an error; main() decides whether a default path may be absent.
Result<TenantPolicy> loadTenantPolicy(const std::filesystem::path& file);

}  // namespace akad
