#include "daemon/pipeline/validate.h"

#include <fstream>

#include "daemon/aka/wrap_score.h"
#include "daemon/pipeline/files.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace akad {
namespace {

json summary(const json& r) {
  json s = {{"compiled", r.value("compiled", false)},
            {"correct", r.value("correct", false)},
            {"speedup", r.value("speedup", json(nullptr))},
            {"held_out_correct", r.value("held_out_correct", false)},
            {"held_out_speedup", r.value("held_out_speedup", json(nullptr))},
            {"performance_measured", r.value("performance_measured", true)}};
  if (r.contains("failure")) s["failure"] = r["failure"];
  return s;
}

}  // namespace

Result<json> validateTask(const Task& task, const ScoringEnvironment& env, const fs::path& workDir,
                          double minSpeedup) {
  // An imported AgentKernelArena task has no reference solution: baseline and broken only.
  if (task.traits().akaCommands) return aka::validateWrappedTask(task, env, workDir);
  std::error_code ec;
  fs::remove_all(workDir, ec);
  const fs::path solutionTree = workDir / "solution-tree";
  const fs::path brokenTree = workDir / "broken-tree";
  for (const auto* tree : {&solutionTree, &brokenTree})
    if (auto s = copyTree(task.workspaceDir(), *tree); !s) return s.error();
  if (auto s = copyTree(task.solutionDir(), solutionTree); !s) return s.error();
  for (const auto& e : task.editable) {
    // A line that no build of this file accepts: a preprocessor error for C, C++ and HIP; for
    // Python (where '#' starts a comment) a statement that does not parse.
    const bool python = fs::path(e).extension() == ".py";
    std::ofstream f(brokenTree / e, std::ios::app);
    f << (python ? "\nthis line is not Python: broken on purpose by task validation\n"
                 : "\n#error this file was broken on purpose by task validation\n");
  }

  json out = {{"task", task.id}, {"task_hash", task.content_hash}};
  std::vector<std::string> problems;
  // A task without held-out configurations passes on its visible ones: a converted AKA task of
  // whose generated held-out cases the pristine baseline passes none, or that has none.
  auto noHeldOut = [&](const json& r) {
    return task.held_out.empty() || (r.contains("held_out_generated") && r["held_out_generated"]["kept"].empty());
  };
  auto passes = [&](const json& r) { return r["correct"].get<bool>() && (noHeldOut(r) || r["held_out_correct"].get<bool>()); };

  // The baseline needs to pass, not to be timed against itself: correctness gates only.
  ScoringEnvironment correctnessOnly = env;
  correctnessOnly.measure_performance = false;
  auto baseline = scoreCandidate(task, task.workspaceDir(), workDir / "score-baseline", correctnessOnly);
  if (!baseline) return baseline.error();
  out["baseline"] = summary(*baseline);
  if (noHeldOut(*baseline)) out["baseline"].erase("held_out_correct");  // no verdict on configurations it has none of
  if (baseline->contains("held_out_generated")) out["baseline"]["held_out_generated"] = (*baseline)["held_out_generated"];
  if (!passes(*baseline))
    problems.push_back("the baseline does not pass: " + baseline->value("failure", std::string("held-out configurations fail")));

  // A converted AKA task has no reference solution (AKA ships none): baseline and broken only.
  if (!task.traits().imported) {
    auto solution = scoreCandidate(task, solutionTree, workDir / "score-solution", env);
    if (!solution) return solution.error();
    out["solution"] = summary(*solution);
    if (!passes(*solution))
      problems.push_back("the solution does not pass: " +
                         solution->value("failure", std::string("held-out configurations fail")));
    else if ((*solution)["speedup"].get<double>() <= minSpeedup)
      problems.push_back("the solution's speedup " + (*solution)["speedup"].dump() + " is not above " +
                         std::to_string(minSpeedup));
  }

  auto broken = scoreCandidate(task, brokenTree, workDir / "score-broken", correctnessOnly);
  if (!broken) return broken.error();
  out["broken"] = summary(*broken);
  if ((*broken)["compiled"].get<bool>()) problems.push_back("the broken candidate compiled");

  out["ok"] = problems.empty();
  out["problems"] = problems;
  fs::remove_all(workDir, ec);
  return out;
}

}  // namespace akad
