#include "daemon/pipeline/score.h"

#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <future>
#include <optional>
#include <map>
#include <memory>
#include <mutex>
#include <tuple>

#include "common/log.h"
#include "daemon/aka/wrap_score.h"
#include "daemon/pipeline/files.h"
#include "daemon/pipeline/prepare.h"
#include "daemon/pipeline/stats.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace akad {
namespace {

constexpr std::size_t kMaxVerdictBytes = 16 << 20;
constexpr std::size_t kMaxTimesBytes = 4 << 20;
constexpr std::size_t kLogTailBytes = 4000;
constexpr uint64_t kMaxDataFileBytes = 4ull << 30;

// The candidate process may spend at most this much more time outside its claimed timed calls
// than the baseline process did (same runner, same flush and copy work), beyond the spread of
// the baseline's own rounds: more means work was moved out of the timed window or the
// in-process clock was tampered with.
constexpr double kOverheadSlackFactor = 1.25;
constexpr double kOverheadSlackSeconds = 0.15;

struct Case {
  std::string name;
  json config;
  uint64_t seed = 0;
};

struct Phase {
  std::string name;  // "visible" | "held_out"
  std::vector<json> configs;
  std::vector<Case> check;    // correctness cases: every configuration x seeds
  std::vector<Case> perf;     // input sets for timed calls
};

struct Layout {
  fs::path root, ws, gen, expected, plans, out, logs;
  fs::path trustedRoot;  // <trusted cache>/<task hash>: the trusted build and trusted JIT caches
  fs::path inputs(const std::string& phase) const { return root / ("in-" + phase); }
  // JIT caches (Triton kernels, CUDA's PTX cache), one per kind of program so that no program
  // reads what another wrote: the reference's and the baseline's are trusted code and are kept
  // per task version across scorings; the candidate's lives only as long as this scoring, shared
  // by its own processes so that each does not compile its kernels again.
  fs::path jitCache(const std::string& who) const {
    return who == "candidate" ? root / "jit-candidate" : trustedRoot / ("jit-" + who);
  }
};

// Where a sandbox sees its JIT cache, and the variables that point the toolchains at it.
constexpr const char* kJitMount = "/jit";

std::string shellJoin(const std::vector<std::string>& cmds) {
  std::string s = "set -e\n";
  for (const auto& c : cmds) s += c + "\n";
  return s;
}

json caseJson(const Case& c, bool withSeed) {
  return {{"name", c.name}, {"config", c.config}, {"seed", withSeed ? c.seed : 0}};
}

// Plans given to the candidate runner carry no seeds: it gets inputs, never how they were made.
json checkPlan(const Phase& p, bool withSeed) {
  json cases = json::array();
  for (const auto& c : p.check) cases.push_back(caseJson(c, withSeed));
  return {{"cases", cases}};
}

json perfPlan(const Phase& p, const TaskTiming& t, bool withSeed) {
  json cases = json::array();
  json groups = json::array();
  for (const auto& cfg : p.configs) {
    json names = json::array();
    for (const auto& c : p.perf)
      if (c.config["name"] == cfg["name"]) {
        cases.push_back(caseJson(c, withSeed));
        names.push_back(c.name);
      }
    groups.push_back({{"name", cfg["name"]}, {"cases", names}});
  }
  return {{"cases", cases},
          {"perf", {{"warmup", t.warmup}, {"samples", t.samples}, {"flush_bytes", t.flush_bytes},
                    {"groups", groups}}}};
}

struct DrivenRun {
  SandboxOutcome driver;
  SandboxOutcome worker;
  bool workerStopped = false;  // the scorer ended the worker because its driver had ended
};

// The driver's exit status when the worker failed or broke the protocol (driver_main.cpp).
constexpr int kDriverWorkerFault = 3;

class GateRunner {
 public:
  GateRunner(const Task& task, const ScoringEnvironment& env, Layout layout)
      : task_(task), env_(env), l_(std::move(layout)) {}

  // Who a sandbox runs as on the host: the attempt's own uid for the candidate's code, the
  // daemon's sandbox uid for trusted programs.
  std::pair<uid_t, gid_t> identity(const std::string& who) const {
    if (who == "candidate" && env_.candidate_uid != 0) return {env_.candidate_uid, env_.candidate_gid};
    return {env_.sandbox_uid, env_.sandbox_gid};
  }

  SandboxRequest request(double wallS, const std::string& logName, bool gpu, const std::string& who = "trusted") const {
    SandboxRequest r;
    std::tie(r.outside_uid, r.outside_gid) = identity(who);
    r.memory_bytes = task_.limits.memory_bytes;
    r.pids = task_.limits.pids;
    r.wall_s = wallS;
    r.binds = env_.image.binds;
    r.env = env_.image.env;
    if (gpu) r.gpus = env_.gpus;
    r.stdout_file = l_.logs / (logName + ".out");
    r.stderr_file = l_.logs / (logName + ".err");
    // The output limit is also RLIMIT_FSIZE: input and output tensors of GPU configurations
    // reach hundreds of MiB per file.
    r.output_limit = kMaxDataFileBytes;
    return r;
  }

  Result<SandboxOutcome> run(SandboxRequest r) const {
    if (env_.canceller && env_.canceller->cancelled()) return Error{"cancelled"};
    return runSandbox(r, env_.canceller);
  }

  std::string logTail(const std::string& logName) const {
    std::string out = tailOfFile(l_.logs / (logName + ".err"), kLogTailBytes);
    std::string so = tailOfFile(l_.logs / (logName + ".out"), kLogTailBytes);
    if (!so.empty()) out += (out.empty() ? "" : "\n") + so;
    return out;
  }

  Status ownForSandbox(const fs::path& dir, const std::string& who = "trusted") const {
    const auto [uid, gid] = identity(who);
    if (uid == 0) return {};
    return chownTree(dir, uid, gid);
  }

