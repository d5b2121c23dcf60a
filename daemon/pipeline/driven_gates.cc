// The driven gates (docs/scoring.md, "Driver and worker"): the trusted driver holds the clock,
// the inputs and the choice of outputs to verify; the candidate's worker only runs its kernel.
#include <algorithm>
#include <cmath>
#include <map>

#include "daemon/pipeline/files.h"
#include "daemon/pipeline/gates.h"
#include "daemon/pipeline/stats.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace akad {
namespace {

// Why a driven run did not finish, in words a user can act on; empty when it did. Whatever the
// driver reports about a failed worker is the candidate's failure; a driver that failed on its
// own (exit 1, a task problem, or a crash) is told apart, and so is one that ran out of time
// waiting on its worker, whose own message would only say that its channel hung up.
std::string drivenFailure(const GateRunner& g, const DrivenRun& r, const std::string& who, const std::string& tag) {
  if (r.driverFailedByItself()) return "the driver " + r.driver.describe() + ": " + g.logTail(tag + "-driver");
  // The worker's own "peer hung up" would hide why: the driver's clock ran out waiting on it.
  if (r.driverOutwaited())
    return "the " + who + " did not finish its calls in time (the driver, waiting on it, was " + r.driver.describe() +
           "): " + g.logTail(tag + "-driver");
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

// The kept calls' data once akacheck has judged it: whole outputs of large cases come to GiBs,
// of no use after the verdict, and a validation scores many tasks side by side on one disk.
void dropJudgedData(const fs::path& out) {
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(out, ec))
    if (e.path().extension() == ".akt") fs::remove(e.path(), ec);
}

}  // namespace

json drivenCorrectnessGate(const GateRunner& g, const fs::path& trustedDir, const fs::path& candidateDir, const Phase& p,
                           const std::string& who) {
  const std::string tag = p.name + "-check-run";
  const fs::path out = g.layout().out / (p.name + "-check");
  auto r = g.runDriven(who, candidateDir, trustedDir, "check", p.name + "-check.json", out,
                       g.task().limits.correctness_s, tag);
  if (!r) return gate(false, r.error().message);
  if (std::string why = drivenFailure(g, *r, who, tag); !why.empty()) {
    json failed = gate(false, why);
    failed["run"] = r->worker.result;
    return failed;
  }
  auto verdict = g.checkKeptCalls(out, p.name + "-check-verdict");
  dropJudgedData(out);
  if (!verdict) return gate(false, verdict.error().message);
  json result = gate(true, "");
  result["run"] = r->worker.result;
  applyVerdict(result, *verdict);
  return result;
}

namespace {

// The share of timed calls whose outputs are verified, drawn per call after it finished: a
// candidate that skips or fakes 10% of a configuration's `calls` timed calls goes unseen with
// probability (1 - keep)^(calls / 10), at most 1%.
double keepProbability(int calls) {
  const double faked = std::ceil(0.1 * std::max(calls, 1));
  return std::min(1.0, 1.0 - std::pow(0.01, 1.0 / faked));
}

// Empty calls (the channel and the copies, no kernel) measure the driver's fixed overhead per
// call. Only the trusted baseline's are used, so a candidate cannot make the calibration slow
// to have more subtracted from its own times.
int emptyCalls(const TaskTiming& t) { return std::max(5, t.samples / 4); }

}  // namespace

// Both sides get the same plan, so that what the driver does between two timed calls (the
// empty calls, the copies of kept outputs) is alike on both and leaves the caches alike; only
// the candidate's kept outputs are verified.
json drivenPerfPlan(const Phase& p, const TaskTiming& t, bool baseline) {
  json cases = json::array(), groups = json::array();
  const double keep = keepProbability(t.samples * t.rounds);
  for (const auto& cfg : p.configs) {
    const std::string name = cfg["name"];
    cases.push_back({{"name", name}, {"config", cfg}});
    groups.push_back({{"name", name}, {"cases", {name}}, {"keep", keep}, {"empty", emptyCalls(t)}, {"verify", !baseline}});
  }
  return {{"cases", cases},
          {"perf",
           {{"warmup", t.warmup}, {"samples", t.samples}, {"flush_bytes", t.flush_bytes}, {"window", t.window},
            {"groups", groups}}}};
}

