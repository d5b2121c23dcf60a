#pragma once
// Host uids for sandboxes that run a tenant's code (docs/operations.md, "Multi-tenant
// deployment"). Each running attempt holds one uid of the range for its agent, compile and
// candidate sandboxes, so per-uid kernel limits (inotify instances and watches, RLIMIT_NPROC,
// message queues, keyrings) are never shared between two attempts that run at once, nor
// with the trusted sandboxes (reference, driver, checker), which run as the daemon's
// --sandbox-uid. The uid's gid is the same number.

#include <sys/types.h>

#include <filesystem>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "common/result.h"

namespace akad {

struct UidRange {
  uid_t first = 0;
  uid_t count = 0;
  bool contains(uid_t uid) const { return uid >= first && uid - first < count; }
  std::string text() const;  // "FIRST-LAST"
};

// "FIRST-LAST" (inclusive), both in 1..4294967294 and FIRST <= LAST.
Result<UidRange> parseUidRange(const std::string& text);

// The lines of a subordinate-id file (/etc/subuid, /etc/subgid: "name:first:count") whose range
// meets `range` or `uid`: a user who owns such ids can map them in a user namespace of its own
// (newuidmap) and act as the sandboxes' uid. Empty when none does or the file is absent.
std::vector<std::string> subordinateOverlaps(const std::filesystem::path& file, const UidRange& range, uid_t uid);

class UidPool {
 public:
  explicit UidPool(UidRange range) : range_(range) {}
  // The lowest free uid, or nullopt when every one is taken.
  std::optional<uid_t> acquire();
  // Takes this uid (one a running attempt already uses); false if outside the range or taken.
  bool take(uid_t uid);
  void release(uid_t uid);
  std::size_t inUse() const;

 private:
  UidRange range_;
  mutable std::mutex mutex_;
  std::set<uid_t> taken_;
};

// Holds one uid of a pool until destroyed.
class UidLease {
 public:
  UidLease(UidPool& pool, uid_t uid) : pool_(&pool), uid_(uid) {}
  UidLease(const UidLease&) = delete;
  UidLease& operator=(const UidLease&) = delete;
  ~UidLease() { pool_->release(uid_); }
  uid_t uid() const { return uid_; }

 private:
  UidPool* pool_;
  uid_t uid_;
};

}  // namespace akad
