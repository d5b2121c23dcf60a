#include "daemon/pipeline/score_result.h"

#include <cmath>
#include <cstdio>

#include "daemon/pipeline/gates.h"
#include "daemon/pipeline/score.h"

using nlohmann::json;

namespace akad {

namespace {

// The first failed gate in whose reason `lineOf` finds a line, as "gate: line" (at most 400
// characters of it); empty when none does.
std::string firstFailedGateLine(const json& result, std::string (*lineOf)(const std::string& reason)) {
  const json gates = result.value("gates", json::object());
  if (!gates.is_object()) return "";
  for (const auto& [name, g] : gates.items()) {
    if (!g.is_object() || g.value("pass", true) || !g.contains("reason") || !g["reason"].is_string()) continue;
    if (const std::string line = lineOf(g["reason"].get<std::string>()); !line.empty())
      return name + ": " + line.substr(0, 400);
  }
  return "";
}

// The line of `text` that holds position `at`.
std::string lineAt(const std::string& text, std::size_t at) {
  const auto newline = text.rfind('\n', at), end = text.find('\n', at);
  const std::size_t from = newline == std::string::npos ? 0 : newline + 1;
  return text.substr(from, end == std::string::npos ? std::string::npos : end - from);
}

}  // namespace

std::string gpuOutOfMemoryLine(const json& result) {
  static const char* const kWords[] = {"CUDA out of memory",        "OutOfMemoryError",  "CUDA_ERROR_OUT_OF_MEMORY",
                                       "cudaErrorMemoryAllocation", "hipErrorOutOfMemory", "HIP out of memory"};
  return firstFailedGateLine(result, [](const std::string& reason) -> std::string {
    for (const char* word : kWords)
      if (const auto at = reason.find(word); at != std::string::npos) return lineAt(reason, at);
    return std::string();
  });
}

std::string sharedGpuRetryReason(const json& result) {
  if (std::string oom = gpuOutOfMemoryLine(result); !oom.empty()) return oom;
  return firstFailedGateLine(result, [](const std::string& reason) -> std::string {
    // The scorer's own words only, at the start (a baseline's failure: after baselineFailed's
    // prefix): the same words later on are the output of a program, which may be the candidate's.
    static const std::string kCrash = "the driver killed by signal";
    const std::size_t at = reason.rfind(kBaselineFailedPrefix, 0) == 0 ? kBaselineFailedPrefix.size() : 0;
    if (reason.compare(at, kCrash.size(), kCrash) != 0) return std::string();
    return reason.substr(at, reason.find('\n', at) - at);  // to the line's end (npos: the text's)
  });
}

double arenaScore(bool compiled, bool correct, double speedup) {
  if (!compiled) return 0;
  if (!correct) return 20;
  return 120 + 100 * speedup;
}

// A converted AgentKernelArena task's result says so and carries AKA's own way of summing up
// beside akad's (docs/aka.md): the mean of the per-case speedups, and AKA's score of it.
void addConvertFigures(json& result) {
  result["mode"] = "convert";
  const json& perf = result["gates"].value("performance", json::object());
  double sum = 0;
  std::size_t n = 0;
  for (const json& c : perf.value("configs", json::array()))
    if (c.contains("speedup") && c["speedup"].is_number()) sum += c["speedup"].get<double>(), ++n;
  const bool measured = result.value("correct", false) && n > 0;
  const double mean = n > 0 ? sum / static_cast<double>(n) : 0;
  result["aka"] = {{"speedup", measured ? json(mean) : json(nullptr)},
                   {"score", arenaScore(result.value("compiled", false), result.value("correct", false), measured ? mean : 0)}};
}

std::pair<json, std::string> StageClock::finish() {
  stages_.emplace_back("", Clock::now());
  json stageTimes = json::object();
  std::string stageText;
  for (std::size_t i = 0; i + 1 < stages_.size(); ++i) {
    const double s = std::chrono::duration<double>(stages_[i + 1].second - stages_[i].second).count();
    stageTimes[stages_[i].first] = std::round(s * 1000) / 1000;
    char text[32];
    std::snprintf(text, sizeof text, "=%.1fs", s);
    stageText += " " + stages_[i].first + text;
  }
  return {stageTimes, stageText};
}

void addSpeedupInterval(json& result, const json& gates) {
  if (!result.contains("speedup") || !result["speedup"].is_number() || !gates.contains("performance")) return;
  const json& perf = gates["performance"];
  if (perf.is_object() && perf.contains("speedup_interval")) result["speedup_interval"] = perf["speedup_interval"];
}

void assembleResult(json& result, const json& gates, const GateOutcome& o, bool measuredPerformance) {
  result["gates"] = gates;
  result["compiled"] = o.compiled;
  result["correct"] = o.correct;
  result["speedup"] = o.correct && o.speedup ? json(*o.speedup) : json(nullptr);
  result["held_out_correct"] = o.heldOutCorrect;
  result["held_out_speedup"] = o.heldOutCorrect && o.heldOutSpeedup ? json(*o.heldOutSpeedup) : json(nullptr);
  result["score"] = arenaScore(o.compiled, o.correct, o.speedup.value_or(0));
  if (!measuredPerformance) {
    result["performance_measured"] = false;
    result["speedup"] = nullptr;
    result["held_out_speedup"] = nullptr;
    result["score"] = nullptr;
  }
  addSpeedupInterval(result, gates);
  std::string reason;
  for (const char* name : {"compile", "correctness", "performance"})
    if (gates.contains(name) && !gates[name]["pass"].get<bool>()) {
      reason = std::string(name) + ": " + gates[name].value("reason", std::string());
      break;
    }
  if (!reason.empty()) result["failure"] = reason;
}

}  // namespace akad
