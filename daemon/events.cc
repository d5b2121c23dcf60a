#include "daemon/events.h"

#include <vector>

namespace akad {

EventBus::Subscription::~Subscription() {
  if (auto bus = bus_.lock()) (*bus)->unsubscribe(id_);
}

std::unique_ptr<EventBus::Subscription> EventBus::subscribe(const std::string& runId, Callback callback) {
  std::lock_guard lock(mutex_);
  std::uint64_t id = nextId_++;
  subscribers_[id] = Subscriber{runId, std::make_shared<Callback>(std::move(callback))};
  return std::make_unique<Subscription>(self_, id);
}

void EventBus::unsubscribe(std::uint64_t id) {
  std::lock_guard lock(mutex_);
  subscribers_.erase(id);
}

void EventBus::publish(const EventRecord& event) {
  std::vector<std::shared_ptr<Callback>> targets;
  {
    std::lock_guard lock(mutex_);
    for (const auto& [id, sub] : subscribers_) {
      if (sub.runId.empty() || sub.runId == event.runId) targets.push_back(sub.callback);
    }
  }
  for (const auto& cb : targets) (*cb)(event);
}

std::size_t EventBus::subscriberCount() const {
  std::lock_guard lock(mutex_);
  return subscribers_.size();
}

}  // namespace akad
