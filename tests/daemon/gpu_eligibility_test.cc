// The one GPU-eligibility rule (daemon/gpu_eligibility.h) and the places that apply it, on
// GPU records made up for the test (this machine has no GPU). The old copies disagreed:
// run.submit asked only "does this daemon have any GPU", the claim (LocalExecutor::canStart)
// "is any GPU free", and only the lease looked at vendor and model.
#include <gtest/gtest.h>

#include "daemon/gpu_eligibility.h"
#include "daemon/gpu_leases.h"
#include "tests/daemon/fake_gpu.h"
#include "daemon/local_executor.h"

namespace akad {
namespace {

using test::fakeGpu;

const gpu::GpuDevice kH200 = fakeGpu("nvidia0", "nvidia", "NVIDIA H200");
const gpu::GpuDevice kMi300 = fakeGpu("amd0", "amd", "AMD Instinct MI300X");

TEST(GpuEligibility, TheImagesVendorMustBeTheGpusExactly) {
  EXPECT_TRUE(gpuServes(kH200, {"nvidia", ""}));
  EXPECT_FALSE(gpuServes(kMi300, {"nvidia", ""}));  // the cuda-hip toolchain cannot drive it
  EXPECT_TRUE(gpuServes(kMi300, {"amd", ""}));
  EXPECT_FALSE(gpuServes(kH200, {"NVIDIA", ""}));   // vendors are image.yaml's lower-case words
  EXPECT_FALSE(gpuServes(kH200, {"intel", ""}));
}

TEST(GpuEligibility, NoVendorOrNoneTakesAnyVendor) {
  for (const char* any : {"", "none"}) {
    EXPECT_TRUE(gpuServes(kH200, {any, ""})) << any;
    EXPECT_TRUE(gpuServes(kMi300, {any, ""})) << any;
  }
}

TEST(GpuEligibility, TheModelIsACaseInsensitivePartOfTheModelName) {
  EXPECT_TRUE(gpuServes(kH200, {"", "h200"}));
  EXPECT_TRUE(gpuServes(kH200, {"", "NVIDIA H2"}));
  EXPECT_TRUE(gpuServes(kMi300, {"", "mi300"}));
  EXPECT_FALSE(gpuServes(kH200, {"", "a100"}));
  EXPECT_FALSE(gpuServes(kH200, {"", "h200 "}));
  // Both must hold: an AMD request of an NVIDIA model serves nothing.
  EXPECT_FALSE(gpuServes(kMi300, {"amd", "h200"}));
  EXPECT_FALSE(gpuServes(kH200, {"amd", "h200"}));
}

TEST(GpuEligibility, TheRequestComesFromTheImageVendorAndTheRunsOption) {
  const GpuRequest r = gpuRequestOf("nvidia", {{"gpu_model", "H200"}, {"agent_time_limit_s", 5}});
  EXPECT_EQ(r.vendor, "nvidia");
  EXPECT_EQ(r.model, "H200");
  const GpuRequest any = gpuRequestOf("none", nlohmann::json::object());
  EXPECT_EQ(any.vendor, "");
  EXPECT_EQ(any.model, "");
  EXPECT_EQ(gpuRequestOf("amd", nullptr).model, "");
  EXPECT_EQ(r.describe(), "a GPU by nvidia of model 'H200'");
  EXPECT_EQ(any.describe(), "a GPU");
  // gpu_share makes the run's attempts one share group, the same for all of them; without a
  // run (tasks validate) or the option, a GPU is not shared.
  const GpuRequest shared = gpuRequestOf("nvidia", {{"gpu_share", 6}}, "r-0000abcd");
  EXPECT_EQ(shared.share_slots, 6);
  EXPECT_EQ(shared.share_group, "run r-0000abcd");
  EXPECT_EQ(gpuRequestOf("nvidia", {{"gpu_share", 6}}, "r-0000abcd").share_group, shared.share_group);
  EXPECT_EQ(gpuRequestOf("nvidia", {{"gpu_share", 6}}).share_slots, 1);
  EXPECT_EQ(gpuRequestOf("nvidia", nlohmann::json::object(), "r-0000abcd").share_slots, 1);
}

// The claim used to say yes whenever any GPU was free: a worker then took an attempt for the
// H200 while only the MI300X was free, and sat in the lease waiting for its own.
// The claim follows the run option gpu_share too: while a run's attempt holds the one GPU, the
// same run's next attempt may start on it, another tenant's run sharing as well may not.
TEST(GpuEligibility, TheClaimLetsOnlyTheSameRunJoinAGpuItShares) {
  GpuLeases leases({kH200});
  snapshot::SnapshotStore unused("/nonexistent/akad-test-snapshots");  // canStart never stores
  const nlohmann::json sharing = {{"gpu_share", 2}};
  LocalExecutor local(AttemptSetup{}, "/nonexistent", unused, leases, [&](const AttemptRecord& a) {
    return std::optional<GpuRequest>(gpuRequestOf("nvidia", sharing, a.runId));
  });
  AttemptRecord mine, theirs;
  mine.needsGpu = theirs.needsGpu = true;
  mine.runId = "r-00000001";
  theirs.runId = "r-00000002";
  GpuLease first(leases, leases.acquire("attempt 1", gpuRequestOf("nvidia", sharing, mine.runId), nullptr), "attempt 1");
  ASSERT_TRUE(first.gpu());
  EXPECT_TRUE(local.canStart(mine));
  EXPECT_FALSE(local.canStart(theirs));
  GpuLease second(leases, leases.acquire("attempt 2", gpuRequestOf("nvidia", sharing, mine.runId), nullptr), "attempt 2");
  ASSERT_TRUE(second.gpu());
  EXPECT_FALSE(local.canStart(mine));  // its share of 2 is full
  EXPECT_FALSE(local.canStart(theirs));
}

TEST(GpuEligibility, TheClaimAsksForAFreeGpuTheAttemptMayUse) {
  GpuLeases leases({kH200, kMi300});
  snapshot::SnapshotStore unused("/nonexistent/akad-test-snapshots");  // canStart never stores
  GpuRequest asked{"nvidia", "h200"};
  LocalExecutor local(AttemptSetup{}, "/nonexistent", unused, leases,
                      [&](const AttemptRecord&) { return std::optional<GpuRequest>(asked); });
  AttemptRecord gpuTask;
  gpuTask.needsGpu = true;
  AttemptRecord cpuTask;
  EXPECT_TRUE(local.canStart(gpuTask));
  GpuLease h200(leases, leases.acquire("someone else", GpuRequest{"nvidia", ""}, nullptr), "someone else");
  ASSERT_TRUE(h200.gpu());
  EXPECT_TRUE(leases.anyFree(GpuRequest{}));  // the MI300X: the old claim's "yes"
  EXPECT_FALSE(local.canStart(gpuTask));
  EXPECT_TRUE(local.canStart(cpuTask));
  asked = GpuRequest{"amd", ""};
  EXPECT_TRUE(local.canStart(gpuTask));
  asked = GpuRequest{"", "mi300"};
  EXPECT_TRUE(local.canStart(gpuTask));
}

TEST(GpuEligibility, AnAttemptWhoseRequestCannotBeToldStartsOnAnyFreeGpu) {
  GpuLeases leases({kMi300});
  snapshot::SnapshotStore unused("/nonexistent/akad-test-snapshots");  // canStart never stores
  LocalExecutor local(AttemptSetup{}, "/nonexistent", unused, leases,
                      [](const AttemptRecord&) { return std::optional<GpuRequest>(); });
  AttemptRecord gpuTask;
  gpuTask.needsGpu = true;
  EXPECT_TRUE(local.canStart(gpuTask));  // its lease then names what is wrong
  GpuLease held(leases, leases.acquire("x", GpuRequest{}, nullptr), "x");
  EXPECT_FALSE(local.canStart(gpuTask));
}

}  // namespace
}  // namespace akad
