#include "daemon/pipeline/report.h"

#include <sstream>

#include "daemon/pipeline/stats.h"

using nlohmann::json;

namespace akad {
namespace {

bool flag(const json& r, const char* key) {
  return r.is_object() && r.contains(key) && r[key].is_boolean() && r[key].get<bool>();
}
double number(const json& r, const char* key) {
  return (r.is_object() && r.contains(key) && r[key].is_number()) ? r[key].get<double>() : 0.0;
}

std::string csvField(std::string s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) out += (c == '"') ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

// Whether the attempt's task had held-out configurations to score. Results from before
// `held_out_available` say it through their gates: a compiled candidate with any has held-out
// gates, and a task with none has at most the failed one that says so (score.cc).
bool heldOutAvailable(const json& r) {
  if (!r.is_object()) return true;
  if (r.contains("held_out_available")) return flag(r, "held_out_available");
  if (!flag(r, "compiled") || !r.contains("gates") || !r["gates"].is_object()) return true;
  for (const auto& [name, g] : r["gates"].items()) {
    if (name.rfind("held_out_", 0) != 0) continue;
    if (name != "held_out_correctness" || !g.is_object() || g.value("reason", std::string()) != "the task has no held-out configurations")
      return true;
  }
  return false;
}

// One attempt's row of the report: its verdicts, AKA's own figures for a wrapped task, how far
// its speedup stands out from its rounds' noise, whether a shared GPU timed it, and its failure.
json attemptRow(const AttemptOutcome& a, const json& r, bool ok, double s, bool heldOut) {
  json row = {{"attempt", a.attempt_id}, {"task", a.task_id}, {"state", a.state},
              {"compiled", flag(r, "compiled")}, {"correct", ok},
              {"speedup", ok ? json(s) : json(nullptr)},
              {"held_out_correct", flag(r, "held_out_correct")},
              {"held_out_speedup", flag(r, "held_out_correct") ? r.value("held_out_speedup", json(nullptr)) : json(nullptr)},
              {"score", number(r, "score")}};
  if (!heldOut) row["held_out_available"] = false;
  // A wrapped AgentKernelArena task's result carries AKA's own figures beside akad's (docs/aka.md).
  if (r.is_object() && r.contains("mode")) row["mode"] = r["mode"];
  if (r.is_object() && r.contains("aka") && r["aka"].is_object()) {
    row["aka_speedup"] = r["aka"].value("speedup", json(nullptr));
    row["aka_score"] = r["aka"].value("score", json(nullptr));
  }
  // stats.h, SpeedupInterval.
  if (ok && r.contains("speedup_interval") && r["speedup_interval"].is_object()) {
    const json& i = r["speedup_interval"];
    row["speedup_interval"] = {number(i, "low"), number(i, "high")};
    row["within_noise"] = flag(i, "within_noise");
  }
  if (flag(r, "gpu_shared")) row["gpu_shared"] = true;
  if (r.is_object() && r.contains("failure")) row["failure"] = r["failure"];
  else if (!a.error.empty()) row["failure"] = a.error;
  return row;
}

}  // namespace

json runReport(const std::vector<AttemptOutcome>& attempts) {
  const double n = static_cast<double>(attempts.size());
  int compiled = 0, correct = 0, heldBoth = 0, finished = 0, shared = 0;
  int faster = 0, slower = 0;  // correct attempts whose speedup interval lies above 1, below 1
  int withoutHeldOut = 0;      // correct attempts of tasks with no held-out configurations
  std::vector<double> speedups, heldSpeedups, visibleOfHeld;
  const std::vector<double> ps = {0, 1, 1.5, 2};
  std::vector<int> fast(ps.size(), 0);
  double scoreSum = 0;
  json perTask = json::array();
  for (const auto& a : attempts) {
    const json& r = a.state == "scored" ? a.result : json();
    if (a.state == "scored" || a.state == "failed" || a.state == "cancelled") ++finished;
    const bool c = flag(r, "compiled");
    const bool ok = flag(r, "correct");
    const double s = number(r, "speedup");
    compiled += c;
    correct += ok;
    scoreSum += number(r, "score");
    // A task with no held-out configurations (an imported AKA task without held-out shapes)
    // has nothing to retain: not a held-out failure.
    const bool heldOut = heldOutAvailable(r);
    if (ok && !heldOut) ++withoutHeldOut;
    if (ok) {
      speedups.push_back(s);
      for (std::size_t i = 0; i < ps.size(); ++i) fast[i] += s > ps[i];
      if (flag(r, "held_out_correct")) {
        ++heldBoth;
        // Correct on held-out configurations the baseline could not be timed on: no speedup.
        if (r.contains("held_out_speedup") && r["held_out_speedup"].is_number()) {
          heldSpeedups.push_back(number(r, "held_out_speedup"));
          visibleOfHeld.push_back(s);
        }
      }
    }
    json row = attemptRow(a, r, ok, s, heldOut);
    if (row.contains("within_noise")) {
      faster += row["speedup_interval"][0].get<double>() > 1;
      slower += row["speedup_interval"][1].get<double>() < 1;
    }
    shared += row.contains("gpu_shared");
    perTask.push_back(row);
  }
  auto rate = [&](double k) { return n > 0 ? k / n : 0.0; };
  json fastP = json::object();
  for (std::size_t i = 0; i < ps.size(); ++i) {
    std::ostringstream key;
    key << "fast_" << ps[i];
    fastP[key.str()] = rate(fast[i]);
  }
  json report = {
      {"attempts", attempts.size()},
      {"finished", finished},
      {"compile_rate", rate(compiled)},
      {"correctness_rate", rate(correct)},
      {"geomean_speedup", speedups.empty() ? json(nullptr) : json(geometricMean(speedups))},
      {"fast_p", fastP},
      {"faster_beyond_noise", rate(faster)},
      {"slower_beyond_noise", rate(slower)},
      {"held_out_correctness_retention",
       correct > withoutHeldOut ? json(static_cast<double>(heldBoth) / (correct - withoutHeldOut)) : json(nullptr)},
      {"correct_without_held_out", withoutHeldOut},
      {"held_out_speedup_retention",
       heldSpeedups.empty() ? json(nullptr) : json(geometricMean(heldSpeedups) / geometricMean(visibleOfHeld))},
      {"mean_arena_score", n > 0 ? scoreSum / n : 0.0},
      {"timed_on_shared_gpu", shared},
      {"per_attempt", perTask}};
  return report;
}

std::string runReportCsv(const std::vector<AttemptOutcome>& attempts) {
  std::ostringstream os;
  os << "attempt,task,state,compiled,correct,speedup,held_out_correct,held_out_speedup,score,failure\n";
  const json report = runReport(attempts);  // kept alive: the loop walks into it
  for (const auto& row : report["per_attempt"]) {
    auto num = [](const json& v) { return v.is_number() ? std::to_string(v.get<double>()) : std::string(); };
    os << csvField(row["attempt"]) << ',' << csvField(row["task"]) << ',' << row["state"].get<std::string>() << ','
       << row["compiled"] << ',' << row["correct"] << ',' << num(row["speedup"]) << ','
       << row["held_out_correct"] << ',' << num(row["held_out_speedup"]) << ',' << num(row["score"]) << ','
       << csvField(row.value("failure", std::string())) << '\n';
  }
  return os.str();
}

}  // namespace akad