  // Binds the JIT cache of `who` (reference, baseline or candidate) read-write at /jit.
  Status useJitCache(SandboxRequest& r, const std::string& who) const {
    const fs::path dir = l_.jitCache(who);
    std::error_code ec;
    struct stat st {};
    if (!fs::exists(dir)) {
      fs::create_directories(dir, ec);
      if (ec) return Error{"cannot create the JIT cache " + dir.string() + ": " + ec.message()};
      if (auto s = ownForSandbox(dir, who); !s) return s;
    } else if (::lstat(dir.c_str(), &st) == 0 && identity(who).first != 0 && st.st_uid != identity(who).first) {
      // Made by a daemon that ran its sandboxes as another uid.
      if (auto s = ownForSandbox(dir, who); !s) return s;
    }
    r.binds.push_back({dir, kJitMount, true});
    r.env["TRITON_CACHE_DIR"] = std::string(kJitMount) + "/triton";
    r.env["CUDA_CACHE_PATH"] = std::string(kJitMount) + "/cuda";
    // Python's compiled modules too: the GPU machines' torch ships without them, and compiling
    // its modules again cost every runner process seconds of its untimed start-up.
    r.env["PYTHONPYCACHEPREFIX"] = std::string(kJitMount) + "/pycache";
    r.env["PYTHONDONTWRITEBYTECODE"] = "";  // empty is unset for Python; the image sets it
    return {};
  }

  // Runs the candidate (or baseline) runner with only the phase's inputs visible.
  Result<SandboxOutcome> runRunner(const std::string& who, const fs::path& programDir, const std::string& mode,
                                   const std::string& plan, const std::string& phase,
                                   const fs::path& outDir, double wallS, const std::string& logName) const {
    std::error_code ec;
    fs::create_directories(outDir, ec);
    if (auto s = ownForSandbox(outDir, who); !s) return s.error();
    SandboxRequest r = request(wallS, logName, task_.gpu, who);
    if (auto s = useJitCache(r, who); !s) return s.error();
    r.binds.push_back({programDir, "/candidate", false});
    r.binds.push_back({l_.inputs(phase), "/data", false});
    r.binds.push_back({l_.plans / plan, "/plans/" + plan, false});
    r.binds.push_back({outDir, "/out", true});
    r.env["OMP_WAIT_POLICY"] = "PASSIVE";  // spinning idle threads would blur the CPU accounting
    r.command = {"/candidate/runner", mode, "--plan", "/plans/" + plan, "--data", "/data", "--out", "/out"};
    return run(r);
  }

  // Runs the trusted checker on a runner's outputs; returns its verdict JSON.
  Result<json> runChecker(const std::string& plan, const fs::path& outDir, const std::string& logName) const {
    return check(l_.expected, "/plans/" + plan, outDir, logName);
  }
  // The same on what a driver kept: its outputs and the reference's answers side by side, and
  // the plan of those cases (verify.json), all written by the trusted driver.
  Result<json> checkKeptCalls(const fs::path& driverOut, const std::string& logName) const {
    return check(driverOut, "/out/verify.json", driverOut, logName);
  }

  Result<json> check(const fs::path& expectedDir, const std::string& planInSandbox, const fs::path& outDir,
                     const std::string& logName) const {
    SandboxRequest r = request(task_.limits.correctness_s, logName, false);
    r.binds.push_back({env_.akacheck.parent_path(), "/tools", false});
    r.binds.push_back({expectedDir, "/expected", false});
    r.binds.push_back({l_.plans, "/plans", false});
    r.binds.push_back({outDir, "/out", false});
    r.command = {"/tools/" + env_.akacheck.filename().string(), "--plan", planInSandbox,
                 "--data", "/expected", "--out", "/out", "--tolerances", "/plans/tolerances.json"};
    auto outcome = run(r);
    if (!outcome) return outcome.error();
    if (outcome->status != "exited" || (outcome->exit_code != 0 && outcome->exit_code != 1))
      return Error{"the checker did not finish (" + outcome->describe() + "): " + logTail(logName)};
    auto text = readFileLimited(l_.logs / (logName + ".out"), kMaxVerdictBytes);
    if (!text) return text.error();
    try {
      json v = json::parse(*text);
      if (!v.is_object() || !v.contains("ok") || !v["ok"].is_boolean())
        return Error{"the checker's verdict has no boolean 'ok'"};
      return v;
    } catch (const json::exception& e) {
      return Error{std::string("the checker's verdict is not JSON: ") + e.what()};
    }
  }