namespace {

struct DrivenTimes {
  std::vector<double> samples, empty, inproc;
  std::vector<std::size_t> roundStarts;  // where each round's samples begin, in round order
  int kept = 0;
};

// A round of one side whose median is more than this factor over the side's fastest round was
// disturbed (a neighbour's burst of work in its window; a side's rounds run the same code on
// fresh inputs).
constexpr double kDisturbedRound = 1.2;

constexpr int64_t kMaxWindowCalls = 1024;

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
    // GPU drivers time windows of several calls and write one sample (the time per call) per
    // window (docs/scoring.md "GPU harnesses"); the cpp driver one per call.
    const json& wc = found->value("window_calls", json(1));
    if (!wc.is_number_integer() || wc.get<int64_t>() < 1 || wc.get<int64_t>() > kMaxWindowCalls)
      return Error{file.string() + ": window_calls of " + name + " is not a count from 1 to " +
                   std::to_string(kMaxWindowCalls)};
    const int64_t perWindow = wc.get<int64_t>();
    const int64_t expected = (samples + perWindow - 1) / perWindow;
    const std::size_t before = t.samples.size();
    if (auto s = append("samples_ns", t.samples); !s) return s;
    if (auto s = append("empty_ns", t.empty); !s) return s;
    if (auto s = append("inproc_ns", t.inproc); !s) return s;
    if (static_cast<int64_t>(t.samples.size() - before) != expected)
      return Error{file.string() + ": expected " + std::to_string(expected) + " samples (" + std::to_string(samples) +
                   " timed calls, " + std::to_string(perWindow) + " to a window) for " + name};
    t.roundStarts.push_back(before);
    t.kept += found->value("kept", 0);
  }
  return {};
}

// The driver's fixed cost per call, from the baseline's empty calls, and the resolution (their
// spread): a net time under it cannot be told from nothing and is counted as the resolution,
// so no speedup rests on noise.
struct Calibration {
  double overhead = 0, resolution = 0;
  explicit Calibration(const DrivenTimes& base) {
    const SampleStats empty = describeSamples(base.empty);
    overhead = empty.median;
    resolution = std::max(empty.iqr(), 1000.0);
  }
  // Samples [from, to) less the overhead; `below` is set if any was under the resolution.
  std::vector<double> net(const std::vector<double>& raw, std::size_t from, std::size_t to, bool& below) const {
    std::vector<double> v;
    for (std::size_t i = from; i < to && i < raw.size(); ++i) {
      const double n = raw[i] - overhead;
      if (n < resolution) below = true;
      v.push_back(std::max(n, resolution));
    }
    return v;
  }
};

// Each round's median of net times, in round order.
std::vector<double> netRoundMedians(const DrivenTimes& t, const Calibration& cal) {
  std::vector<double> out;
  bool below = false;
  for (std::size_t r = 0; r < t.roundStarts.size(); ++r) {
    const std::size_t to = r + 1 < t.roundStarts.size() ? t.roundStarts[r + 1] : t.samples.size();
    out.push_back(describeSamples(cal.net(t.samples, t.roundStarts[r], to, below)).median);
  }
  return out;
}

