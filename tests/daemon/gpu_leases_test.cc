// Exclusive GPU leases, on GPU records made up for the test (this machine has no GPU).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <thread>

#include "daemon/gpu_leases.h"
#include "tests/daemon/fake_gpu.h"

namespace akad {
namespace {

using test::fakeGpu;

// A waiter's `cancelled` that turns true once `ms` have passed (acquire re-checks it every 200 ms).
std::function<bool()> cancelledAfter(int ms) {
  return [until = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms)] {
    return std::chrono::steady_clock::now() >= until;
  };
}

TEST(GpuLeasesWithFakeGpus, EachGpuGoesToOneHolderAtATime) {
  GpuLeases leases({fakeGpu("nvidia0", "nvidia", "NVIDIA H200"), fakeGpu("nvidia1", "nvidia", "NVIDIA H200")});
  auto a = leases.acquire("attempt 1", GpuRequest{}, nullptr);
  auto b = leases.acquire("attempt 2", GpuRequest{}, nullptr);
  ASSERT_TRUE(a && b);
  EXPECT_NE(a->id, b->id);
  EXPECT_FALSE(leases.anyFree(GpuRequest{}));
  EXPECT_EQ(leases.describe()[0]["lease"], "attempt 1");

  // A third holder waits until one is given back.
  std::atomic<bool> got{false};
  std::thread waiter([&] {
    auto c = leases.acquire("attempt 3", GpuRequest{}, nullptr);
    got = c.has_value() && c->id == a->id;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_FALSE(got.load());
  leases.release(a->id, "attempt 1");
  waiter.join();
  EXPECT_TRUE(got.load());
}

TEST(GpuLeasesWithFakeGpus, ModelAndVendorChooseTheGpu) {
  GpuLeases leases({fakeGpu("nvidia0", "nvidia", "NVIDIA H200"), fakeGpu("amd0", "amd", "AMD Instinct MI300X")});
  EXPECT_TRUE(leases.exists(GpuRequest{"", "mi300"}));
  EXPECT_FALSE(leases.exists(GpuRequest{"", "a100"}));
  EXPECT_FALSE(leases.exists(GpuRequest{"intel", ""}));
  auto g = leases.acquire("x", GpuRequest{"amd", ""}, nullptr);
  ASSERT_TRUE(g);
  EXPECT_EQ(g->id, "amd0");
  auto h = leases.acquire("y", GpuRequest{"", "h200"}, nullptr);
  ASSERT_TRUE(h);
  EXPECT_EQ(h->id, "nvidia0");
}

TEST(GpuLeasesWithFakeGpus, AWaiterGivesUpWhenCancelled) {
  GpuLeases leases({fakeGpu("nvidia0", "nvidia", "H200")});
  auto held = leases.acquire("holder", GpuRequest{}, nullptr);
  ASSERT_TRUE(held);
  auto none = leases.acquire("waiter", GpuRequest{}, cancelledAfter(200));
  EXPECT_FALSE(none.has_value());
}

TEST(GpuLeasesWithFakeGpus, ALeaseIsGivenBackWhenItsOwnerEnds) {
  GpuLeases leases({fakeGpu("nvidia0", "nvidia", "H200")});
  {
    GpuLease lease(leases, leases.acquire("stage", GpuRequest{}, nullptr), "stage");
    EXPECT_FALSE(leases.anyFree(GpuRequest{}));
  }
  EXPECT_TRUE(leases.anyFree(GpuRequest{}));
}

GpuRequest shareOf(const std::string& run, int slots) {
  GpuRequest r;
  r.share_group = "run " + run;
  r.share_slots = slots;
  return r;
}

// The run option gpu_share: the run's own stages fill a GPU up to its share, and a free GPU
// is taken before a shared one.
TEST(GpuLeasesWithFakeGpus, ARunsStagesShareAGpuUpToTheRunsShare) {
  GpuLeases two({fakeGpu("nvidia0", "nvidia", "H200"), fakeGpu("nvidia1", "nvidia", "H200")});
  auto first = two.acquire("attempt 1", shareOf("r-1", 2), nullptr);
  auto second = two.acquire("attempt 2", shareOf("r-1", 2), nullptr);
  ASSERT_TRUE(first && second);
  EXPECT_NE(first->id, second->id);  // a free GPU first

  GpuLeases one({fakeGpu("nvidia0", "nvidia", "H200")});
  ASSERT_TRUE(one.acquire("attempt 1", shareOf("r-1", 2), nullptr));
  ASSERT_TRUE(one.acquire("attempt 2", shareOf("r-1", 2), nullptr));
  EXPECT_EQ(one.describe()[0]["lease"], "attempt 1, attempt 2");
  EXPECT_FALSE(one.anyFree(shareOf("r-1", 2)));  // the share is full
  std::atomic<bool> got{false};
  std::thread third([&] { got = one.acquire("attempt 3", shareOf("r-1", 2), nullptr).has_value(); });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_FALSE(got.load());
  one.release("nvidia0", "attempt 1");  // only that holder's lease goes
  third.join();
  EXPECT_TRUE(got.load());
  EXPECT_EQ(one.describe()[0]["lease"], "attempt 2, attempt 3");
}

// Another tenant's run asking to share, or an exclusive stage, never joins a GPU a run holds,
// however many slots that run left free: sharing is within one run only. Nor does a run that
// asks to share join a GPU an exclusive stage holds.
TEST(GpuLeasesWithFakeGpus, AnotherRunNeverJoinsAGpuARunHolds) {
  GpuLeases leases({fakeGpu("nvidia0", "nvidia", "H200")});
  GpuLease mine(leases, leases.acquire("attempt 1 of r-1", shareOf("r-1", 8), nullptr), "attempt 1 of r-1");
  ASSERT_TRUE(mine.gpu());
  EXPECT_TRUE(leases.anyFree(shareOf("r-1", 8)));
  EXPECT_FALSE(leases.anyFree(shareOf("r-2", 8)));
  EXPECT_FALSE(leases.anyFree(GpuRequest{}));
  EXPECT_FALSE(leases.acquire("attempt 1 of r-2", shareOf("r-2", 8), cancelledAfter(300)));
  EXPECT_EQ(leases.describe()[0]["lease"], "attempt 1 of r-1");

  GpuLeases exclusive({fakeGpu("nvidia0", "nvidia", "H200")});
  GpuLease alone(exclusive, exclusive.acquire("validate", GpuRequest{}, nullptr), "validate");
  EXPECT_FALSE(exclusive.anyFree(shareOf("r-1", 8)));
}

GpuRequest aloneOf(const std::string& run) {
  GpuRequest r = shareOf(run, 8);
  r.alone = true;
  return r;
}

// The re-score of an attempt whose shared GPU ran out of memory holds the GPU with no
// neighbour: it takes the GPU only when it is free, and nothing joins it once it holds it.
// Its run goes on sharing meanwhile: holding the run back until the GPU drained made the run
// wait for every such re-score in turn (on an H100, four of them held a run of 50 for most of
// 17 minutes). It waits at most for the run's last stage: only the run's own stages share its
// GPU, and they are finite.
TEST(GpuLeasesWithFakeGpus, AStageAloneWaitsForAFreeGpuWhileItsRunGoesOnAndNoneJoinsIt) {
  GpuLeases leases({fakeGpu("nvidia0", "nvidia", "H200")});
  ASSERT_TRUE(leases.acquire("attempt 1", shareOf("r-1", 8), nullptr));
  ASSERT_TRUE(leases.acquire("attempt 2", shareOf("r-1", 8), nullptr));
  EXPECT_FALSE(leases.anyFree(aloneOf("r-1")));
  std::atomic<bool> got{false};
  std::thread alone([&] { got = leases.acquire("attempt 3 (alone)", aloneOf("r-1"), nullptr).has_value(); });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_FALSE(got.load());
  // The run's other stages still join the GPU it shares.
  EXPECT_TRUE(leases.anyFree(shareOf("r-1", 8)));
  ASSERT_TRUE(leases.acquire("attempt 4", shareOf("r-1", 8), cancelledAfter(300)));
  leases.release("nvidia0", "attempt 1");
  leases.release("nvidia0", "attempt 2");
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_FALSE(got.load()) << "taken while a neighbour still held the GPU";
  leases.release("nvidia0", "attempt 4");
  alone.join();
  ASSERT_TRUE(got.load());
  EXPECT_EQ(leases.describe()[0]["lease"], "attempt 3 (alone)");
  EXPECT_FALSE(leases.anyFree(shareOf("r-1", 8))) << "a stage of its run could join it";
  EXPECT_FALSE(leases.acquire("attempt 5", shareOf("r-1", 8), cancelledAfter(300)));
  leases.release("nvidia0", "attempt 3 (alone)");
  EXPECT_TRUE(leases.anyFree(shareOf("r-1", 8)));

  // One waiting to be alone takes a free GPU of two at once; another run keeps its own.
  GpuLeases two({fakeGpu("nvidia0", "nvidia", "H200"), fakeGpu("nvidia1", "nvidia", "H200")});
  ASSERT_TRUE(two.acquire("attempt 1 of r-2", shareOf("r-2", 8), nullptr));
  auto g = two.acquire("attempt 2 of r-1 (alone)", aloneOf("r-1"), cancelledAfter(300));
  ASSERT_TRUE(g);
  EXPECT_EQ(g->id, "nvidia1");
  EXPECT_TRUE(two.anyFree(shareOf("r-2", 8)));
  EXPECT_FALSE(two.anyFree(shareOf("r-1", 8)));
}

}  // namespace
}  // namespace akad
