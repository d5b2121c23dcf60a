#pragma once
// The benchmark's long jobs (tasks.validate, snapshot.export) run on threads of their own;
// each holds a BackgroundJob while it runs, so that shut-down (stopPipelineJobs,
// pipeline_methods.h) can cancel their sandboxes and wait for them before what they use is
// destroyed.

#include "daemon/pipeline/sandbox_run.h"

namespace akad {

// Holds a job's place for as long as it runs; not accepted if the daemon is stopping.
class BackgroundJob {
 public:
  BackgroundJob();
  ~BackgroundJob();
  BackgroundJob(const BackgroundJob&) = delete;
  BackgroundJob& operator=(const BackgroundJob&) = delete;

  bool accepted() const { return accepted_; }
  bool stopping() const { return canceller_.cancelled(); }
  SandboxCanceller* canceller() { return &canceller_; }

 private:
  bool accepted_ = false;
  SandboxCanceller canceller_;
};

}  // namespace akad