  // One driven run (docs/scoring.md, "Driver and worker"): the trusted driver in a sandbox of
  // its own with the plan and a private output folder, and the worker (`programDir`/runner: the
  // candidate's, or the trusted baseline's) in another that sees nothing but the channel. The
  // two sandboxes are separate pid namespaces: the worker cannot see the driver to signal or
  // trace it. A worker that fails takes its driver down with it.
  Result<DrivenRun> runDriven(const std::string& who, const fs::path& programDir, const fs::path& trustedDir,
                              const std::string& mode, const std::string& plan, const fs::path& outDir,
                              double wallS, const std::string& tag) const {
    std::error_code ec;
    const fs::path channel = l_.root / "channels" / tag;
    for (const fs::path& d : {outDir, channel}) {
      fs::create_directories(d, ec);
      if (ec) return Error{"cannot create " + d.string() + ": " + ec.message()};
      if (auto s = ownForSandbox(d); !s) return s.error();
    }
    SandboxRequest driver = request(wallS, tag + "-driver", task_.gpu);
    if (auto s = useJitCache(driver, "reference"); !s) return s.error();
    driver.binds.push_back({trustedDir, "/trusted", false});
    driver.binds.push_back({l_.plans / plan, "/plans/" + plan, false});
    driver.binds.push_back({outDir, "/out", true});
    driver.binds.push_back({channel, "/channel", true});
    // Each call's input file is made here: huge pages keep the worker's fresh mapping of it to
    // a few page-table entries (docs/scoring.md, "Driver and worker").
    driver.tmpfs.push_back({"/inputs", driver.memory_bytes, true});
    driver.command = {"/trusted/driver", mode, "--plan", "/plans/" + plan, "--channel", "/channel/socket",
                      "--out", "/out", "--inputs-dir", "/inputs"};

    SandboxRequest worker = request(wallS, tag, task_.gpu, who);
    if (auto s = useJitCache(worker, who); !s) return s.error();
    worker.binds.push_back({programDir, "/candidate", false});
    worker.binds.push_back({channel, "/channel", false});
    worker.env["OMP_WAIT_POLICY"] = "PASSIVE";  // spinning idle threads would blur the CPU accounting
    worker.command = {"/candidate/runner", "serve", "--channel", "/channel/socket"};

    if (env_.canceller && env_.canceller->cancelled()) return Error{"cancelled"};
    // Each side ends the other: a worker that fails leaves its driver nothing to wait for, and a
    // driver that fails (or finished while its worker lingers) leaves the worker nothing to do.
    SandboxCanceller driverCanceller, workerCanceller;
    auto driverRun = std::async(std::launch::async, [&] { return runSandbox(driver, &driverCanceller); }).share();
    auto workerRun = std::async(std::launch::async, [&] { return runSandbox(worker, &workerCanceller); }).share();
    using namespace std::chrono_literals;
    constexpr auto kLingerAfterDriver = 5s;
    auto failed = [](const auto& outcome) { return !outcome || !outcome->succeeded(); };
    std::optional<std::chrono::steady_clock::time_point> driverEnded;
    bool workerStopped = false;
    for (;;) {
      const bool workerDone = workerRun.wait_for(50ms) == std::future_status::ready;
      const bool driverDone = driverRun.wait_for(0ms) == std::future_status::ready;
      if (workerDone && driverDone) break;
      if (env_.canceller && env_.canceller->cancelled()) {
        driverCanceller.cancel();
        workerCanceller.cancel();
      }
      if (workerDone && failed(workerRun.get())) driverCanceller.cancel();
      if (driverDone) {
        if (!driverEnded) driverEnded = std::chrono::steady_clock::now();
        if (!workerStopped &&
            (failed(driverRun.get()) || std::chrono::steady_clock::now() - *driverEnded > kLingerAfterDriver)) {
          workerStopped = true;
          workerCanceller.cancel();
        }
      }
    }
    const auto& workerOutcome = workerRun.get();
    const auto& driverOutcome = driverRun.get();
    fs::remove_all(channel, ec);
    if (!workerOutcome) return workerOutcome.error();
    if (!driverOutcome) return driverOutcome.error();
    return DrivenRun{*driverOutcome, *workerOutcome, workerStopped};
  }

  const Task& task() const { return task_; }
  const Layout& layout() const { return l_; }

