#include "daemon/pipeline/gates.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>

#include "common/log.h"
#include "daemon/pipeline/files.h"
#include "daemon/pipeline/stats.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace akad {
namespace {

std::string firstFailure(const json& verdict) {
  for (const auto& c : verdict.value("cases", json::array()))
    if (!c.value("ok", false))
      return c.value("name", std::string("?")) + ": " + c.value("reason", std::string("wrong output"));
  return "wrong output";
}

}  // namespace

json gate(bool pass, const std::string& reason) {
  json g = {{"pass", pass}};
  if (!reason.empty()) g["reason"] = reason;
  return g;
}

namespace {

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

}  // namespace

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

namespace {

struct ProcessTiming {
  double wall_s = 0;
  double claimed_s = 0;
};

}  // namespace

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

namespace {

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

}  // namespace

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

namespace {

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

}  // namespace

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

namespace {

struct DrivenTimes {
  std::vector<double> samples, empty, inproc;
  int kept = 0;
};

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

}  // namespace

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

}  // namespace akad
