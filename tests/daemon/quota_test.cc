// Tenant quotas and fair share without a daemon: the policy file's limits (daemon/tenants.h),
// the store's part (open attempts checked in the submit's transaction, usage per tenant, on a
// real SQLite file) and the executor's choice (daemon/fair_share.h).
#include <gtest/gtest.h>

#include <fstream>
#include <set>

#include "common/protocol.h"
#include "daemon/fair_share.h"
#include "daemon/store.h"
#include "daemon/tenants.h"
#include "daemon/uid_pool.h"
#include "tests/daemon/harness.h"

namespace akad {
namespace {

Result<TenantPolicy> policyFrom(const test::TempDir& dir, const std::string& yaml) {
  const auto file = dir / "tenants.yaml";
  std::ofstream(file) << yaml;
  return loadTenantPolicy(file);
}

TEST(TenantLimits, PolicyFileSetsDefaultsAndPerTenantOverrides) {
  test::TempDir dir;
  auto p = policyFrom(dir,
                      "admins: [7]\n"
                      "limits: {max_queued_attempts: 50, requests_per_second: 20, gpu_hours_per_day: 1.5}\n"
                      "tenants:\n"
                      "  1005: {max_concurrent_attempts: 1}\n");
  ASSERT_TRUE(p) << p.error().message;
  const TenantLimits other = p->limitsFor(1001);
  EXPECT_EQ(other.max_queued_attempts, 50);
  EXPECT_EQ(other.requests_per_second, 20);
  EXPECT_EQ(other.gpu_hours_per_day, 1.5);
  EXPECT_EQ(other.max_concurrent_attempts, 0);
  EXPECT_EQ(other.max_connections, TenantLimits{}.max_connections);  // built-in default kept
  const TenantLimits special = p->limitsFor(1005);
  EXPECT_EQ(special.max_concurrent_attempts, 1);
  EXPECT_EQ(special.max_queued_attempts, 50);  // the policy's defaults under the override
  // Admins, root included, have no limits.
  for (uid_t admin : {0u, 7u}) {
    const TenantLimits none = p->limitsFor(admin);
    EXPECT_EQ(none.max_queued_attempts, 0);
    EXPECT_EQ(none.max_connections, 0);
    EXPECT_EQ(none.requests_per_second, 0);
    EXPECT_EQ(none.max_agent_time_s, 0);
  }
}

// akad --executor slurm charges a tenant's jobs to its own Slurm account; a name that could
// smuggle options into sbatch's command line is refused.
TEST(TenantLimits, ATenantsSlurmAccountIsReadAndChecked) {
  test::TempDir dir;
  auto p = policyFrom(dir, "tenants:\n  1005: {slurm_account: alice-lab}\n");
  ASSERT_TRUE(p) << p.error().message;
  EXPECT_EQ(p->limitsFor(1005).slurm_account, "alice-lab");
  EXPECT_EQ(p->limitsFor(1006).slurm_account, "");
  auto bad = policyFrom(dir, "tenants:\n  1005: {slurm_account: \"x --qos=high\"}\n");
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message.find("must be a Slurm account name"), std::string::npos) << bad.error().message;
}

TEST(TenantLimits, TheShippedExamplePolicyLoadsAndStatesTheBuiltInLimits) {
  auto p = loadTenantPolicy(std::filesystem::path(AKAD_SOURCE_TASKS).parent_path() / "policies" / "tenants.example.yaml");
  ASSERT_TRUE(p) << p.error().message;
  EXPECT_TRUE(p->admins.empty());
  EXPECT_EQ(p->defaults.toJson(), TenantLimits{}.toJson());
}

TEST(TenantLimits, BadLimitsAreRefusedWithEveryProblemNamed) {
  test::TempDir dir;
  auto p = policyFrom(dir,
                      "limits: {max_queued_attempts: -1, max_connections: 2.5, requests_per_second: lots, "
                      "max_agent_time_s: 999999, burst: 3}\n"
                      "tenants: {no-such-user-here: {max_connections: 1}, 1003: [1, 2]}\n");
  ASSERT_FALSE(p);
  const std::string& m = p.error().message;
  EXPECT_NE(m.find("limits.max_queued_attempts must be between 0"), std::string::npos) << m;
  EXPECT_NE(m.find("limits.max_connections must be a whole number"), std::string::npos) << m;
  EXPECT_NE(m.find("limits.requests_per_second must be a number"), std::string::npos) << m;
  EXPECT_NE(m.find("limits.max_agent_time_s must be between 0"), std::string::npos) << m;
  EXPECT_NE(m.find("unknown limit 'limits.burst'"), std::string::npos) << m;
  EXPECT_NE(m.find("no user 'no-such-user-here'"), std::string::npos) << m;
  EXPECT_NE(m.find("tenants.1003 must be a mapping"), std::string::npos) << m;
}

// The policy file is read by the one config validator (common/config_check.h): every problem
// of the file at once, one line each naming the file, and the same typing rules as every
// configuration file.
TEST(TenantLimits, EveryProblemOfAPolicyFileIsReportedOnALineOfItsOwn) {
  test::TempDir dir;
  auto p = policyFrom(dir,
                      "admin: [7]\n"
                      "admins: 7\n"
                      "limits: {max_connections: many, agent_network: everything}\n"
                      "tenants: {1005: {max_conections: 1, gpu_hours_per_day: -2}}\n");
  ASSERT_FALSE(p);
  const std::string& m = p.error().message;
  const std::string file = "tenant policy " + (dir / "tenants.yaml").string() + ": ";
  const std::vector<std::string> lines = test::linesOf(m);
  ASSERT_EQ(lines.size(), 6u) << m;
  for (const std::string& line : lines) EXPECT_EQ(line.rfind(file, 0), 0u) << line;
  for (const char* needle : {"unknown key 'admin' (known: admins, limits, tenants)", "admins must be a list of strings",
                             "limits.max_connections must be a number, not 'many'",
                             "limits.agent_network must be none, allow or host",
                             "unknown limit 'tenants.1005.max_conections' (known: max_queued_attempts,",
                             "tenants.1005.gpu_hours_per_day must be between 0 and 1000000, not -2"})
    EXPECT_NE(m.find(needle), std::string::npos) << needle << " not in:\n" << m;
}

// A quoted number is a string, a whole-number limit takes no fraction, and nothing YAML 1.1
// would have read as a boolean or a number (yes, 0x10) is one.
TEST(TenantLimits, AValueOfTheWrongTypeIsRefusedWithWhatWasWritten) {
  test::TempDir dir;
  auto p = policyFrom(dir,
                      "limits:\n"
                      "  max_queued_attempts: \"30\"\n"
                      "  max_concurrent_attempts: 2.0\n"
                      "  requests_per_second: yes\n"
                      "  max_connections: 0x10\n"
                      "  agent_network: [none]\n"
                      "  slurm_account: {name: lab}\n"
                      "tenants: [bob]\n");
  ASSERT_FALSE(p);
  const std::string& m = p.error().message;
  for (const char* needle : {"limits.max_queued_attempts must be a number, not '30'",
                             "limits.max_concurrent_attempts must be a whole number, not 2.0",
                             "limits.requests_per_second must be a number, not 'yes'",
                             "limits.max_connections must be a number, not '0x10'",
                             "limits.agent_network must be a string", "limits.slurm_account must be a string",
                             "tenants must be a mapping of user names or uids to their limits"})
    EXPECT_NE(m.find(needle), std::string::npos) << needle << " not in:\n" << m;
  auto notAMap = policyFrom(dir, "- admins\n");
  ASSERT_FALSE(notAMap);
  EXPECT_NE(notAMap.error().message.find("must be a mapping of admins, limits and tenants"), std::string::npos)
      << notAMap.error().message;
}

// What a valid file means is unchanged: numbers written as integers or decimals, user names and
// uids (a uid in the admins list is a YAML integer, an account of digits a string), an empty
// file.
TEST(TenantLimits, AValidPolicyMeansWhatItAlwaysMeant) {
  test::TempDir dir;
  auto p = policyFrom(dir,
                      "admins: [root, 7]\n"
                      "limits: {max_agent_time_s: 600, requests_per_second: 2.5, agent_network: none}\n"
                      "tenants: {1005: {max_connections: 3, slurm_account: 1234}}\n");
  ASSERT_TRUE(p) << p.error().message;
  EXPECT_EQ(p->admins, (std::set<uid_t>{0, 7}));
  EXPECT_EQ(p->defaults.max_agent_time_s, 600);
  EXPECT_EQ(p->defaults.requests_per_second, 2.5);
  EXPECT_EQ(p->defaults.agent_network, "none");
  const TenantLimits t = p->limitsFor(1005);
  EXPECT_EQ(t.max_connections, 3);
  EXPECT_EQ(t.slurm_account, "1234");
  EXPECT_EQ(t.agent_network, "none") << "a tenant's limits stand over the policy's";
  auto empty = policyFrom(dir, "");
  ASSERT_TRUE(empty) << empty.error().message;
  EXPECT_TRUE(empty->admins.empty());
  EXPECT_EQ(empty->defaults.toJson(), TenantLimits{}.toJson());
}

TEST(TenantLimits, APolicyPathThatIsNoRegularFileIsAnErrorNotACrash) {
  test::TempDir dir;
  std::filesystem::create_directories(dir / "tenants.yaml");
  auto p = loadTenantPolicy(dir / "tenants.yaml");
  ASSERT_FALSE(p);
  EXPECT_NE(p.error().message.find("not a regular file"), std::string::npos) << p.error().message;
  auto missing = loadTenantPolicy(dir / "absent.yaml");
  ASSERT_FALSE(missing);
  EXPECT_NE(missing.error().message.find("cannot read the file"), std::string::npos) << missing.error().message;
}

TEST(TenantLimits, AnAgentTimeAboveTheCeilingIsRefusedAtSubmit) {
  TenantPolicy policy;
  policy.defaults.max_agent_time_s = 600;
  NewRun run;
  run.params = {{"options", {{"agent_time_limit_s", 601}}}};
  Peer tenant{1, 1001, 1001};
  auto refused = applyTenantLimits(run, tenant, policy);
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code, protocol::kQuotaExceeded);
  EXPECT_NE(refused.error().message.find("above your ceiling of 600"), std::string::npos) << refused.error().message;
  run.params["options"]["agent_time_limit_s"] = 600;
  EXPECT_TRUE(applyTenantLimits(run, tenant, policy));
  EXPECT_EQ(run.maxOpenAttempts, TenantLimits{}.max_queued_attempts);
  // Root is not capped.
  run.params["options"]["agent_time_limit_s"] = 86400;
  EXPECT_TRUE(applyTenantLimits(run, Peer{1, 0, 0}, policy));
  EXPECT_EQ(run.maxOpenAttempts, 0);
}

