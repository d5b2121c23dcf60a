#pragma once
// In-memory fan-out of run events to watchers (run.watch). The store is the record: every
// event is appended to the `events` table inside the transaction that caused it, and published
// here only after COMMIT. A watcher replays the table, then follows the bus, dropping what it
// already saw by seq, so no event is lost or doubled between the two.
//
// Thread-safe. Callbacks run on the publisher's thread, outside the bus lock, and must not block.

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "daemon/store.h"

namespace akad {

class EventBus {
 public:
  using Callback = std::function<void(const EventRecord&)>;

  // Unsubscribes when destroyed.
  class Subscription {
   public:
    Subscription(std::weak_ptr<EventBus*> bus, std::uint64_t id) : bus_(std::move(bus)), id_(id) {}
    Subscription(const Subscription&) = delete;
    Subscription& operator=(const Subscription&) = delete;
    ~Subscription();

   private:
    std::weak_ptr<EventBus*> bus_;
    std::uint64_t id_;
  };

  EventBus() : self_(std::make_shared<EventBus*>(this)) {}
  EventBus(const EventBus&) = delete;
  EventBus& operator=(const EventBus&) = delete;

  // Events of one run (runId non-empty) or of every run (runId empty).
  std::unique_ptr<Subscription> subscribe(const std::string& runId, Callback callback);
  void publish(const EventRecord& event);
  std::size_t subscriberCount() const;

 private:
  struct Subscriber {
    std::string runId;
    std::shared_ptr<Callback> callback;
  };
  void unsubscribe(std::uint64_t id);

  mutable std::mutex mutex_;
  std::map<std::uint64_t, Subscriber> subscribers_;
  std::uint64_t nextId_ = 1;
  // Subscriptions outliving the bus (at shutdown) find it gone instead of dangling.
  std::shared_ptr<EventBus*> self_;
};

}  // namespace akad
