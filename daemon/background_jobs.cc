#include "daemon/background_jobs.h"

#include <condition_variable>
#include <mutex>
#include <set>

#include "daemon/pipeline_methods.h"

namespace akad {
namespace {

// The background jobs in flight, so shut-down can stop them before the context goes away.
struct BackgroundJobs {
  std::mutex mutex;
  std::condition_variable idle;
  int running = 0;
  bool stopping = false;
  std::set<SandboxCanceller*> cancellers;
};
BackgroundJobs& jobs() {
  static BackgroundJobs j;
  return j;
}

}  // namespace

BackgroundJob::BackgroundJob() {
  std::lock_guard lock(jobs().mutex);
  accepted_ = !jobs().stopping;
  if (accepted_) {
    ++jobs().running;
    jobs().cancellers.insert(&canceller_);
  }
}

BackgroundJob::~BackgroundJob() {
  if (!accepted_) return;
  std::lock_guard lock(jobs().mutex);
  jobs().cancellers.erase(&canceller_);
  --jobs().running;
  jobs().idle.notify_all();
}

void stopPipelineJobs() {
  std::unique_lock lock(jobs().mutex);
  jobs().stopping = true;
  for (SandboxCanceller* c : jobs().cancellers) c->cancel();
  jobs().idle.wait(lock, [] { return jobs().running == 0; });
}

}  // namespace akad
