// Exclusive GPU leases, on GPU records made up for the test (this machine has no GPU).
#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "daemon/gpu_leases.h"
#include "tests/daemon/fake_gpu.h"

namespace akad {
namespace {

using test::fakeGpu;

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
  leases.release(a->id);
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
  std::atomic<bool> cancelled{false};
  std::thread canceller([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    cancelled = true;
  });
  auto none = leases.acquire("waiter", GpuRequest{}, [&] { return cancelled.load(); });
  canceller.join();
  EXPECT_FALSE(none.has_value());
}

TEST(GpuLeasesWithFakeGpus, ALeaseIsGivenBackWhenItsOwnerEnds) {
  GpuLeases leases({fakeGpu("nvidia0", "nvidia", "H200")});
  {
    GpuLease lease(leases, leases.acquire("stage", GpuRequest{}, nullptr));
    EXPECT_FALSE(leases.anyFree(GpuRequest{}));
  }
  EXPECT_TRUE(leases.anyFree(GpuRequest{}));
}

}  // namespace
}  // namespace akad
