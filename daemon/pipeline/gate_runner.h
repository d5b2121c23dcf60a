#pragma once
// The scorer's building blocks (score.cc runs them in order): where a scoring's files live
// (Layout), the phases of configurations and their cases, the plans handed to runners, and
// GateRunner, which runs one trusted or candidate program in its own akabox sandbox.

#include <sys/types.h>

#include <csignal>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/result.h"
#include "daemon/pipeline/sandbox_run.h"
#include "daemon/pipeline/score.h"
#include "daemon/pipeline/task.h"

namespace akad {

inline constexpr std::size_t kMaxVerdictBytes = 16 << 20;
inline constexpr std::size_t kMaxTimesBytes = 4 << 20;
inline constexpr std::size_t kLogTailBytes = 4000;
inline constexpr uint64_t kMaxDataFileBytes = 4ull << 30;

// The candidate process may spend at most this much more time outside its claimed timed calls
// than the baseline process did (same runner, same flush and copy work), beyond the spread of
// the baseline's own rounds: more means work was moved out of the timed window or the
// in-process clock was tampered with.
inline constexpr double kOverheadSlackFactor = 1.25;
inline constexpr double kOverheadSlackSeconds = 0.15;

struct Case {
  std::string name;
  nlohmann::json config;
  uint64_t seed = 0;
};

struct Phase {
  std::string name;  // "visible" | "held_out"
  std::vector<nlohmann::json> configs;
  std::vector<Case> check;    // correctness cases: every configuration x seeds
  std::vector<Case> perf;     // input sets for timed calls
};

struct Layout {
  std::filesystem::path root, ws, gen, expected, plans, out, logs;
  std::filesystem::path trustedRoot;  // <trusted cache>/<task hash>: the trusted build and trusted JIT caches
  std::filesystem::path inputs(const std::string& phase) const { return root / ("in-" + phase); }
  // JIT caches (Triton kernels, CUDA's PTX cache), one per kind of program so that no program
  // reads what another wrote: the reference's and the baseline's are trusted code and are kept
  // per task version across scorings; the candidate's lives only as long as this scoring, shared
  // by its own processes so that each does not compile its kernels again.
  std::filesystem::path jitCache(const std::string& who) const {
    return who == "candidate" ? root / "jit-candidate" : trustedRoot / ("jit-" + who);
  }
};

// A scoring's layout under `workDir` (score.cc); nothing is created.
Layout layoutFor(const Task& task, const std::filesystem::path& workDir, const ScoringEnvironment& env);

// Where a sandbox sees its JIT cache, and the variables that point the toolchains at it.
inline constexpr const char* kJitMount = "/jit";

// The commands as one `sh -c` script that stops at the first failure.
std::string shellJoin(const std::vector<std::string>& cmds);
nlohmann::json caseJson(const Case& c, bool withSeed);
// Plans given to the candidate runner carry no seeds: it gets inputs, never how they were made.
nlohmann::json checkPlan(const Phase& p, bool withSeed);
nlohmann::json perfPlan(const Phase& p, const TaskTiming& t, bool withSeed);

// The driver's exit status when the worker failed or broke the protocol (driver_main.cpp).
inline constexpr int kDriverWorkerFault = 3;

struct DrivenRun {
  SandboxOutcome driver;
  SandboxOutcome worker;
  bool workerStopped = false;  // the scorer ended the worker because its driver had ended
  bool driverStopped = false;  // the scorer ended the driver: its worker had failed, or the attempt was cancelled
  // The driver failed by itself: it exited with an error of its own (not kDriverWorkerFault),
  // ran out of its memory, or ended by a signal or a limit the scorer did not send (a crash of
  // the trusted side: the worker cannot signal it from its own pid namespace and uid). A worker's
  // failure makes it exit with kDriverWorkerFault, and a stop by the scorer is driverStopped, so
  // neither reads so. A worker that failed too only saw its channel hang up, however soon after
  // it exited (a GPU whose memory neighbours hold can end the driver's allocation first; the
  // worker's "peer hung up" is no fault of its). Its wall-time limit is not its own failure: the
  // driver waits on the worker, and a worker that makes it wait that long is at fault.
  bool driverFailedByItself() const {
    if (driver.status == "oom") return true;
    if (driver.status == "exited") return driver.exit_code != 0 && driver.exit_code != kDriverWorkerFault;
    if (driver.status == "wall-timeout") return false;
    // A stop ends the sandbox by SIGKILL: any other signal is the driver's own crash, even one
    // that came just before a stop the scorer sent because the worker saw it hang up.
    if (driver.status == "signaled" && driverStopped) return !endedByStop(driver);
    return !driverStopped;
  }
  static bool endedByStop(const SandboxOutcome& o) {
    const auto sig = o.result.find("signal");
    return sig == o.result.end() || !sig->is_number_integer() || sig->get<int>() == SIGKILL || sig->get<int>() == SIGTERM;
  }
  // The driver reached its wall-time limit without the scorer stopping it: it waited on a worker
  // that did not finish its calls in time.
  bool driverOutwaited() const { return !driverStopped && driver.status == "wall-timeout"; }
};

class GateRunner {
 public:
  GateRunner(const Task& task, const ScoringEnvironment& env, Layout layout)
      : task_(task), env_(env), l_(std::move(layout)) {}

