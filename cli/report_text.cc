#include "cli/report_text.h"

#include <cstdio>
#include <sstream>

#include "cli/json_text.h"

using nlohmann::json;

namespace akad::cli {
namespace {

// AgentKernelArena's own speedup and score of an imported task's attempt, beside akad's.
std::string akaFigures(const json& a) {
  if (!a.contains("aka_score") && !a.contains("aka_speedup")) return "-";
  return fmt(a.value("aka_speedup", json(nullptr)), "%.2fx") + "/" + fmt(a.value("aka_score", json(nullptr)), "%.0f");
}

}  // namespace

std::string reportText(const json& result) {
  std::ostringstream out;
  const json& r = result.at("report");
  const json& run = result.at("run");
  out << "run " << str(run, "id") << " (" << str(run, "state") << ")"
      << (str(run, "label").empty() ? "" : "  " + str(run, "label")) << "\n\n";
  bool aka = false;
  for (const json& a : r.at("per_attempt")) aka = aka || a.contains("aka_score") || a.contains("aka_speedup");
  char line[1024];
  std::snprintf(line, sizeof line, "  %-9s %-24s %-9s %-8s %-8s %-9s %-9s %-8s %s%s\n", "ATTEMPT", "TASK", "STATE", "COMPILED",
                "CORRECT", "SPEEDUP", "HELD-OUT", "SCORE", aka ? "AKA(SPEEDUP/SCORE) " : "", "WHY");
  out << line;
  for (const json& a : r.at("per_attempt")) {
    std::string held = a.value("held_out_correct", false) ? fmt(a["held_out_speedup"], "%.2fx")
                       : a.value("held_out_available", true)  ? "fail"
                                                              : "none";
    std::string why = a.value("failure", std::string());
    if (why.size() > 70) why = why.substr(0, 67) + "...";
    char akaColumn[64] = "";
    if (aka) std::snprintf(akaColumn, sizeof akaColumn, "%-18s ", akaFigures(a).c_str());
    const std::string speedup = fmt(a["speedup"], "%.2fx") + (a.value("within_noise", false) ? "~" : "") +
                                (a.value("gpu_shared", false) ? "*" : "");
    std::snprintf(line, sizeof line, "  %-9s %-24s %-9s %-8s %-8s %-9s %-9s %-8s %s%s\n", str(a, "attempt").c_str(),
                  str(a, "task").c_str(), str(a, "state").c_str(), a.value("compiled", false) ? "yes" : "no",
                  a.value("correct", false) ? "yes" : "no", speedup.c_str(), held.c_str(), fmt(a["score"], "%.1f").c_str(),
                  akaColumn, why.c_str());
    out << line;
  }
  const json& f = r.at("fast_p");
  out << "\n  attempts                   " << r.value("attempts", 0) << "\n"
      << "  compile rate               " << percent(r["compile_rate"]) << "\n"
      << "  correctness rate           " << percent(r["correctness_rate"]) << "\n"
      << "  geomean speedup (correct)  " << fmt(r["geomean_speedup"], "%.3fx") << "\n"
      << "  fast_0 / 1 / 1.5 / 2       " << percent(f["fast_0"]) << " / " << percent(f["fast_1"]) << " / "
      << percent(f["fast_1.5"]) << " / " << percent(f["fast_2"]) << "\n"
      << "  faster / slower than noise " << percent(r.value("faster_beyond_noise", json(nullptr))) << " / "
      << percent(r.value("slower_beyond_noise", json(nullptr))) << "   (~ a speedup within its rounds' noise)\n"
      << "  held-out correctness kept  " << percent(r["held_out_correctness_retention"])
      << (r.value("correct_without_held_out", 0) > 0
              ? "   (of the correct attempts with held-out configurations; " +
                    std::to_string(r.value("correct_without_held_out", 0)) + " had none)"
              : std::string())
      << "\n"
      << "  held-out speedup kept      " << fmt(r["held_out_speedup_retention"], "%.3f") << "\n"
      << "  mean arena score           " << fmt(r["mean_arena_score"], "%.1f") << "\n";
  if (r.value("timed_on_shared_gpu", 0) > 0)
    out << "  * timed on a shared GPU    " << r.value("timed_on_shared_gpu", 0)
        << " attempts (run option gpu_share): their speedups are not comparable with exclusive runs\n";
  return out.str();
}

}  // namespace akad::cli
