#pragma once
// How many performance gates this host times at once (docs/scoring.md, "Timed phases at once").
// A timed call's driver and worker both spin on their shared page, so every performance gate
// needs two CPUs of its own: two gates timed at once on a two-CPU host time each other's
// scheduling (empty calls of 0.9 ms where the machine is quiet at 0.1 ms, and every sample
// under the resolution). Each performance gate holds one slot for all its rounds; the rest of
// the scoring (builds, correctness, the held-out choice) runs beside any number of them.

#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>

namespace akad {

class TimingSlots {
 public:
  explicit TimingSlots(int capacity) : capacity_(capacity < 1 ? 1 : capacity) {}
  // The slots a host gets by default: half its CPUs, at least one.
  static int forThisHost();
  // A slot, held while the returned handle lives; waits while all are held, calling `onWait`
  // once first when it has to. `cancelled` is asked every 200 ms: true gives up and returns null.
  std::shared_ptr<void> acquire(const std::function<bool()>& cancelled, const std::function<void()>& onWait = {});
  int capacity() const { return capacity_; }
  int held() const;

 private:
  void release();

  const int capacity_;
  mutable std::mutex mutex_;
  std::condition_variable freed_;
  int held_ = 0;
};

}  // namespace akad
