// The scheduler's claim (daemon/fair_share.h, claimByFairShare: what Scheduler::claimNext
// runs) on a real SQLite store in a temp dir: the order in which tenants' attempts are taken,
// that a claim marks the attempt and its run running, and the quota caps that leave attempts
// queued. chooseFairShare alone is tried in quota_test.cc; here the store supplies the usage
// and takes the claim.
#include <gtest/gtest.h>

#include <chrono>
#include <mutex>
#include <set>
#include <thread>

#include "daemon/fair_share.h"
#include "daemon/scheduler.h"
#include "daemon/store.h"
#include "daemon/tenants.h"
#include "tests/daemon/harness.h"

namespace akad {
namespace {

const std::string kWindowStart = "1970-01-01T00:00:00.000Z";  // everything counts

struct SchedulerStore {
  test::TempDir dir;
  std::unique_ptr<Store> store;
  SchedulerStore() {
    auto s = Store::open(dir / "akad.db");
    EXPECT_TRUE(s) << s.error().message;
    if (s) store = std::move(*s);
  }

  // A run of `attempts` attempts of one task by tenant `uid`; its id.
  std::string submit(std::int64_t uid, std::int64_t attempts, bool gpu = false) {
    NewRun r;
    r.agent = "noop";
    r.taskIds = {gpu ? "gpu/task" : "cpu/task"};
    if (gpu) r.tasksNeedingGpu.insert(r.taskIds.front());
    r.attemptsPerTask = attempts;
    r.submitterUid = uid;
    r.submitterGid = uid;
    r.params = {{"tasks", r.taskIds}, {"options", nlohmann::json::object()}};
    auto change = store->submitRun(r);
    EXPECT_TRUE(change) << change.error().message;
    return change ? change->run.id : "";
  }

  std::int64_t ownerOf(const AttemptRecord& a) {
    auto run = store->getRun(a.runId);
    EXPECT_TRUE(run) << run.error().message;
    return run ? run->submitterUid : -1;
  }

  // One claim as the scheduler makes it; the claimed attempt's tenant (-1: nothing claimed).
  std::int64_t claimTenant(const TenantPolicy& policy = {},
                           const std::function<bool(const AttemptRecord&)>& startable = nullptr) {
    auto claimed = claimByFairShare(*store, policy, kWindowStart, startable);
    EXPECT_TRUE(claimed) << claimed.error().message;
    if (!claimed || !claimed->first) return -1;
    last = *claimed->first;
    return ownerOf(last);
  }

  void finish(const AttemptRecord& a) { ASSERT_TRUE(store->finishAttempt(a.id, "scored", nlohmann::json::object(), std::nullopt)); }

