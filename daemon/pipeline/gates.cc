// The gates of one phase as a single runner process checked by akacheck, the phase's cases and
// the reference's data before them; the driven gates are in driven_gates.cc.
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

std::string firstFailure(const json& verdict) {
  for (const auto& c : verdict.value("cases", json::array()))
    if (!c.value("ok", false))
      return c.value("name", std::string("?")) + ": " + c.value("reason", std::string("wrong output"));
  return "wrong output";
}

void applyVerdict(json& result, const json& verdict) {
  result["cases"] = verdict["cases"];
  if (!verdict["ok"].get<bool>()) {
    result["pass"] = false;
    result["reason"] = "wrong output: " + firstFailure(verdict);
  }
}

json gate(bool pass, const std::string& reason) {
  json g = {{"pass", pass}};
  if (!reason.empty()) g["reason"] = reason;
  return g;
}

json baselineFailed(const std::string& why) {
  json g = gate(false, std::string(kBaselineFailedPrefix) + why);
  g["baseline_failed"] = true;
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
  applyVerdict(result, *verdict);
  return result;
}

namespace {

struct ProcessTiming {
  double wall_s = 0;
  double claimed_s = 0;
};

// What the rounds of a runner performance gate collect.
struct RunnerPerf {
  std::map<std::string, std::vector<double>> samples[2];  // [0] baseline, [1] candidate
  std::map<std::string, std::vector<double>> roundMedians[2];  // per configuration, one per round
  json rounds = json::array();
  json gpuStates = json::array();
  bool throttled = false;
  std::vector<double> overheads[2];  // per round: wall time outside the claimed timed calls
};

// One runner process of one round (side 0 the baseline, 1 the candidate): its times go into
// `perf`, and the candidate's outputs of timed calls are checked. A failure is the gate's
// verdict.
std::optional<json> timeRunnerProcess(const GateRunner& g, const fs::path& dir, const Phase& p, int round, int side,
                                      RunnerPerf& perf, ProcessTiming& timing) {
  const Task& task = g.task();
  const std::string plan = p.name + "-perf.json";
  const std::string who = side == 0 ? "baseline" : "candidate";
  const std::string tag = p.name + "-perf-" + who + "-" + std::to_string(round);
  const fs::path out = g.layout().out / tag;
  auto r = g.runRunner(who, dir, "perf", plan, p.name, out, task.limits.performance_s, tag);
  if (!r) return gate(false, r.error().message);
  if (!r->succeeded()) {
    const std::string msg = "the " + who + " runner " + r->describe() + ": " + g.logTail(tag);
    return side == 0 ? baselineFailed(msg) : gate(false, msg);
  }
  timing.wall_s = r->wall_s;
  if (json st = readGpuState(out, perf.throttled); !st.is_null())
    perf.gpuStates.push_back({{"process", tag}, {"state", st}});
  for (const auto& cfg : p.configs) {
    const std::string group = cfg["name"];
    auto t = readTimes(out / (group + ".times.json"), task.timing.samples);
    if (!t) return gate(false, "the " + who + " runner's times: " + t.error().message);
    for (double ns : *t) timing.claimed_s += ns / 1e9;
    auto& dst = perf.samples[side][group];
    dst.insert(dst.end(), t->begin(), t->end());
    perf.roundMedians[side][group].push_back(describeSamples(*t).median);
  }
  if (side == 1) {
    auto verdict = g.runChecker(plan, out, tag + "-verdict");
    if (!verdict) return gate(false, verdict.error().message);
    if (!(*verdict)["ok"].get<bool>())
      return gate(false, "outputs of timed calls are wrong (results cached or reused across calls?): " +
                             firstFailure(*verdict));
  }
  return std::nullopt;
}

// Time outside the timed calls: the candidate's runner does the same untimed work as the
// baseline's, so more than the baseline's worst round (with slack, plus the spread the
// baseline's own rounds show: seconds of interpreter start-up vary from process to process,
// and the check cannot resolve less than that) means work was moved out of the timed window.
std::optional<json> checkTimeOutsideCalls(const RunnerPerf& perf) {
  const auto [bMin, bMax] = std::minmax_element(perf.overheads[0].begin(), perf.overheads[0].end());
  const double limit = *bMax * kOverheadSlackFactor + kOverheadSlackSeconds + (*bMax - *bMin);
  const double cMax = *std::max_element(perf.overheads[1].begin(), perf.overheads[1].end());
  if (cMax <= limit) return std::nullopt;
  json r = gate(false, "the outside clock shows work outside the timed calls: the candidate's runner spent up to " +
                           std::to_string(cMax) + " s outside them, the baseline's at most " + std::to_string(*bMax) +
                           " s (limit " + std::to_string(limit) + " s)");
  r["rounds"] = perf.rounds;
  return r;
}

// The passed gate: per configuration the medians' speedup, and their geometric mean.
json runnerPerfResult(const Phase& p, RunnerPerf& perf) {
  json configs = json::array();
  std::vector<double> speedups;
  std::vector<std::vector<double>> baseRounds, candRounds;
  for (const auto& cfg : p.configs) {
    const std::string group = cfg["name"];
    baseRounds.push_back(perf.roundMedians[0][group]);
    candRounds.push_back(perf.roundMedians[1][group]);
    SampleStats b = describeSamples(perf.samples[0][group]);
    SampleStats c = describeSamples(perf.samples[1][group]);
    const double speedup = b.median / c.median;
    speedups.push_back(speedup);
    configs.push_back({{"name", group}, {"baseline", b.toJson()}, {"candidate", c.toJson()}, {"speedup", speedup}});
  }
  json result = gate(true, "");
  result["configs"] = configs;
  result["speedup"] = geometricMean(speedups);
  if (auto i = speedupInterval(result["speedup"], baseRounds, candRounds)) result["speedup_interval"] = i->toJson();
  result["rounds"] = perf.rounds;
  if (!perf.gpuStates.empty()) {
    result["gpu_states"] = perf.gpuStates;
    result["throttled"] = perf.throttled;
  }
  return result;
}

}  // namespace

