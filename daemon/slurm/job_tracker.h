#pragma once
// Follows every Slurm job the front end has in flight with one squeue call per poll interval,
// however many there are. Asking scontrol once a second per job would put 64 requests a second
// on slurmctld with 64 attempts running; one squeue with a job list is one request.

#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "common/result.h"

namespace akad::slurm {

// A job's state as Slurm reports it: "PENDING", "RUNNING", "COMPLETED", ...; "" when Slurm no
// longer knows the job (purged after MinJobAge, or never known).
struct JobState {
  std::string state;
  std::string node;
  std::string reason;
  int restarts = 0;
};

// Whether a job in this state will not run (again) by itself.
bool terminalState(const std::string& state);

// squeue's answer for `jobs`, parsed (exposed for tests). Jobs squeue leaves out are absent.
Result<std::map<std::string, JobState>> parseQueue(const std::string& squeueOutput);

// The command that asks for `jobs`: every state, so finished jobs are seen until Slurm purges them.
std::vector<std::string> squeueCommand(const std::vector<std::string>& jobs);

class JobTracker {
 public:
  explicit JobTracker(double intervalS);
  ~JobTracker();
  JobTracker(const JobTracker&) = delete;
  JobTracker& operator=(const JobTracker&) = delete;

  void follow(const std::string& job);
  void forget(const std::string& job);

  // One poll's view of a job: `state` unset when that poll failed (`error` says why).
  struct Sample {
    std::uint64_t poll = 0;
    std::optional<JobState> state;
    std::string error;
  };
  // Waits for a poll after `seenPoll` that included `job` (at most a few intervals) and returns
  // the job's state in it.
  Sample next(const std::string& job, std::uint64_t seenPoll);
  std::uint64_t polls() const;

 private:
  void loop();

  const double interval_s_;
  mutable std::mutex mutex_;
  std::condition_variable polled_, wake_;
  std::set<std::string> jobs_;
  std::uint64_t poll_ = 0;
  std::map<std::string, JobState> last_;
  std::set<std::string> asked_;  // the jobs the last poll asked about
  std::string lastError_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace akad::slurm