// Per configuration: the driver's times less its calibrated overhead (Calibration).
json drivenConfigResult(const std::string& name, const DrivenTimes& base, const DrivenTimes& cand, double& speedup) {
  const Calibration cal(base);
  const double overhead = cal.overhead, resolution = cal.resolution;
  bool baselineBelow = false, belowResolution = false;
  const SampleStats b = describeSamples(cal.net(base.samples, 0, base.samples.size(), baselineBelow));
  const SampleStats c = describeSamples(cal.net(cand.samples, 0, cand.samples.size(), belowResolution));
  speedup = b.median / c.median;
  json r = {{"name", name},
            {"baseline", b.toJson()},
            {"candidate", c.toJson()},
            {"speedup", speedup},
            {"overhead_ns", overhead},
            {"resolution_ns", resolution},
            {"raw_median_ns", {{"baseline", describeSamples(base.samples).median},
                               {"candidate", describeSamples(cand.samples).median}}},
            {"verified_calls", cand.kept},
            {"round_medians_ns", {{"baseline", netRoundMedians(base, cal)}, {"candidate", netRoundMedians(cand, cal)}}}};
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

// One ABBA round of the performance gate: both sides timed in the round's order, their times
// added to `times`; a failure's gate, or null.
json timeRound(const GateRunner& g, const fs::path& trustedDir, const fs::path& candidateDir, const Phase& p, int round,
               std::map<std::string, DrivenTimes> (&times)[2], json& rounds) {
  const Task& task = g.task();
  const int order[2] = {round % 2, 1 - round % 2};
  json roundInfo = json::object();
  for (int side : order) {
    const std::string who = side == 0 ? "baseline" : "candidate";
    const std::string tag = p.name + "-perf-" + who + "-" + std::to_string(round);
    const fs::path out = g.layout().out / tag;
    auto r = g.runDriven(who, side == 0 ? trustedDir : candidateDir, trustedDir, "perf", p.name + "-perf-" + who + ".json",
                         out, task.limits.performance_s, tag);
    if (!r) return gate(false, r.error().message);
    if (std::string why = drivenFailure(g, *r, who, tag); !why.empty())
      return side == 0 ? baselineFailed(why) : gate(false, why);
    roundInfo[who + "_wall_s"] = r->worker.wall_s;
    if (auto s = readDriverReport(out / "report.json", p, task.timing.samples, times[side]); !s)
      return gate(false, "the driver's report: " + s.error().message);
    if (side == 1) {
      auto verdict = g.checkKeptCalls(out, tag + "-verdict");
      dropJudgedData(out);
      if (!verdict) return gate(false, verdict.error().message);
      if (!(*verdict)["ok"].get<bool>())
        return gate(false, "outputs of timed calls are wrong (skipped, deferred, cached or replayed work?): " +
                               firstFailure(*verdict));
    }
  }
  rounds.push_back(roundInfo);
  return nullptr;
}

// On net times: a configuration under the resolution is noise either way, and counted as the
// resolution.
bool quietRoundsHoldEveryMedian(const std::map<std::string, DrivenTimes> (&times)[2]) {
  for (const auto& [name, base] : times[0]) {
    const Calibration cal(base);
    if (!quietRoundsHoldTheMedian(netRoundMedians(base, cal), kDisturbedRound)) return false;
    const auto cand = times[1].find(name);
    if (cand != times[1].end() && !quietRoundsHoldTheMedian(netRoundMedians(cand->second, cal), kDisturbedRound)) return false;
  }
  return true;
}

}  // namespace

json drivenPerformanceGate(const GateRunner& g, const fs::path& trustedDir, const fs::path& candidateDir, const Phase& p) {
  const Task& task = g.task();
  std::map<std::string, DrivenTimes> times[2];  // [0] baseline, [1] candidate
  json rounds = json::array();
  int round = 0;
  for (; round < task.timing.rounds; ++round)
    if (json failed = timeRound(g, trustedDir, candidateDir, p, round, times, rounds); !failed.is_null()) return failed;
  // Disturbed rounds that are not a minority on one side would move its pooled median: one
  // more pair of rounds (one of each order), once.
  int extra = 0;
  if (!quietRoundsHoldEveryMedian(times))
    for (; extra < 2; ++extra, ++round)
      if (json failed = timeRound(g, trustedDir, candidateDir, p, round, times, rounds); !failed.is_null()) return failed;
  json configs = json::array();
  std::vector<double> speedups;
  std::vector<std::vector<double>> baseRounds, candRounds;
  for (const auto& cfg : p.configs) {
    const std::string name = cfg["name"];
    double speedup = 0;
    configs.push_back(drivenConfigResult(name, times[0][name], times[1][name], speedup));
    speedups.push_back(speedup);
    const json& roundMedians = configs.back()["round_medians_ns"];
    baseRounds.push_back(roundMedians["baseline"].get<std::vector<double>>());
    candRounds.push_back(roundMedians["candidate"].get<std::vector<double>>());
  }
  json result = gate(true, "");
  result["configs"] = configs;
  result["speedup"] = geometricMean(speedups);
  if (auto i = speedupInterval(result["speedup"], baseRounds, candRounds)) result["speedup_interval"] = i->toJson();
  result["rounds"] = rounds;
  result["extra_rounds"] = extra;
  result["timing"] = "driver";
  if (task.gpu) result["window"] = task.timing.window;  // how the GPU driver ran its windows
  result["keep_probability"] = keepProbability(task.timing.samples * task.timing.rounds);
  return result;
}

}  // namespace akad