 private:
  const Task& task_;
  const ScoringEnvironment& env_;
  Layout l_;
};

std::string firstFailure(const json& verdict) {
  for (const auto& c : verdict.value("cases", json::array()))
    if (!c.value("ok", false))
      return c.value("name", std::string("?")) + ": " + c.value("reason", std::string("wrong output"));
  return "wrong output";
}

json gate(bool pass, const std::string& reason) {
  json g = {{"pass", pass}};
  if (!reason.empty()) g["reason"] = reason;
  return g;
}

// Reads `<group>.times.json` written by a runner: untrusted, so every number is checked.
Result<std::vector<double>> readTimes(const fs::path& file, int expected) {
  auto text = readFileLimited(file, kMaxTimesBytes);
  if (!text) return text.error();
  try {
    json j = json::parse(*text);
    const json& s = j.at("samples_ns");
    if (!s.is_array() || static_cast<int>(s.size()) != expected)
      return Error{file.filename().string() + ": expected " + std::to_string(expected) + " samples"};
    std::vector<double> v;
    for (const auto& x : s) {
      if (!x.is_number()) return Error{file.filename().string() + ": a sample is not a number"};
      double d = x.get<double>();
      if (!std::isfinite(d) || d <= 0) return Error{file.filename().string() + ": a sample is not a positive time"};
      v.push_back(d);
    }
    return v;
  } catch (const json::exception& e) {
    return Error{file.filename().string() + ": not valid times JSON: " + e.what()};
  }
}

// The GPU's clocks and temperature around a runner's timed phase (gpu_state.json, written by the
// GPU runners). Advisory: the file comes from a process that ran candidate code. A GPU whose SM
// clock after the timed calls is under 85% of its maximum was throttling (power or heat).
json readGpuState(const fs::path& outDir, bool& throttled) {
  auto text = readFileLimited(outDir / "gpu_state.json", 64 << 10);
  if (!text) return nullptr;
  json state = json::parse(*text, nullptr, false);
  if (!state.is_object()) return nullptr;
  const json after = state.value("after", json::object());
  if (after.is_object() && after.contains("clocks.sm") && after.contains("clocks.max.sm") &&
      after["clocks.sm"].is_number() && after["clocks.max.sm"].is_number() &&
      after["clocks.sm"].get<double>() < 0.85 * after["clocks.max.sm"].get<double>())
    throttled = true;
  return state;
}

// Correctness on one phase: the candidate writes outputs, the checker judges them.
json correctnessGate(const GateRunner& g, const fs::path& candidateDir, const Phase& p) {
  const std::string plan = p.name + "-check.json";
  const fs::path out = g.layout().out / (p.name + "-check");
  auto r = g.runRunner("candidate", candidateDir, "check", plan, p.name, out, g.task().limits.correctness_s,
                       p.name + "-check-run");
  if (!r) return gate(false, r.error().message);
  json result = gate(true, "");
  result["run"] = r->result;
  if (!r->succeeded()) {
    result = gate(false, "the candidate " + r->describe() + ": " + g.logTail(p.name + "-check-run"));
    result["run"] = r->result;
    return result;
  }
  auto verdict = g.runChecker(plan, out, p.name + "-check-verdict");
  if (!verdict) return gate(false, verdict.error().message);
  result["cases"] = (*verdict)["cases"];
  if (!(*verdict)["ok"].get<bool>()) {
    result["pass"] = false;
    result["reason"] = "wrong output: " + firstFailure(*verdict);
  }
  return result;
}

struct ProcessTiming {
  double wall_s = 0;
  double claimed_s = 0;
};

// Performance on one phase: baseline and candidate processes alternate (ABBA order) for the
// task's rounds; the candidate's outputs of timed calls are checked; claimed times must be
// accounted for by the outside clock.
json performanceGate(const GateRunner& g, const fs::path& baselineDir, const fs::path& candidateDir,
                     const Phase& p) {
  const Task& task = g.task();
  const std::string plan = p.name + "-perf.json";
  std::map<std::string, std::vector<double>> samples[2];  // [0] baseline, [1] candidate
  json rounds = json::array();
  json gpuStates = json::array();
  bool throttled = false;
  std::vector<double> overheads[2];  // per round: wall time outside the claimed timed calls
  for (int round = 0; round < task.timing.rounds; ++round) {
    ProcessTiming timing[2];
    const int order[2] = {round % 2, 1 - round % 2};
    for (int side : order) {
      const std::string who = side == 0 ? "baseline" : "candidate";
      const std::string tag = p.name + "-perf-" + who + "-" + std::to_string(round);
      const fs::path out = g.layout().out / tag;
      auto r = g.runRunner(who, side == 0 ? baselineDir : candidateDir, "perf", plan, p.name, out,
                           task.limits.performance_s, tag);
      if (!r) return gate(false, r.error().message);
      if (!r->succeeded()) {
        std::string msg = "the " + who + " runner " + r->describe() + ": " + g.logTail(tag);
        if (side == 0) msg = "baseline failed (task problem): " + msg;
        return gate(false, msg);
      }
      timing[side].wall_s = r->wall_s;
      if (json st = readGpuState(out, throttled); !st.is_null())
        gpuStates.push_back({{"process", tag}, {"state", st}});
      for (const auto& cfg : p.configs) {
        const std::string group = cfg["name"];
        auto t = readTimes(out / (group + ".times.json"), task.timing.samples);
        if (!t) return gate(false, "the " + who + " runner's times: " + t.error().message);
        for (double ns : *t) timing[side].claimed_s += ns / 1e9;
        auto& dst = samples[side][group];
        dst.insert(dst.end(), t->begin(), t->end());
      }
      if (side == 1) {
        auto verdict = g.runChecker(plan, out, tag + "-verdict");
        if (!verdict) return gate(false, verdict.error().message);
        if (!(*verdict)["ok"].get<bool>())
          return gate(false, "outputs of timed calls are wrong (results cached or reused across calls?): " +
                                 firstFailure(*verdict));
      }
    }
    overheads[0].push_back(timing[0].wall_s - timing[0].claimed_s);
    overheads[1].push_back(timing[1].wall_s - timing[1].claimed_s);
    rounds.push_back({{"baseline_wall_s", timing[0].wall_s}, {"baseline_claimed_s", timing[0].claimed_s},
                      {"candidate_wall_s", timing[1].wall_s}, {"candidate_claimed_s", timing[1].claimed_s}});
    if (timing[1].claimed_s > timing[1].wall_s) {
      json r = gate(false, "claimed times the outside clock cannot account for: the candidate process ran " +
                               std::to_string(timing[1].wall_s) + " s and claims " +
                               std::to_string(timing[1].claimed_s) + " s of timed calls");
      r["rounds"] = rounds;
      return r;
    }
  }
  // Time outside the timed calls: the candidate's runner does the same untimed work as the
  // baseline's, so more than the baseline's worst round (with slack, plus the spread the
  // baseline's own rounds show: seconds of interpreter start-up vary from process to process,
  // and the check cannot resolve less than that) means work was moved out of the timed window.
  const auto [bMin, bMax] = std::minmax_element(overheads[0].begin(), overheads[0].end());
  const double limit = *bMax * kOverheadSlackFactor + kOverheadSlackSeconds + (*bMax - *bMin);
  const double cMax = *std::max_element(overheads[1].begin(), overheads[1].end());
  if (cMax > limit) {
    json r = gate(false, "the outside clock shows work outside the timed calls: the candidate's runner spent up to " +
                             std::to_string(cMax) + " s outside them, the baseline's at most " + std::to_string(*bMax) +
                             " s (limit " + std::to_string(limit) + " s)");
    r["rounds"] = rounds;
    return r;
  }

  json configs = json::array();
  std::vector<double> speedups;
  for (const auto& cfg : p.configs) {
    const std::string group = cfg["name"];
    SampleStats b = describeSamples(samples[0][group]);
    SampleStats c = describeSamples(samples[1][group]);
    const double speedup = b.median / c.median;
    speedups.push_back(speedup);
    configs.push_back({{"name", group}, {"baseline", b.toJson()}, {"candidate", c.toJson()}, {"speedup", speedup}});
  }
  json result = gate(true, "");
  result["configs"] = configs;
  result["speedup"] = geometricMean(speedups);
  result["rounds"] = rounds;
  if (!gpuStates.empty()) {
    result["gpu_states"] = gpuStates;
    result["throttled"] = throttled;
  }
  return result;
}

// --- Driven gates (docs/scoring.md, "Driver and worker") ------------------------------------

// Why a driven run did not finish, in words a user can act on; empty when it did. Whatever the
// driver reports about a failed worker is the candidate's failure; only a driver that failed on
// its own (exit 1, a task problem) is told apart.
std::string drivenFailure(const GateRunner& g, const DrivenRun& r, const std::string& who, const std::string& tag) {
  const bool workerFault = r.driver.status == "exited" && r.driver.exit_code == kDriverWorkerFault;
  // A worker the scorer stopped because its driver had failed is not the candidate's failure.
  if (workerFault || (!r.worker.succeeded() && !(r.workerStopped && !r.driver.succeeded()))) {
    std::string why = "the " + who + " " + (r.worker.succeeded() ? "broke the driver's protocol" : r.worker.describe());
    std::string tail = g.logTail(tag);
    if (workerFault) tail += (tail.empty() ? "" : "\n") + g.logTail(tag + "-driver");
    return why + (tail.empty() ? "" : ": " + tail);
  }
  if (!r.driver.succeeded()) return "the driver " + r.driver.describe() + ": " + g.logTail(tag + "-driver");
  return "";
}

json drivenCorrectnessGate(const GateRunner& g, const fs::path& trustedDir, const fs::path& candidateDir, const Phase& p) {
  const std::string tag = p.name + "-check-run";
  const fs::path out = g.layout().out / (p.name + "-check");
  auto r = g.runDriven("candidate", candidateDir, trustedDir, "check", p.name + "-check.json", out,
                       g.task().limits.correctness_s, tag);
  if (!r) return gate(false, r.error().message);
  if (std::string why = drivenFailure(g, *r, "candidate", tag); !why.empty()) {
    json failed = gate(false, why);
    failed["run"] = r->worker.result;
    return failed;
  }
  auto verdict = g.checkKeptCalls(out, p.name + "-check-verdict");
  if (!verdict) return gate(false, verdict.error().message);
  json result = gate(true, "");
  result["run"] = r->worker.result;
  result["cases"] = (*verdict)["cases"];
  if (!(*verdict)["ok"].get<bool>()) {
    result["pass"] = false;
    result["reason"] = "wrong output: " + firstFailure(*verdict);
  }
  return result;
}

// The share of timed calls whose outputs are verified, drawn per call after it finished: a
// candidate that skips or fakes 10% of a configuration's `calls` timed calls goes unseen with
// probability (1 - keep)^(calls / 10), at most 1%.
double keepProbability(int calls) {
  const double faked = std::ceil(0.1 * std::max(calls, 1));
  return std::min(1.0, 1.0 - std::pow(0.01, 1.0 / faked));
}

// The baseline's processes also make empty calls (the channel and the copies, no kernel): the
// driver's fixed overhead per call. Only the trusted baseline gets them, so a candidate cannot
// make the calibration slow to have more subtracted from its own times.
int emptyCalls(const TaskTiming& t) { return std::max(5, t.samples / 4); }

json drivenPerfPlan(const Phase& p, const TaskTiming& t, bool baseline) {
  json cases = json::array(), groups = json::array();
  const double keep = baseline ? 0.0 : keepProbability(t.samples * t.rounds);
  for (const auto& cfg : p.configs) {
    const std::string name = cfg["name"];
    cases.push_back({{"name", name}, {"config", cfg}});
    groups.push_back({{"name", name}, {"cases", {name}}, {"keep", keep}, {"empty", baseline ? emptyCalls(t) : 0}});
  }
  return {{"cases", cases},
          {"perf", {{"warmup", t.warmup}, {"samples", t.samples}, {"flush_bytes", t.flush_bytes}, {"groups", groups}}}};
}

struct DrivenTimes {
  std::vector<double> samples, empty, inproc;
  int kept = 0;
};

// report.json of a perf driver. Written by trusted code, but its inproc_ns are the worker's own
// claims: they are only ever shown, never used.
Status readDriverReport(const fs::path& file, const Phase& p, int samples, std::map<std::string, DrivenTimes>& into) {
  auto text = readFileLimited(file, kMaxTimesBytes);
  if (!text) return text.error();
  json j = json::parse(*text, nullptr, false);
  if (!j.is_object() || !j.contains("groups") || !j["groups"].is_array()) return Error{file.string() + ": no groups"};
  for (const auto& cfg : p.configs) {
    const std::string name = cfg["name"];
    const json* found = nullptr;
    for (const json& gr : j["groups"])
      if (gr.is_object() && gr.value("name", std::string()) == name) found = &gr;
    if (!found) return Error{file.string() + ": no times for " + name};
    DrivenTimes& t = into[name];
    auto append = [&](const char* key, std::vector<double>& dst) -> Status {
      const json& a = found->value(key, json::array());
      if (!a.is_array()) return Error{file.string() + ": " + key + " is not a list"};
      for (const json& x : a) {
        if (!x.is_number()) return Error{file.string() + ": a value of " + key + " is not a number"};
        dst.push_back(x.get<double>());
      }
      return {};
    };
    const std::size_t before = t.samples.size();
    if (auto s = append("samples_ns", t.samples); !s) return s;
    if (auto s = append("empty_ns", t.empty); !s) return s;
    if (auto s = append("inproc_ns", t.inproc); !s) return s;
    if (static_cast<int>(t.samples.size() - before) != samples)
      return Error{file.string() + ": expected " + std::to_string(samples) + " timed calls for " + name};
    t.kept += found->value("kept", 0);
  }
  return {};
}

// Per configuration: the driver's times less its calibrated overhead. A net time under the
// resolution (the spread of the empty calls) cannot be told from nothing and is counted as
// the resolution, so no speedup rests on noise.
json drivenConfigResult(const std::string& name, const DrivenTimes& base, const DrivenTimes& cand, double& speedup) {
  const SampleStats empty = describeSamples(base.empty);
  const double overhead = empty.median;
  const double resolution = std::max(empty.iqr(), 1000.0);
  bool belowResolution = false;
  auto net = [&](const std::vector<double>& raw) {
    std::vector<double> v;
    for (double x : raw) {
      const double n = x - overhead;
      if (n < resolution) belowResolution = true;
      v.push_back(std::max(n, resolution));
    }
    return describeSamples(v);
  };
  const SampleStats b = net(base.samples);
  const bool baselineBelow = belowResolution;
  belowResolution = false;
  const SampleStats c = net(cand.samples);
  speedup = b.median / c.median;
  json r = {{"name", name},
            {"baseline", b.toJson()},
            {"candidate", c.toJson()},
            {"speedup", speedup},
            {"overhead_ns", overhead},
            {"resolution_ns", resolution},
            {"raw_median_ns", {{"baseline", describeSamples(base.samples).median},
                               {"candidate", describeSamples(cand.samples).median}}},
            {"verified_calls", cand.kept}};
  if (belowResolution) r["below_resolution"] = true;
  if (baselineBelow) r["baseline_below_resolution"] = true;
  // The worker's own clock around the kernel, a second opinion only: far from the driver's
  // net time means work outside the call (or a clock that lies), and is flagged.
  if (!cand.inproc.empty()) {
    const double inproc = describeSamples(cand.inproc).median;
    r["candidate_inproc_median_ns"] = inproc;
    if (std::abs(inproc - c.median) > 0.25 * c.median + resolution) r["clock_disagreement"] = true;
  }
  return r;
}

json drivenPerformanceGate(const GateRunner& g, const fs::path& trustedDir, const fs::path& candidateDir, const Phase& p) {
  const Task& task = g.task();
  std::map<std::string, DrivenTimes> times[2];  // [0] baseline, [1] candidate
  json rounds = json::array();
  for (int round = 0; round < task.timing.rounds; ++round) {
    const int order[2] = {round % 2, 1 - round % 2};
    json roundInfo = json::object();
    for (int side : order) {
      const std::string who = side == 0 ? "baseline" : "candidate";
      const std::string tag = p.name + "-perf-" + who + "-" + std::to_string(round);
      const fs::path out = g.layout().out / tag;
      auto r = g.runDriven(who, side == 0 ? trustedDir : candidateDir, trustedDir, "perf",
                           p.name + "-perf-" + who + ".json", out, task.limits.performance_s, tag);
      if (!r) return gate(false, r.error().message);
      if (std::string why = drivenFailure(g, *r, who, tag); !why.empty())
        return gate(false, side == 0 ? "baseline failed (task problem): " + why : why);
      roundInfo[who + "_wall_s"] = r->worker.wall_s;
      if (auto s = readDriverReport(out / "report.json", p, task.timing.samples, times[side]); !s)
        return gate(false, "the driver's report: " + s.error().message);
      if (side == 1) {
        auto verdict = g.checkKeptCalls(out, tag + "-verdict");
        if (!verdict) return gate(false, verdict.error().message);
        if (!(*verdict)["ok"].get<bool>())
          return gate(false, "outputs of timed calls are wrong (skipped, deferred, cached or replayed work?): " +
                                 firstFailure(*verdict));
      }
    }
    rounds.push_back(roundInfo);
  }
  json configs = json::array();
  std::vector<double> speedups;
  for (const auto& cfg : p.configs) {
    const std::string name = cfg["name"];
    double speedup = 0;
    configs.push_back(drivenConfigResult(name, times[0][name], times[1][name], speedup));
    speedups.push_back(speedup);
  }
  json result = gate(true, "");
  result["configs"] = configs;
  result["speedup"] = geometricMean(speedups);
  result["rounds"] = rounds;
  result["timing"] = "driver";
  result["keep_probability"] = keepProbability(task.timing.samples * task.timing.rounds);
  return result;
}

Phase makePhase(const std::string& name, const std::vector<json>& configs, const TaskTiming& timing,
                const std::function<uint64_t()>& seed) {
  constexpr int kCorrectnessSeeds = 3;
  Phase p{name, configs, {}, {}};
  for (const auto& cfg : configs) {
    const std::string n = cfg["name"];
    for (int s = 0; s < kCorrectnessSeeds; ++s) p.check.push_back({n + ".s" + std::to_string(s), cfg, seed()});
    for (int k = 0; k < timing.input_sets; ++k) p.perf.push_back({n + ".p" + std::to_string(k), cfg, seed()});
  }
  return p;
}

// Runs the trusted reference once for every case of both phases, then splits its output:
// inputs per phase (what runners may see), expected outputs (what only the checker sees).
Status generateData(const GateRunner& g, const fs::path& trustedDir, const std::vector<Phase>& phases) {
  const Layout& l = g.layout();
  json all = json::array();
  for (const auto& p : phases) {
    for (const auto& c : p.check) all.push_back(caseJson(c, true));
    for (const auto& c : p.perf) all.push_back(caseJson(c, true));
  }
  if (auto s = writeFile(l.gen / "plan.json", json{{"cases", all}}.dump()); !s) return s;
  if (auto s = g.ownForSandbox(l.gen); !s) return s;
  SandboxRequest r = g.request(g.task().limits.correctness_s, "reference-generate", g.task().gpu);
  r.binds.push_back({trustedDir, "/trusted", false});
  if (auto s = g.useJitCache(r, "reference"); !s) return s;
  r.workspace = l.gen;
  r.command = {"/trusted/reference", "generate", "--plan", "/workspace/plan.json", "--data", "/workspace"};
  auto outcome = g.run(r);
  if (!outcome) return outcome.error();
  if (!outcome->succeeded())
    return Error{"the trusted reference " + outcome->describe() + ": " + g.logTail("reference-generate")};
  std::error_code ec;
  for (const auto& p : phases) {
    fs::create_directories(l.inputs(p.name), ec);
    for (const auto* list : {&p.check, &p.perf})
      for (const auto& c : *list) {
        fs::rename(l.gen / (c.name + ".in.akt"), l.inputs(p.name) / (c.name + ".in.akt"), ec);
        if (ec) return Error{"the reference wrote no inputs for case " + c.name + ": " + ec.message()};
        fs::rename(l.gen / (c.name + ".ref.akt"), l.expected / (c.name + ".ref.akt"), ec);
        if (ec) return Error{"the reference wrote no expected output for case " + c.name + ": " + ec.message()};
      }
  }
  return {};
}

// Harnesses whose correctness and performance gates run as a trusted driver and a candidate
// worker (docs/scoring.md, "Driver and worker"); the others still run a single runner process.
bool usesDriver(const Task& task) { return task.harness == "cpp"; }

// One lock per task version: a build is made once even when several attempts of the task start
// together, and builds of different tasks run at the same time (a dozen GPU tasks submitted
// together waited 40 s each, one after the other, on the H200 when one lock served them all).
std::shared_ptr<std::mutex> trustedBuildLock(const std::string& contentHash) {
  static std::mutex mapMutex;
  static std::map<std::string, std::shared_ptr<std::mutex>> locks;
  std::lock_guard lock(mapMutex);
  auto& m = locks[contentHash];
  if (!m) m = std::make_shared<std::mutex>();
  return m;
}

}  // namespace

