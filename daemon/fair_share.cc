#include "daemon/fair_share.h"

#include <tuple>

namespace akad {

std::optional<std::size_t> chooseFairShare(const std::vector<QueuedAttempt>& queued, const FairShareInputs& in) {
  struct Pick {
    std::size_t index;
    std::tuple<std::int64_t, double, std::int64_t> key;  // running, time used, attempt id
  };
  std::map<std::int64_t, std::optional<TenantLimits>> limits;  // looked up once per tenant
  std::map<std::int64_t, Pick> firstOf;                        // per tenant, its oldest startable attempt
  for (std::size_t i = 0; i < queued.size(); ++i) {
    const QueuedAttempt& q = queued[i];
    if (firstOf.count(q.submitterUid)) continue;  // the tenant's oldest is already found
    auto& lim = limits[q.submitterUid];
    if (!lim) lim = in.limits ? in.limits(q.submitterUid) : TenantLimits::unlimited();
    auto u = in.usage.find(q.submitterUid);
    const TenantUsage used = u == in.usage.end() ? TenantUsage{} : u->second;
    if (lim->max_concurrent_attempts > 0 && used.running >= lim->max_concurrent_attempts) continue;
    if (q.attempt.needsGpu && lim->gpu_hours_per_day > 0 && used.gpu_seconds >= lim->gpu_hours_per_day * 3600) continue;
    if (in.startable && !in.startable(q.attempt)) continue;
    firstOf.emplace(q.submitterUid, Pick{i, {used.running, used.attempt_seconds, q.attempt.id}});
  }
  std::optional<Pick> best;
  for (const auto& [uid, pick] : firstOf)
    if (!best || pick.key < best->key) best = pick;
  if (!best) return std::nullopt;
  return best->index;
}

Result<Claim> claimByFairShare(Store& store, const TenantPolicy& tenants, const std::string& usageSinceIso,
                               const std::function<bool(const AttemptRecord&)>& startable) {
  FairShareInputs in;
  auto usage = store.tenantUsage(usageSinceIso);
  if (!usage) return usage.error();
  in.usage = std::move(*usage);
  in.limits = [&tenants](std::int64_t uid) { return tenants.limitsFor(static_cast<uid_t>(uid)); };
  in.startable = startable;
  return store.claimAttempt([&](const std::vector<QueuedAttempt>& queued) { return chooseFairShare(queued, in); });
}

}  // namespace akad