// Performance on one phase: baseline and candidate processes alternate (ABBA order) for the
// task's rounds; the candidate's outputs of timed calls are checked; claimed times must be
// accounted for by the outside clock.
json performanceGate(const GateRunner& g, const fs::path& baselineDir, const fs::path& candidateDir,
                     const Phase& p) {
  RunnerPerf perf;
  for (int round = 0; round < g.task().timing.rounds; ++round) {
    ProcessTiming timing[2];
    const int order[2] = {round % 2, 1 - round % 2};
    for (int side : order)
      if (auto failed = timeRunnerProcess(g, side == 0 ? baselineDir : candidateDir, p, round, side, perf, timing[side]))
        return *failed;
    perf.overheads[0].push_back(timing[0].wall_s - timing[0].claimed_s);
    perf.overheads[1].push_back(timing[1].wall_s - timing[1].claimed_s);
    perf.rounds.push_back({{"baseline_wall_s", timing[0].wall_s}, {"baseline_claimed_s", timing[0].claimed_s},
                           {"candidate_wall_s", timing[1].wall_s}, {"candidate_claimed_s", timing[1].claimed_s}});
    if (timing[1].claimed_s > timing[1].wall_s) {
      json r = gate(false, "claimed times the outside clock cannot account for: the candidate process ran " +
                               std::to_string(timing[1].wall_s) + " s and claims " +
                               std::to_string(timing[1].claimed_s) + " s of timed calls");
      r["rounds"] = perf.rounds;
      return r;
    }
  }
  if (auto failed = checkTimeOutsideCalls(perf)) return *failed;
  return runnerPerfResult(p, perf);
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