double arenaScore(bool compiled, bool correct, double speedup) {
  if (!compiled) return 0;
  if (!correct) return 20;
  return 120 + 100 * speedup;
}

Result<fs::path> ensureTrustedBuild(const Task& task, const ScoringEnvironment& env) {
  const fs::path root = env.trusted_cache / task.content_hash;
  const fs::path done = root / "trusted";
  const std::shared_ptr<std::mutex> buildLock = trustedBuildLock(task.content_hash);
  std::lock_guard lock(*buildLock);
  if (fs::exists(done / ".built")) return done;
  std::error_code ec;
  const fs::path tmp = root / ("trusted.tmp-" + randomHex(6));
  fs::create_directories(root, ec);
  if (auto s = assemblePristineWorkspace(task, env.tasks_root, tmp); !s) return s.error();
  if (env.sandbox_uid != 0)
    if (auto s = chownTree(tmp, env.sandbox_uid, env.sandbox_gid); !s) return s.error();
  SandboxRequest r;
  r.workspace = tmp;
  r.memory_bytes = task.limits.memory_bytes;
  r.pids = task.limits.pids;
  r.wall_s = 2 * task.limits.compile_s;
  r.binds = env.image.binds;
  r.env = env.image.env;
  std::vector<std::string> cmds = task.build_reference;
  cmds.insert(cmds.end(), task.build_candidate.begin(), task.build_candidate.end());
  r.command = {"/bin/sh", "-c", shellJoin(cmds)};
  r.stdout_file = root / "trusted-build.log";
  r.stderr_file = root / "trusted-build.log";
  auto outcome = runSandbox(r, env.canceller);
  if (!outcome) {
    fs::remove_all(tmp, ec);  // a cancelled or failed start leaves no half-built tree
    return outcome.error();
  }
  if (!outcome->succeeded()) {
    fs::remove_all(tmp, ec);
    return Error{"the trusted build of task " + task.id + " failed (" + outcome->describe() +
                 "): " + tailOfFile(root / "trusted-build.log", kLogTailBytes)};
  }
  std::vector<std::string> programs = {"reference", "runner"};
  if (usesDriver(task)) programs.push_back("driver");
  for (const std::string& program : programs)
    if (!fs::exists(tmp / program)) {
      fs::remove_all(tmp, ec);
      return Error{"the trusted build of task " + task.id + " made no ./" + program};
    }
  if (auto s = writeFile(tmp / ".built", task.content_hash + "\n"); !s) return s.error();
  fs::remove_all(done, ec);
  fs::rename(tmp, done, ec);
  if (ec) return Error{"cannot move the trusted build into place at " + done.string() + ": " + ec.message()};
  return done;
}

