// Wrap mode's performance gate (wrap_runner.h): ABBA rounds of the pristine baseline and the
// candidate, each timed by AKA's own harness from its report; for a task whose pristine
// workspace has no kernel (AKA's torch2hip tasks), the candidate's runs only, against the
// PyTorch original that each run times beside it.
#include <algorithm>
#include <cmath>
#include <map>
#include <regex>

#include "common/quantile.h"
#include "daemon/aka/wrap_runner.h"
#include "daemon/aka/wrap_score.h"
#include "daemon/pipeline/files.h"
#include "daemon/pipeline/stats.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace akad::aka {
namespace {

constexpr std::size_t kMaxReportBytes = 4 << 20;

std::string joinShell(const std::vector<std::string>& cmds) {
  std::string s;
  for (const auto& c : cmds) s += (s.empty() ? "" : " && ") + std::string("( ") + c + " )";
  return s;
}

// AKA's report files are the harness's own output: removed before each run so a stale one is
// never read as this run's (src/performance.py clear_performance_report_files).
void clearReports(const fs::path& ws) {
  std::error_code ec;
  for (const char* rel : {"build/performance_report.json", "performance_report.json", "build/perf_report.json",
                          "perf_report.json", "perf/benchmark_results.json"})
    fs::remove(ws / rel, ec);
}

struct PerfRun {
  CaseTimes times;       // akad's side of the comparison
  CaseTimes akaBaseline;  // torch2hip: the PyTorch original's times (ori_time)
  double wall_s = 0;     // the outside clock
};

Result<PerfRun> perfRun(const WrapRunner& w, const Side& side, const WrapSpec& spec, double wallS, const std::string& logName,
                        std::string& why) {
  clearReports(side.dir);
  auto r = w.run(side, joinShell(spec.performance), wallS, logName);
  if (!r) return r.error();
  if (!r->outcome.succeeded()) {
    why = side.who + " performance run " + r->outcome.describe() + ": " + w.tail(logName);
    return PerfRun{};
  }
  PerfRun p;
  p.wall_s = r->outcome.wall_s;
  const fs::path report = findPerformanceReport(side.dir);
  if (!report.empty()) {
    auto text = readFileLimited(report, kMaxReportBytes);
    if (!text) {
      why = side.who + ": " + text.error().message;
      return p;
    }
    auto times = parsePerformanceReport(*text, spec.task_type, false);
    if (!times) {
      why = side.who + ": " + times.error().message;
      return p;
    }
    p.times = *times;
    if (spec.task_type == "torch2hip")
      if (auto orig = parsePerformanceReport(*text, spec.task_type, true)) p.akaBaseline = *orig;
  } else {
    // Harnesses that only print (AKA's GEAK ones): their canonical line, as AKA reads it first.
    if (auto ms = geakLatencyMs(r->output)) p.times["test_case_0"] = *ms;
  }
  if (p.times.empty()) why = side.who + ": the performance command left no report with kernel times";
  return p;
}

}  // namespace

Result<json> performanceGate(const WrapRunner& w, const Side* base, const Side& cand, const WrapSpec& spec,
                             const Task& task, double& speedup, double& akaSpeedup) {
  std::map<std::string, std::vector<double>> baseTimes, candTimes, akaBase;
  std::vector<double> baseWall, candWall;
  const int rounds = std::max(1, task.timing.rounds);
  for (int round = 0; round < rounds; ++round) {
    const bool baseFirst = round % 2 == 0;
    for (int k = 0; k < 2; ++k) {
      const bool isBase = (k == 0) == baseFirst;
      if (isBase && base == nullptr) continue;  // no pristine kernel: the candidate's runs time the original
      const Side& side = isBase ? *base : cand;
      std::string why;
      auto p = perfRun(w, side, spec, task.limits.performance_s, "perf-" + side.who + "-r" + std::to_string(round), why);
      if (!p) return p.error();
      if (!why.empty()) return wrapGate(false, why);
      for (const auto& [id, t] : p->times) (isBase ? baseTimes : candTimes)[id].push_back(t);
      for (const auto& [id, t] : p->akaBaseline) akaBase[id].push_back(t);
      (isBase ? baseWall : candWall).push_back(p->wall_s);
    }
  }
  if (base == nullptr) {
    for (const auto& [id, _] : candTimes)
      if (!akaBase.count(id))
        return wrapGate(false, "test case " + id + " has no ori_time in the performance report: the PyTorch original's "
                               "time is the baseline of a task without a pristine kernel");
    baseTimes = akaBase;
  }
  std::vector<std::string> baseIds, candIds;
  for (const auto& [id, _] : baseTimes) baseIds.push_back(id);
  for (const auto& [id, _] : candTimes) candIds.push_back(id);
  if (baseIds != candIds) return wrapGate(false, "the candidate's performance report names other test cases than the baseline's");
  json cases = json::array();
  double logSum = 0, akaSum = 0;
  int n = 0;
  std::vector<std::vector<double>> baseRounds, candRounds;  // one time per run: a run is a round's side
  for (const auto& id : baseIds) {
    baseRounds.push_back(baseTimes[id]);
    candRounds.push_back(candTimes[id]);
    const double b = median(baseTimes[id]), c = median(candTimes[id]);
    if (!(b > 0) || !(c > 0)) return wrapGate(false, "test case " + id + " has no positive time (baseline " +
                                                     std::to_string(b) + " ms, candidate " + std::to_string(c) + " ms)");
    // AKA's own speedup for this case: its baseline (torch2hip: the PyTorch original).
    const double akaB = akaBase.count(id) ? median(akaBase[id]) : b;
    cases.push_back({{"case", id}, {"baseline_ms", baseTimes[id]}, {"candidate_ms", candTimes[id]},
                     {"speedup", b / c}, {"aka_speedup", akaB / c}});
    logSum += std::log(b / c);
    akaSum += akaB / c;
    ++n;
  }
  speedup = std::exp(logSum / n);
  akaSpeedup = akaSum / n;  // AKA averages per-case speedups (src/testcases.py)
  json g = wrapGate(true, "");
  g["speedup"] = speedup;
  if (auto i = speedupInterval(speedup, baseRounds, candRounds)) g["speedup_interval"] = i->toJson();
  g["rounds"] = rounds;
  g["order"] = base != nullptr ? "ABBA" : "candidate only: each run times the PyTorch original (ori_time) beside the kernel";
  g["cases"] = cases;
  g["timing_source"] = "AKA's harness, in the candidate's process";
  g["outside_wall_s"] = {{"baseline", baseWall}, {"candidate", candWall}};
  g["outside_speedup"] = base != nullptr ? json(median(baseWall) / std::max(1e-9, median(candWall))) : json(nullptr);
  return g;
}

}  // namespace akad::aka