  AttemptRecord last;
};

// Tenant 1 floods the queue before 2 and 3 submit: each claim goes to the tenant with the fewest
// attempts running, then the least time used (running attempts count so far), then the oldest
// attempt; so 2 and 3 are not kept behind 1's flood, and 1's attempts go in their order.
TEST(SchedulerClaim, TenantsTakeTurnsByAttemptsRunningThenTimeUsedAndTheFloodGoesLast) {
  SchedulerStore s;
  s.submit(1, 4);
  s.submit(2, 1);
  s.submit(3, 2);
  std::vector<std::int64_t> order;
  std::vector<std::int64_t> indicesOf1;
  for (int i = 0; i < 7; ++i) {
    order.push_back(s.claimTenant());
    if (order.back() == 1) indicesOf1.push_back(s.last.attemptIndex);
    // The store keeps times to the millisecond: each running attempt is clearly older than the next.
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  // 1 (all equal: the oldest attempt), 2 (runs none), 3 (runs none), 3 (one running each, but
  // 3's has run for less time than 1's), then 1's remaining three.
  EXPECT_EQ(order, (std::vector<std::int64_t>{1, 2, 3, 3, 1, 1, 1}));
  EXPECT_EQ(indicesOf1, (std::vector<std::int64_t>{0, 1, 2, 3}));
  EXPECT_EQ(s.claimTenant(), -1) << "the queue is empty";
}

// A claim is the store's: the attempt is running with its start time, its run is running, and
// the events that say so come back to be published.
TEST(SchedulerClaim, AClaimMarksTheAttemptAndItsRunRunningInTheStore) {
  SchedulerStore s;
  const std::string run = s.submit(1, 2);
  auto claimed = claimByFairShare(*s.store, TenantPolicy{}, kWindowStart, nullptr);
  ASSERT_TRUE(claimed) << claimed.error().message;
  ASSERT_TRUE(claimed->first);
  auto stored = s.store->getAttempt(claimed->first->id);
  ASSERT_TRUE(stored) << stored.error().message;
  EXPECT_EQ(stored->state, "running");
  EXPECT_TRUE(stored->startedAt);
  auto r = s.store->getRun(run);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->state, "running");
  std::set<std::string> kinds;
  for (const EventRecord& e : claimed->second) kinds.insert(e.kind);
  EXPECT_EQ(kinds, (std::set<std::string>{"run.state", "attempt.state"}));
  // The second claim takes the other attempt, and the run's state event is not repeated.
  auto second = claimByFairShare(*s.store, TenantPolicy{}, kWindowStart, nullptr);
  ASSERT_TRUE(second && second->first);
  EXPECT_NE(second->first->id, claimed->first->id);
  ASSERT_EQ(second->second.size(), 1u);
  EXPECT_EQ(second->second.front().kind, "attempt.state");
}

// With nothing running, the tenant that used less attempt time in the window goes first, even
// when the other's attempt is older.
TEST(SchedulerClaim, WithNothingRunningTheTenantThatUsedLessTimeGoesFirst) {
  SchedulerStore s;
  s.submit(1, 2);
  ASSERT_EQ(s.claimTenant(), 1);
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // tenant 1 has used 50 ms
  s.finish(s.last);
  s.submit(2, 1);
  EXPECT_EQ(s.claimTenant(), 2);
  EXPECT_EQ(s.claimTenant(), 1);
}

// A cancelled run's queued attempts are never claimed.
TEST(SchedulerClaim, ACancelledRunsAttemptsAreNotClaimed) {
  SchedulerStore s;
  const std::string cancelled = s.submit(1, 2);
  ASSERT_TRUE(s.store->cancelRun(cancelled));
  s.submit(2, 1);
  EXPECT_EQ(s.claimTenant(), 2);
  EXPECT_EQ(s.claimTenant(), -1);
}

// max_concurrent_attempts: a tenant at its limit is passed over and its attempts stay queued,
// even when nobody else has anything; the end of its running attempt lets the next one start.
TEST(SchedulerClaim, ATenantAtItsConcurrencyCapWaitsAndOthersGoOn) {
  SchedulerStore s;
  TenantPolicy policy;
  policy.tenants[1].max_concurrent_attempts = 1;
  s.submit(1, 3);
  s.submit(2, 2);
  ASSERT_EQ(s.claimTenant(policy), 1);
  const AttemptRecord running = s.last;
  EXPECT_EQ(s.claimTenant(policy), 2);
  EXPECT_EQ(s.claimTenant(policy), 2);
  EXPECT_EQ(s.claimTenant(policy), -1) << "tenant 1 is at its cap: nothing may start";
  auto usage = s.store->tenantUsage(kWindowStart);
  ASSERT_TRUE(usage);
  EXPECT_EQ((*usage)[1].queued, 2) << "the capped attempts stay queued";
  s.finish(running);
  EXPECT_EQ(s.claimTenant(policy), 1);
  EXPECT_EQ(s.claimTenant(policy), -1);
}

// gpu_hours_per_day: once a tenant's GPU lease time in the window reaches it, its GPU attempts
// stay queued while its CPU attempts still run; GPU time before the window does not count.
TEST(SchedulerClaim, ATenantPastItsGpuHoursKeepsItsGpuAttemptsQueuedButRunsItsCpuOnes) {
  SchedulerStore s;
  TenantPolicy policy;
  policy.tenants[1].gpu_hours_per_day = 0.5;
  s.submit(1, 1, /*gpu=*/true);
  ASSERT_EQ(s.claimTenant(policy), 1);
  ASSERT_TRUE(s.store->recordGpuUsage(s.last.id, 1, 1800));
  s.finish(s.last);
  s.submit(1, 1, /*gpu=*/true);
  const std::string cpuRun = s.submit(1, 1, /*gpu=*/false);
  ASSERT_EQ(s.claimTenant(policy), 1);
  EXPECT_EQ(s.last.runId, cpuRun) << "the GPU attempt went first past the GPU hours";
  EXPECT_FALSE(s.last.needsGpu);
  EXPECT_EQ(s.claimTenant(policy), -1) << "the GPU attempt must wait";
  // In a window that starts after the lease ended, the hours are free again.
  auto claimed = claimByFairShare(*s.store, policy, isoTimeUtc(-60), nullptr);
  ASSERT_TRUE(claimed && claimed->first);
  EXPECT_TRUE(claimed->first->needsGpu);
}

// The executor's own condition (a GPU task needs a free GPU) leaves those attempts queued and
// takes the next startable one, of the same tenant or another.
TEST(SchedulerClaim, AttemptsThatCannotStartNowAreSkippedNotDropped) {
  SchedulerStore s;
  s.submit(1, 1, /*gpu=*/true);
  s.submit(1, 1, /*gpu=*/false);
  auto noGpuFree = [](const AttemptRecord& a) { return !a.needsGpu; };
  ASSERT_EQ(s.claimTenant({}, noGpuFree), 1);
  EXPECT_FALSE(s.last.needsGpu);
  EXPECT_EQ(s.claimTenant({}, noGpuFree), -1);
  ASSERT_EQ(s.claimTenant({}, nullptr), 1);
  EXPECT_TRUE(s.last.needsGpu);
}

// Workers claim from several threads: each attempt is taken exactly once, and all of them.
TEST(SchedulerClaim, WorkersClaimingAtOnceTakeEachAttemptExactlyOnce) {
  SchedulerStore s;
  for (std::int64_t uid = 1; uid <= 4; ++uid) s.submit(uid, 10);
  std::mutex m;
  std::multiset<std::int64_t> taken;
  std::vector<std::thread> workers;
  for (int w = 0; w < 4; ++w)
    workers.emplace_back([&] {
      for (;;) {
        auto claimed = claimByFairShare(*s.store, TenantPolicy{}, kWindowStart, nullptr);
        if (!claimed || !claimed->first) return;
        std::lock_guard lock(m);
        taken.insert(claimed->first->id);
      }
    });
  for (auto& t : workers) t.join();
  EXPECT_EQ(taken.size(), 40u);
  EXPECT_EQ(std::set<std::int64_t>(taken.begin(), taken.end()).size(), 40u) << "an attempt was claimed twice";
  auto usage = s.store->tenantUsage(kWindowStart);
  ASSERT_TRUE(usage);
  for (std::int64_t uid = 1; uid <= 4; ++uid) {
    EXPECT_EQ((*usage)[uid].running, 10) << uid;
    EXPECT_EQ((*usage)[uid].queued, 0) << uid;
  }
}

}  // namespace
}  // namespace akad