Result<json> scoreCandidate(const Task& task, const fs::path& candidateTree, const fs::path& workDir,
                            const ScoringEnvironment& env) {
  // An imported AgentKernelArena task is scored by its own harness (docs/aka.md).
  if (task.harness == "aka-wrap") return aka::scoreWrappedCandidate(task, candidateTree, workDir, env);
  // Wall time of every stage, for the result and the log: where a scoring's time goes.
  using Clock = std::chrono::steady_clock;
  std::vector<std::pair<std::string, Clock::time_point>> stages{{"trusted build", Clock::now()}};
  auto notify = [&](const std::string& gateName) {
    stages.emplace_back(gateName, Clock::now());
    if (env.on_gate) env.on_gate(gateName);
  };
  Layout l;
  l.root = workDir;
  l.ws = workDir / "ws";
  l.gen = workDir / "gen";
  l.expected = workDir / "expected";
  l.plans = workDir / "plans";
  l.out = workDir / "out";
  l.logs = workDir / "logs";
  l.trustedRoot = env.trusted_cache / task.content_hash;
  std::error_code ec;
  if (fs::exists(workDir)) return Error{"scoring directory " + workDir.string() + " already exists"};
  for (const auto& d : {l.gen, l.expected, l.plans, l.out, l.logs}) {
    fs::create_directories(d, ec);
    if (ec) return Error{"cannot create " + d.string() + ": " + ec.message()};
  }
  auto trusted = ensureTrustedBuild(task, env);
  if (!trusted) return trusted.error();

  auto assembled = assembleScoringWorkspace(task, env.tasks_root, candidateTree, l.ws);
  if (!assembled) return assembled.error();
  const auto drawSeed = env.draw_seed ? env.draw_seed : secureRandom64;

  json result = {{"task", task.id},
                 {"task_hash", task.content_hash},
                 {"taken_files", assembled->taken},
                 {"ignored_changes", assembled->ignored}};
  json gates = json::object();
  GateRunner g(task, env, l);

  // Gate 1: compile, in the scoring workspace, without a GPU.
  notify("compile");
  if (auto s = g.ownForSandbox(l.ws, "candidate"); !s) return s.error();
  SandboxRequest build = g.request(task.limits.compile_s, "compile", false, "candidate");
  build.workspace = l.ws;
  // The trusted build of this task version, read-only: a harness may link objects it made from
  // the pristine harness files instead of compiling them again (the hip harness does).
  build.binds.push_back({*trusted, "/trusted", false});
  build.env["AKA_TRUSTED"] = "/trusted";
  build.command = {"/bin/sh", "-c", shellJoin(task.build_candidate)};
  auto compiled = g.run(build);
  if (!compiled) return compiled.error();
  const bool builtRunner = fs::is_regular_file(l.ws / "runner");
  gates["compile"] = gate(compiled->succeeded() && builtRunner,
                          compiled->succeeded() ? (builtRunner ? "" : "the build made no ./runner")
                                                : "the build " + compiled->describe() + ": " + g.logTail("compile"));
  gates["compile"]["run"] = compiled->result;
  const bool compileOk = gates["compile"]["pass"];

  const bool driven = usesDriver(task);
  std::vector<Phase> phases = {makePhase("visible", task.visible, task.timing, drawSeed),
                               makePhase("held_out", task.held_out, task.timing, drawSeed)};
  json seeds = json::object();
  for (const auto& p : phases) {
    for (const auto* list : {&p.check, &p.perf})
      if (!driven || list == &p.check)  // driven timed calls draw their seeds in the driver
        for (const auto& c : *list) seeds[c.name] = std::to_string(c.seed);
    if (driven) {
      // Only the trusted driver reads these: the worker sees no plan, no seed and no input file.
      if (auto s = writeFile(l.plans / (p.name + "-check.json"), checkPlan(p, true).dump()); !s) return s.error();
      for (bool baseline : {true, false})
        if (auto s = writeFile(l.plans / (p.name + "-perf-" + (baseline ? "baseline" : "candidate") + ".json"),
                               drivenPerfPlan(p, task.timing, baseline).dump());
            !s)
          return s.error();
      continue;
    }
    if (auto s = writeFile(l.plans / (p.name + "-check.json"), checkPlan(p, false).dump()); !s) return s.error();
    if (auto s = writeFile(l.plans / (p.name + "-perf.json"), perfPlan(p, task.timing, false).dump()); !s) return s.error();
  }
  if (auto s = writeFile(l.plans / "tolerances.json", task.tolerancesJson().dump()); !s) return s.error();
  result["seeds"] = seeds;

  bool correct = false, heldCorrect = false;
  double speedup = 0, heldSpeedup = 0;
  ScoringEnvironment gpuEnv = env;
  if (compileOk && task.gpu && env.acquire_gpus) {
    notify("waiting for a GPU");
    auto ids = env.acquire_gpus();
    if (!ids) return ids.error();
    gpuEnv.gpus = *ids;
  }
  GateRunner gpuGates(task, gpuEnv, l);
  if (compileOk) {
    const GateRunner& g = gpuGates;  // from here on every gate may use the leased GPU
    if (!driven) {
      notify("generate");
      if (auto s = generateData(g, *trusted, phases); !s) return s.error();
    }

    // Correctness, then performance of one phase; wrong timed outputs or unaccountable times
    // fail the phase as well.
    auto scorePhase = [&](const Phase& p, const std::string& prefix, bool& ok, double& phaseSpeedup) {
      notify(prefix + "correctness");
      json& c = gates[prefix + "correctness"] =
          driven ? drivenCorrectnessGate(g, *trusted, l.ws, p) : correctnessGate(g, l.ws, p);
      ok = c["pass"];
      if (!ok || !env.measure_performance) return;
      notify(prefix + "performance");
      json& perf = gates[prefix + "performance"] =
          driven ? drivenPerformanceGate(g, *trusted, l.ws, p) : performanceGate(g, *trusted, l.ws, p);
      if (perf["pass"]) phaseSpeedup = perf["speedup"];
      else ok = false;
    };
    scorePhase(phases[0], "", correct, speedup);
    // Held-out configurations are scored whenever the candidate compiles, reported apart.
    scorePhase(phases[1], "held_out_", heldCorrect, heldSpeedup);
  }

  // A gate whose sandbox was cancelled (daemon shut-down, user cancel) failed for that reason,
  // not for the candidate's: such a scoring is no result at all.
  if (env.canceller && env.canceller->cancelled()) return Error{"cancelled during scoring"};
  result["gates"] = gates;
  result["compiled"] = compileOk;
  result["correct"] = correct;
  result["speedup"] = correct ? json(speedup) : json(nullptr);
  result["held_out_correct"] = heldCorrect;
  result["held_out_speedup"] = heldCorrect ? json(heldSpeedup) : json(nullptr);
  result["score"] = arenaScore(compileOk, correct, speedup);
  if (!env.measure_performance) {
    result["performance_measured"] = false;
    result["speedup"] = nullptr;
    result["held_out_speedup"] = nullptr;
    result["score"] = nullptr;
  }
  std::string reason;
  for (const char* name : {"compile", "correctness", "performance"})
    if (gates.contains(name) && !gates[name]["pass"].get<bool>()) {
      reason = std::string(name) + ": " + gates[name].value("reason", std::string());
      break;
    }
  if (!reason.empty()) result["failure"] = reason;
  stages.emplace_back("", Clock::now());
  json stageTimes = json::object();
  std::string stageText;
  for (std::size_t i = 0; i + 1 < stages.size(); ++i) {
    const double s = std::chrono::duration<double>(stages[i + 1].second - stages[i].second).count();
    stageTimes[stages[i].first] = std::round(s * 1000) / 1000;
    char text[32];
    std::snprintf(text, sizeof text, "=%.1fs", s);
    stageText += " " + stages[i].first + text;
  }
  result["stage_wall_s"] = stageTimes;
  log::info("scored ", task.id, ": compiled=", compileOk, " correct=", correct, " speedup=", speedup,
            " held_out_correct=", heldCorrect, " stages:", stageText);
  return result;
}

}  // namespace akad
