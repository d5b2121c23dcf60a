#include "daemon/slurm/job_tracker.h"

#include <chrono>

#include "common/log.h"
#include "daemon/slurm/shared_area.h"

namespace akad::slurm {

namespace {

std::vector<std::string_view> splitOn(std::string_view s, char sep) {
  std::vector<std::string_view> parts;
  for (;;) {
    const size_t at = s.find(sep);
    parts.push_back(s.substr(0, at));
    if (at == std::string_view::npos) return parts;
    s.remove_prefix(at + 1);
  }
}

}  // namespace

bool terminalState(const std::string& state) {
  static const std::set<std::string> done = {"COMPLETED", "FAILED",    "CANCELLED", "TIMEOUT",
                                             "OUT_OF_MEMORY", "BOOT_FAIL", "DEADLINE", "PREEMPTED",
                                             "SPECIAL_EXIT", "NODE_FAIL", ""};
  // NODE_FAIL is terminal only for a job that is not requeued; ours are (--requeue), and Slurm
  // shows them PENDING/REQUEUED again, so a NODE_FAIL that stays is the end.
  return done.count(state) > 0;
}

std::vector<std::string> squeueCommand(const std::vector<std::string>& jobs) {
  std::string list;
  for (const auto& j : jobs) list += (list.empty() ? "" : ",") + j;
  return {"squeue", "--noheader", "--states=all", "--jobs=" + list,
          "--Format=JobID:|,State:|,NodeList:|,Reason:|,RestartCnt:|"};
}

Result<std::map<std::string, JobState>> parseQueue(const std::string& text) {
  std::map<std::string, JobState> jobs;
  for (const auto& raw : splitOn(text, '\n')) {
    std::string line(raw);
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.pop_back();
    if (line.empty()) continue;
    auto f = splitOn(line, '|');
    if (f.size() < 5) return Error{"squeue printed a line of " + std::to_string(f.size()) + " fields: " + line.substr(0, 200)};
    auto trim = [](std::string_view v) {
      while (!v.empty() && v.front() == ' ') v.remove_prefix(1);
      while (!v.empty() && v.back() == ' ') v.remove_suffix(1);
      return std::string(v);
    };
    const std::string id = trim(f[0]);
    if (id.empty() || id.find_first_not_of("0123456789") != std::string::npos)
      return Error{"squeue printed a job id '" + id.substr(0, 40) + "'"};
    JobState s;
    s.state = trim(f[1]);
    s.node = trim(f[2]);
    if (s.node == "(null)") s.node.clear();
    s.reason = trim(f[3]);
    const std::string restarts = trim(f[4]);
    if (restarts.empty() || restarts.size() > 6 || restarts.find_first_not_of("0123456789") != std::string::npos)
      return Error{"squeue printed a restart count '" + restarts.substr(0, 20) + "' for job " + id};
    s.restarts = std::stoi(restarts);
    jobs[id] = s;
  }
  return jobs;
}

JobTracker::JobTracker(double intervalS) : interval_s_(intervalS), thread_([this] { loop(); }) {}

JobTracker::~JobTracker() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  polled_.notify_all();
  thread_.join();
}

void JobTracker::follow(const std::string& job) {
  {
    std::lock_guard lock(mutex_);
    jobs_.insert(job);
  }
  wake_.notify_all();  // a new job is polled at once, not after the rest of the interval
}

void JobTracker::forget(const std::string& job) {
  std::lock_guard lock(mutex_);
  jobs_.erase(job);
  last_.erase(job);
}

std::uint64_t JobTracker::polls() const {
  std::lock_guard lock(mutex_);
  return poll_;
}

JobTracker::Sample JobTracker::next(const std::string& job, std::uint64_t seenPoll) {
  std::unique_lock lock(mutex_);
  const auto limit = std::chrono::duration<double>(interval_s_ * 4 + 5);
  // A poll that began before the job was followed says nothing about it.
  polled_.wait_for(lock, limit, [&] { return stopping_ || (poll_ > seenPoll && asked_.count(job)); });
  Sample s;
  s.poll = poll_;
  if (poll_ <= seenPoll || !asked_.count(job)) {
    s.error = stopping_ ? "the tracker stopped" : "no answer from squeue yet";
    return s;
  }
  if (!lastError_.empty()) {
    s.error = lastError_;
    return s;
  }
  auto it = last_.find(job);
  s.state = it == last_.end() ? JobState{} : it->second;
  return s;
}

void JobTracker::loop() {
  std::unique_lock lock(mutex_);
  while (!stopping_) {
    if (jobs_.empty()) {
      wake_.wait(lock, [&] { return stopping_ || !jobs_.empty(); });
      continue;
    }
    const std::vector<std::string> jobs(jobs_.begin(), jobs_.end());
    lock.unlock();
    std::map<std::string, JobState> seen;
    std::string error;
    auto r = runCommand(squeueCommand(jobs));
    if (!r) {
      error = r.error().message;
    } else if (r->exit_code != 0) {
      // Every job on the list unknown: squeue says so and fails; that is an answer, not an error.
      if (r->err.find("Invalid job id") == std::string::npos) error = "squeue failed: " + r->err.substr(0, 300);
    } else if (auto parsed = parseQueue(r->out); !parsed) {
      error = parsed.error().message;
    } else {
      seen = std::move(*parsed);
    }
    if (!error.empty()) log::warn("following Slurm jobs: ", error);
    lock.lock();
    last_ = std::move(seen);
    asked_ = std::set<std::string>(jobs.begin(), jobs.end());
    lastError_ = error;
    ++poll_;
    polled_.notify_all();
    const std::uint64_t before = jobs_.size();
    wake_.wait_for(lock, std::chrono::duration<double>(interval_s_),
                   [&] { return stopping_ || jobs_.size() > before; });
  }
}

}  // namespace akad::slurm