NewRun runOf(std::int64_t uid, std::int64_t attempts, bool gpu = false) {
  NewRun r;
  r.agent = "noop";
  r.taskIds = {"cpu/vecadd"};
  if (gpu) r.tasksNeedingGpu.insert("cpu/vecadd");
  r.attemptsPerTask = attempts;
  r.submitterUid = uid;
  r.submitterGid = uid;
  r.params = {{"tasks", {"cpu/vecadd"}}, {"options", nlohmann::json::object()}};
  return r;
}

TEST(TenantQuota, TheStoreRefusesARunThatTakesATenantPastItsOpenAttempts) {
  test::TempDir dir;
  auto store = Store::open(dir / "akad.db");
  ASSERT_TRUE(store) << store.error().message;
  NewRun first = runOf(1001, 3);
  first.maxOpenAttempts = 4;
  ASSERT_TRUE((*store)->submitRun(first));
  NewRun second = runOf(1001, 2);
  second.maxOpenAttempts = 4;
  auto refused = (*store)->submitRun(second);
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code, protocol::kQuotaExceeded);
  EXPECT_NE(refused.error().message.find("adds 2 attempts to the 3 you have queued or running; your limit is 4"),
            std::string::npos)
      << refused.error().message;
  // Nothing of the refused run was stored; another tenant is not counted against this one.
  auto runs = (*store)->listRuns(std::nullopt, 100, std::nullopt);
  ASSERT_TRUE(runs);
  EXPECT_EQ(runs->size(), 1u);
  NewRun other = runOf(1002, 4);
  other.maxOpenAttempts = 4;
  EXPECT_TRUE((*store)->submitRun(other));
  // A finished attempt frees its place.
  auto claimed = (*store)->claimNextAttempt([](const AttemptRecord&) { return true; });
  ASSERT_TRUE(claimed && claimed->first);
  ASSERT_TRUE((*store)->finishAttempt(claimed->first->id, "failed", std::nullopt, "x"));
  second.attemptsPerTask = 1;
  EXPECT_TRUE((*store)->submitRun(second));
}

