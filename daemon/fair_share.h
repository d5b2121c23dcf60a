#pragma once
// Which queued attempt runs next when a worker is free: fair share across tenants, not FIFO
// (docs/operations.md, "Multi-tenant deployment"). A tenant whose flood fills the queue gets
// no more than its turn: the next attempt is the oldest one of the tenant with the fewest
// attempts running now, then the least attempt time used over the last 24 hours, then the one
// that has waited longest. Tenants at their concurrency limit, and GPU attempts of tenants past
// their GPU hours, are passed over (they stay queued).

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "daemon/store.h"
#include "daemon/tenants.h"

namespace akad {

struct FairShareInputs {
  // Per submitter uid; missing uids have used nothing.
  std::map<std::int64_t, TenantUsage> usage;
  std::function<TenantLimits(std::int64_t uid)> limits;
  // Whether the attempt can start now at all (a GPU task needs a free GPU).
  std::function<bool(const AttemptRecord&)> startable;
};

// The index into `queued` (oldest first) of the attempt to run next, or nullopt.
std::optional<std::size_t> chooseFairShare(const std::vector<QueuedAttempt>& queued, const FairShareInputs& in);

// The executor's whole step: each tenant's usage since `usageSinceIso` from the store, its
// limits from `tenants`, the choice above over the store's queue, and the chosen attempt
// claimed (marked running, with its events) in the store's transaction. nullopt: nothing can
// start. Two claims at once never take the same attempt; a caller that claims from several
// threads holds one lock around this so that each choice sees the previous one's effect.
using Claim = std::pair<std::optional<AttemptRecord>, std::vector<EventRecord>>;
Result<Claim> claimByFairShare(Store& store, const TenantPolicy& tenants, const std::string& usageSinceIso,
                               const std::function<bool(const AttemptRecord&)>& startable);

}  // namespace akad
