// The real akad on a temporary socket, state dir and cgroup parent of its own, driven with the
// real akactl, for the pipeline's end-to-end tests (pipeline_test.cc, attack_test.cc), and the
// checks that nothing of its sandboxes outlives them.
#pragma once

#include <gtest/gtest.h>

#include <dirent.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <ctime>
#include <fstream>
#include <regex>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "common/time_text.h"
#include "tests/daemon/harness.h"

namespace akad::test {

using nlohmann::json;
using namespace std::chrono_literals;

inline std::string readFile(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// A process's command line, its arguments joined by spaces ("" once it is gone).
inline std::string commandLineOf(const std::string& pid) {
  std::string cmd = readFile(fs::path("/proc") / pid / "cmdline");
  std::replace(cmd.begin(), cmd.end(), '\0', ' ');
  return cmd;
}

// Processes whose command line mentions `marker` (the test's state dir): akabox and whatever
// runs in its sandboxes carries the attempt's paths in its arguments.
inline std::vector<pid_t> processesMentioning(const std::string& marker) {
  std::vector<pid_t> out;
  DIR* d = ::opendir("/proc");
  if (d == nullptr) return out;
  while (dirent* e = ::readdir(d)) {
    char* end = nullptr;
    long pid = std::strtol(e->d_name, &end, 10);
    if (*end != '\0' || pid <= 0 || pid == ::getpid()) continue;
    const std::string cmd = commandLineOf(e->d_name);
    if (cmd.find(marker) != std::string::npos && cmd.find("akad ") == std::string::npos &&
        cmd.find("/akad --socket") == std::string::npos)
      out.push_back(static_cast<pid_t>(pid));
  }
  ::closedir(d);
  return out;
}

// processesMentioning(marker) after waiting up to 5 s for them to go.
inline std::vector<pid_t> processesLeftMentioning(const std::string& marker) {
  for (int i = 0; i < 50 && !processesMentioning(marker).empty(); ++i) std::this_thread::sleep_for(100ms);
  return processesMentioning(marker);
}

// The pids and command lines of `pids`, for a failure message.
inline std::string describeProcesses(const std::vector<pid_t>& pids) {
  std::string out;
  for (pid_t pid : pids) out += "\n  " + std::to_string(pid) + ": " + commandLineOf(std::to_string(pid)).substr(0, 400);
  return out;
}

// A copy of the repository's tasks into `dest` whose timing plans make `samples` x `rounds`
// timed calls per configuration (after `warmup` untimed ones; -1 keeps the task's) instead of
// 30 x 3 (CPU) or 200 x 2 (GPU), and whose CPU tasks flush 8 MiB of cache before a timed call
// instead of 64 MiB (kShortFlushBytes); everything else, the harnesses and the scorer's rules
// (fresh inputs, verified calls, overhead calibration) are the same. Returns `dest`.
//
// The flush is the driver's largest cost: with 64 MiB, two quick noop scorings (cpu/reduction
// and cpu/softmax, after a first two that made the trusted builds) took 43.9 s, and the daemon's
// four 139 CPU-s; with 8 MiB 36.3 s and 109 CPU-s, the noop's speedups 0.90-0.99x either way.
// 8 MiB is eight times a core's L2 here (a quarter of the L3); the tests look at ratios of
// baseline and candidate timed alike, not at the figures. GPU tasks keep theirs (a GPU's L2 is
// larger).
inline constexpr long kShortFlushBytes = 8L << 20;
inline fs::path shortTimedTasks(const fs::path& dest, int samples, int rounds, int warmup) {
  fs::copy(AKAD_TEST_TASKS_DIR, dest, fs::copy_options::recursive);
  const std::regex samplesKey(R"(\n(  samples:) *[0-9]+)"), roundsKey(R"(\n(  rounds:) *[0-9]+)"),
      warmupKey(R"(\n(  warmup:) *[0-9]+)"), flushKey(R"(\n(  flush_bytes:) *[0-9]+)");
  int rewritten = 0;
  for (const auto& e : fs::recursive_directory_iterator(dest)) {
    if (e.path().filename() != "task.yaml") continue;
    std::string text = readFile(e.path());
    std::string quick = std::regex_replace(text, samplesKey, "\n$1 " + std::to_string(samples));
    quick = std::regex_replace(quick, roundsKey, "\n$1 " + std::to_string(rounds));
    if (warmup >= 0) quick = std::regex_replace(quick, warmupKey, "\n$1 " + std::to_string(warmup));
    if (quick.find("\ngpu: false\n") != std::string::npos)
      quick = std::regex_replace(quick, flushKey, "\n$1 " + std::to_string(kShortFlushBytes));
    if (quick == text) continue;
    std::ofstream(e.path(), std::ios::trunc) << quick;
    ++rewritten;
  }
  EXPECT_GT(rewritten, 0) << "no task.yaml under " << dest << " has a timing plan to shorten";
  return dest;
}

// A time as the store writes it ("2026-12-02T18:00:00.123Z") in seconds since the epoch; -1
// for anything else, which no time the tests compare can be.
inline double isoSeconds(const std::string& iso) { return parseIsoTimeUtc(iso).value_or(-1); }

class PipelineDaemon {
 public:
  // Task: the tasks' own timing plans. Quick: 10 x 2 timed calls per configuration, for tests
  // that look at speedups but not at the suite's figures to their full precision (a third of
  // the performance gates' time). Minimal: 5 x 1 (the fewest a task may ask for) after one
  // warm-up call, for tests of what happens around an attempt (sandboxes, users, restarts, the
  // network) that need it scored but look at no figure; every gate still runs as in production.
  enum class Timing { Task, Quick, Minimal };
  // Every daemon of a test run shares one trusted cache (akad --trusted-cache, locked across
  // processes), so a task version is built once a run rather than once a test. A daemon whose
  // test looks at its own builds (Own), or that runs its sandboxes as other uids, keeps its own.
  enum class Cache { Shared, Own };
  explicit PipelineDaemon(const std::string& tag, Timing timing = Timing::Task, Cache cache = Cache::Shared)
      : parent_("akad-test-" + tag + "-" + std::to_string(::getpid())), cache_(cache) {
    paths_ = {dir_ / "akad.sock", dir_ / "state",
              timing == Timing::Quick     ? shortTimedTasks(dir_ / "tasks", 10, 2, -1)
              : timing == Timing::Minimal ? shortTimedTasks(dir_ / "tasks", 5, 1, 1)
                                          : fs::path(AKAD_TEST_TASKS_DIR)};
  }
  ~PipelineDaemon() {
    stop();
    // The per-test cgroup parent is the test's own: once empty, it goes too.
    for (const fs::path& p : cgroupParentDirs(parent_)) ::rmdir(p.c_str());
  }

  void start(const std::vector<std::string>& extraArgs = {}) {
    std::vector<std::string> args = {"--cgroup-parent", parent_};
    // No GPU unless the test asks for some.
    if (std::find(extraArgs.begin(), extraArgs.end(), "--gpus") == extraArgs.end()) {
      args.push_back("--gpus");
      args.push_back("none");
    }
    // One worker unless the test asks for more.
    if (std::find(extraArgs.begin(), extraArgs.end(), "--workers") == extraArgs.end()) {
      args.push_back("--workers");
      args.push_back("1");
    }
    const auto given = [&](const char* flag) {
      return std::find(extraArgs.begin(), extraArgs.end(), flag) != extraArgs.end();
    };
    if (cache_ == Cache::Shared && !given("--trusted-cache") && !given("--sandbox-uid")) {
      args.push_back("--trusted-cache");
      args.push_back(AKAD_TEST_TRUSTED_CACHE);
    }
    args.insert(args.end(), extraArgs.begin(), extraArgs.end());
    auto d = DaemonProcess::start(paths_, args);
    ASSERT_TRUE(d) << d.error().message;
    daemon_ = std::move(*d);
  }
  void stop() {
    if (daemon_) {
      daemon_->stop(SIGTERM);
      daemon_.reset();
    }
  }
  void kill9() {
    ::kill(daemon_->pid(), SIGKILL);
    daemon_->stop(SIGKILL);
    daemon_.reset();
  }

  CommandResult ctl(const std::vector<std::string>& args, std::chrono::seconds timeout = 60s) {
    std::vector<std::string> argv = {akactlBinary().string(), "--socket", paths_.socket.string()};
    argv.insert(argv.end(), args.begin(), args.end());
    return runCommand(argv, {}, timeout);
  }
  json ctlJson(std::vector<std::string> args, std::chrono::seconds timeout = 60s) {
    args.insert(args.begin(), "--json");
    auto r = ctl(args, timeout);
    EXPECT_EQ(r.exitCode, 0) << r.err << r.out;
    json j = json::parse(r.out, nullptr, false);
    EXPECT_FALSE(j.is_discarded()) << r.out;
    return j;
  }
  std::string submit(const std::vector<std::string>& args) {
    std::vector<std::string> a = {"submit"};
    a.insert(a.end(), args.begin(), args.end());
    return ctlJson(a).at("run").at("id");
  }
  // Waits for the run to end and returns its attempts.
  json waitRun(const std::string& id, std::chrono::seconds timeout = 600s) {
    auto r = ctl({"watch", id, "--json"}, timeout);
    EXPECT_EQ(r.exitCode, 0) << r.err;
    return ctlJson({"status", id}).at("attempts");
  }
  bool running() const { return daemon_ && processExists(daemon_->pid()); }
  json runOne(const std::vector<std::string>& args, std::chrono::seconds timeout = 600s) {
    json attempts = waitRun(submit(args), timeout);
    EXPECT_EQ(attempts.size(), 1u);
    return attempts.at(0);
  }

  void expectNothingLeft() {
    const auto left = processesLeftMentioning(paths_.stateDir.string());
    EXPECT_TRUE(left.empty()) << "a sandbox process outlived its attempt:" << describeProcesses(left);
    EXPECT_TRUE(cgroupsUnder(parent_).empty()) << "a sandbox cgroup was left under " << parent_;
    EXPECT_TRUE(mountsUnder(paths_.stateDir / "attempts").empty()) << "a workspace file system was left mounted";
  }
  // Agents' workspaces (and anything else) mounted under <state>/attempts.
  std::vector<std::string> workspaceMounts() const { return mountsUnder(paths_.stateDir / "attempts"); }
  // The daemon's kept mount templates (akad --mount-templates, default <state>/mount-templates).
  std::vector<std::string> templateMounts() const { return mountsUnder(paths_.stateDir / "mount-templates"); }

  const DaemonProcess::Paths& paths() const { return paths_; }
  // A folder of the test's own beside the daemon's state, removed with it.
  fs::path scratch(const std::string& name) const {
    fs::create_directories(dir_ / name);
    return dir_ / name;
  }
  const std::string& cgroupParent() const { return parent_; }

 private:
  TempDir dir_;
  DaemonProcess::Paths paths_;
  std::string parent_;
  Cache cache_;
  std::unique_ptr<DaemonProcess> daemon_;
};

// A gtest suite whose tests share one daemon, so that its trusted builds are made once: started
// before the first test, stopped after the last; no test leaves a process, cgroup or mount.
// `Suite` (the fixture itself) names the daemon's tag and timing:
//   class AttackTest : public SuiteDaemon<AttackTest> {
//    public:
//     static constexpr const char* kTag = "attack";
//     static constexpr PipelineDaemon::Timing kTiming = PipelineDaemon::Timing::Quick;
//   };
template <typename Suite>
class SuiteDaemon : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    daemon_ = new PipelineDaemon(Suite::kTag, Suite::kTiming);
    daemon_->start();
  }
  static void TearDownTestSuite() {
    daemon_->stop();
    daemon_->expectNothingLeft();
    delete daemon_;
    daemon_ = nullptr;
  }
  void TearDown() override { daemon_->expectNothingLeft(); }
  inline static PipelineDaemon* daemon_ = nullptr;
};

}  // namespace akad::test