TEST(TenantQuota, UsageCountsOpenAttemptsAttemptTimeAndGpuTimePerTenant) {
  test::TempDir dir;
  auto store = Store::open(dir / "akad.db");
  ASSERT_TRUE(store) << store.error().message;
  ASSERT_TRUE((*store)->submitRun(runOf(1001, 3)));
  ASSERT_TRUE((*store)->submitRun(runOf(1002, 1)));
  auto claimed = (*store)->claimNextAttempt([](const AttemptRecord&) { return true; });
  ASSERT_TRUE(claimed && claimed->first);
  ASSERT_TRUE((*store)->recordGpuUsage(claimed->first->id, 1001, 1800));
  ASSERT_TRUE((*store)->recordGpuUsage(claimed->first->id, 1001, 900.5));
  auto usage = (*store)->tenantUsage(isoTimeUtc(24 * 3600));
  ASSERT_TRUE(usage) << usage.error().message;
  EXPECT_EQ((*usage)[1001].queued, 2);
  EXPECT_EQ((*usage)[1001].running, 1);
  EXPECT_NEAR((*usage)[1001].gpu_seconds, 2700.5, 0.01);
  EXPECT_GE((*usage)[1001].attempt_seconds, 0);
  EXPECT_EQ((*usage)[1002].queued, 1);
  EXPECT_EQ((*usage)[1002].gpu_seconds, 0);
  // GPU time outside the window does not count.
  auto later = (*store)->tenantUsage(isoTimeUtc(-60));
  ASSERT_TRUE(later);
  EXPECT_EQ((*later)[1001].gpu_seconds, 0);
}

