// TimingSlots: no more performance gates at once than the host has slots for; a waiter goes on
// when one is given back, and gives up when cancelled.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "daemon/pipeline/timing_slots.h"

namespace akad {
namespace {

using namespace std::chrono_literals;

TEST(TimingSlots, AWaiterGoesOnOnlyWhenASlotIsGivenBack) {
  TimingSlots slots(1);
  std::atomic<int> waits{0};
  auto first = slots.acquire({}, [&] { ++waits; });
  ASSERT_TRUE(first);
  EXPECT_EQ(waits, 0) << "a free slot is no wait";
  EXPECT_EQ(slots.held(), 1);
  std::atomic<bool> got{false};
  std::thread waiter([&] {
    auto second = slots.acquire({}, [&] { ++waits; });
    got = second != nullptr;
    EXPECT_EQ(slots.held(), 1) << "the second holds the slot the first gave back";
  });
  std::this_thread::sleep_for(300ms);
  EXPECT_FALSE(got) << "the second slot was given while the only one was held";
  first.reset();
  waiter.join();
  EXPECT_TRUE(got);
  EXPECT_EQ(waits, 1) << "the waiter said it waited, once";
  EXPECT_EQ(slots.held(), 0);
}

TEST(TimingSlots, TwoSlotsHoldTwoAtOnceAndACancelledWaiterGivesUp) {
  TimingSlots slots(2);
  auto a = slots.acquire({}), b = slots.acquire({});
  ASSERT_TRUE(a && b);
  std::atomic<bool> cancel{false};
  std::thread waiter([&] { EXPECT_EQ(slots.acquire([&] { return cancel.load(); }), nullptr); });
  std::this_thread::sleep_for(250ms);
  cancel = true;
  waiter.join();  // within one 200 ms poll
  EXPECT_EQ(slots.held(), 2);
  a.reset();
  EXPECT_TRUE(slots.acquire({})) << "a slot given back is free again";
}

TEST(TimingSlots, AHostGetsHalfItsCpusAndAtLeastOne) {
  const int n = TimingSlots::forThisHost();
  EXPECT_GE(n, 1);
  EXPECT_LE(n, std::max(1u, std::thread::hardware_concurrency() / 2));
  EXPECT_EQ(TimingSlots(0).capacity(), 1);
}

}  // namespace
}  // namespace akad
