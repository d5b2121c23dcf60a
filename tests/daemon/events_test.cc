// Event fan-out (daemon/events.h).
#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "daemon/events.h"

namespace akad {
namespace {

EventRecord eventOf(const std::string& run, std::int64_t seq) {
  return EventRecord{seq, run, std::nullopt, "t", "run.state", {{"state", "queued"}}};
}

TEST(EventBus, DeliversOnlyTheSubscribedRunAndStopsWhenTheSubscriptionDies) {
  EventBus bus;
  std::vector<std::int64_t> a, all;
  auto subA = bus.subscribe("r-a", [&](const EventRecord& e) { a.push_back(e.seq); });
  {
    auto subAll = bus.subscribe("", [&](const EventRecord& e) { all.push_back(e.seq); });
    bus.publish(eventOf("r-a", 1));
    bus.publish(eventOf("r-b", 2));
    EXPECT_EQ(bus.subscriberCount(), 2u);
  }
  bus.publish(eventOf("r-a", 3));
  EXPECT_EQ(a, (std::vector<std::int64_t>{1, 3}));
  EXPECT_EQ(all, (std::vector<std::int64_t>{1, 2}));
  subA.reset();
  EXPECT_EQ(bus.subscriberCount(), 0u);
}

TEST(EventBus, ConcurrentPublishAndSubscribeDeliverEverything) {
  EventBus bus;
  std::atomic<int> seen{0};
  auto sub = bus.subscribe("r", [&](const EventRecord&) { ++seen; });
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 1000; ++i) {
        bus.publish(eventOf("r", i));
        auto transient = bus.subscribe("other", [](const EventRecord&) {});
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(seen.load(), 4000);
}

}  // namespace
}  // namespace akad