  // Who a sandbox runs as on the host: the attempt's own uid for the candidate's code, the
  // daemon's sandbox uid for trusted programs.
  std::pair<uid_t, gid_t> identity(const std::string& who) const;
  const ScoringEnvironment& environment() const { return env_; }

  SandboxRequest request(double wallS, const std::string& logName, bool gpu, const std::string& who = "trusted") const;

  Result<SandboxOutcome> run(SandboxRequest r) const;

  std::string logTail(const std::string& logName) const;

  Status ownForSandbox(const std::filesystem::path& dir, const std::string& who = "trusted") const;

  // Binds the JIT cache of `who` (reference, baseline or candidate) read-write at /jit.
  Status useJitCache(SandboxRequest& r, const std::string& who) const;

  // Runs the candidate (or baseline) runner with only the phase's inputs visible.
  Result<SandboxOutcome> runRunner(const std::string& who, const std::filesystem::path& programDir, const std::string& mode,
      const std::string& plan, const std::string& phase,
      const std::filesystem::path& outDir, double wallS, const std::string& logName) const;

  // Runs the trusted checker on a runner's outputs; returns its verdict JSON.
  Result<nlohmann::json> runChecker(const std::string& plan, const std::filesystem::path& outDir, const std::string& logName) const;
  // The same on what a driver kept: its outputs and the reference's answers side by side, and
  // the plan of those cases (verify.nlohmann::json), all written by the trusted driver.
  Result<nlohmann::json> checkKeptCalls(const std::filesystem::path& driverOut, const std::string& logName) const;

  Result<nlohmann::json> check(const std::filesystem::path& expectedDir, const std::string& planInSandbox, const std::filesystem::path& outDir,
      const std::string& logName) const;

  // One driven run (docs/scoring.md, "Driver and worker"): the trusted driver in a sandbox of
  // its own with the plan and a private output folder, and the worker (`programDir`/runner: the
  // candidate's, or the trusted baseline's) in another that sees nothing but the channel. The
  // two sandboxes are separate pid namespaces: the worker cannot see the driver to signal or
  // trace it. A worker that fails takes its driver down with it.
  Result<DrivenRun> runDriven(const std::string& who, const std::filesystem::path& programDir, const std::filesystem::path& trustedDir,
      const std::string& mode, const std::string& plan, const std::filesystem::path& outDir,
      double wallS, const std::string& tag) const;

  const Task& task() const { return task_; }
  const Layout& layout() const { return l_; }

 private:
  const Task& task_;
  const ScoringEnvironment& env_;
  Layout l_;
};


// Harnesses whose correctness and performance gates run as a trusted driver and a candidate
// worker (docs/scoring.md, "Driver and worker"): HarnessTraits::driven.
inline bool usesDriver(const Task& task) { return task.traits().driven; }

}  // namespace akad