std::vector<QueuedAttempt> queue(const std::vector<std::pair<std::int64_t, bool>>& owners) {
  std::vector<QueuedAttempt> out;
  std::int64_t id = 1;
  for (const auto& [uid, gpu] : owners) {
    QueuedAttempt q;
    q.attempt.id = id++;
    q.attempt.needsGpu = gpu;
    q.submitterUid = uid;
    out.push_back(q);
  }
  return out;
}

TEST(FairShare, AFloodingTenantDoesNotGoBeforeAnotherTenantsFirstAttempt) {
  // Tenant 1 queued 1000 attempts before tenant 2 queued one; tenant 1 has one running.
  std::vector<std::pair<std::int64_t, bool>> owners(1000, {1, false});
  owners.push_back({2, false});
  FairShareInputs in;
  in.usage[1].running = 1;
  auto pick = chooseFairShare(queue(owners), in);
  ASSERT_TRUE(pick);
  EXPECT_EQ(*pick, 1000u);  // tenant 2's
  // With nothing running, the one that used less time lately goes first.
  in.usage[1].running = 0;
  in.usage[1].attempt_seconds = 10;
  in.usage[2].attempt_seconds = 50;
  EXPECT_EQ(chooseFairShare(queue(owners), in), 0u);
  // Equal: the oldest attempt.
  in.usage.clear();
  EXPECT_EQ(chooseFairShare(queue({{2, false}, {1, false}}), in), 0u);
  EXPECT_EQ(chooseFairShare({}, in), std::nullopt);
}

