#include "daemon/pipeline/timing_slots.h"

#include <chrono>
#include <thread>

namespace akad {

int TimingSlots::forThisHost() {
  const unsigned cpus = std::thread::hardware_concurrency();
  return cpus >= 4 ? static_cast<int>(cpus / 2) : 1;
}

std::shared_ptr<void> TimingSlots::acquire(const std::function<bool()>& cancelled, const std::function<void()>& onWait) {
  std::unique_lock lock(mutex_);
  if (held_ >= capacity_ && onWait) {
    lock.unlock();  // the callback records a stage: no lock held while it does
    onWait();
    lock.lock();
  }
  while (held_ >= capacity_) {
    if (cancelled && cancelled()) return nullptr;
    freed_.wait_for(lock, std::chrono::milliseconds(200));
  }
  ++held_;
  // A handle that is not null: the deleter gives the slot back, the pointer itself is unused.
  return std::shared_ptr<void>(static_cast<void*>(this), [](void* p) { static_cast<TimingSlots*>(p)->release(); });
}

int TimingSlots::held() const {
  std::lock_guard lock(mutex_);
  return held_;
}

void TimingSlots::release() {
  {
    std::lock_guard lock(mutex_);
    --held_;
  }
  freed_.notify_one();
}

}  // namespace akad