TEST(FairShare, LimitsAndStartabilityPassOverATenantsAttempts) {
  FairShareInputs in;
  TenantPolicy policy;
  policy.tenants[1].max_concurrent_attempts = 1;
  policy.tenants[1].gpu_hours_per_day = 0;
  policy.tenants[2].gpu_hours_per_day = 1;
  in.limits = [&](std::int64_t uid) { return policy.limitsFor(static_cast<uid_t>(uid)); };
  in.usage[1].running = 1;        // at its concurrency limit
  in.usage[2].gpu_seconds = 3600;  // its GPU hours are spent
  const auto q = queue({{1, false}, {2, true}, {2, false}, {3, true}});
  EXPECT_EQ(chooseFairShare(q, in), 2u);  // tenant 2's CPU attempt: its GPU one waits
  in.usage[2].running = 1;
  EXPECT_EQ(chooseFairShare(q, in), 3u);  // tenant 3 runs nothing
  in.startable = [](const AttemptRecord& a) { return !a.needsGpu; };  // no GPU free
  EXPECT_EQ(chooseFairShare(q, in), 2u);
  in.usage[1].running = 0;
  EXPECT_EQ(chooseFairShare(q, in), 0u);
}

TEST(AttemptUids, RangesParseAndBadOnesAreRefused) {
  auto r = parseUidRange("700000001-700001000");
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->first, 700000001u);
  EXPECT_EQ(r->count, 1000u);
  EXPECT_EQ(r->text(), "700000001-700001000");
  EXPECT_TRUE(r->contains(700001000));
  EXPECT_FALSE(r->contains(700001001));
  for (const char* bad : {"", "5", "9-3", "0-4", "1-4294967295", "a-b", "1-", "-5", "12345678901-12345678902"})
    EXPECT_FALSE(parseUidRange(bad)) << bad;
}

TEST(AttemptUids, APoolHandsOutEachUidOnceAndTakesItBack) {
  UidPool pool(UidRange{500, 3});
  auto a = pool.acquire(), b = pool.acquire(), c = pool.acquire();
  ASSERT_TRUE(a && b && c);
  EXPECT_EQ(std::set<uid_t>({*a, *b, *c}), std::set<uid_t>({500, 501, 502}));
  EXPECT_FALSE(pool.acquire());
  {
    UidLease lease(pool, *b);
  }  // released
  EXPECT_EQ(pool.acquire(), b);
  EXPECT_EQ(pool.inUse(), 3u);
}

// A restarted daemon keeps the uid a still-running attempt (a Slurm job) uses: no new attempt
// gets it while that one runs.
TEST(AttemptUids, ATakenUidIsNotHandedOutAgainUntilReleased) {
  UidPool pool(UidRange{500, 2});
  EXPECT_TRUE(pool.take(501));
  EXPECT_FALSE(pool.take(501)) << "taken twice";
  EXPECT_FALSE(pool.take(502)) << "outside the range";
  EXPECT_EQ(pool.acquire(), 500u);
  EXPECT_FALSE(pool.acquire()) << "the taken uid was handed out";
  pool.release(501);
  EXPECT_EQ(pool.acquire(), 501u);
}

TEST(AttemptUids, SubordinateIdRangesThatMeetTheSandboxUidsAreFound) {
  test::TempDir dir;
  std::ofstream(dir / "subuid") << "alice:100000:65536\nbob:700000500:10\n# junk line\ncarol:5:x\n";
  // The range meets bob's; the trusted uid falls in alice's.
  auto both = subordinateOverlaps(dir / "subuid", UidRange{700000001, 1000}, 101000);
  ASSERT_EQ(both.size(), 2u);
  EXPECT_EQ(both[0], "alice:100000:65536");
  EXPECT_EQ(both[1], "bob:700000500:10");
  EXPECT_TRUE(subordinateOverlaps(dir / "subuid", UidRange{700000001, 499}, 700000000).empty());
  EXPECT_TRUE(subordinateOverlaps(dir / "absent", UidRange{1, 10}, 1).empty());
}

}  // namespace
}  // namespace akad
