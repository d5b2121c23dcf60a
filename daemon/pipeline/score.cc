#include "daemon/pipeline/score.h"

#include "common/log.h"
#include "common/time_text.h"
#include "daemon/aka/build_cache.h"
#include "daemon/aka/convert_held_out.h"
#include "daemon/aka/held_out.h"
#include "daemon/aka/wrap_score.h"
#include "daemon/pipeline/files.h"
#include "daemon/pipeline/gate_runner.h"
#include "daemon/pipeline/gates.h"
#include "daemon/pipeline/prepare.h"
#include "daemon/pipeline/score_result.h"

namespace fs = std::filesystem;
using nlohmann::json;

// scoreCandidate's steps, in order: the scoring directories, the trusted build
// (trusted_build.cc), the scoring workspace (prepare.cc), the compile gate, the plans and
// seeds, the GPU lease, the reference's data, then correctness and performance of the visible
// and the held-out phase (gates.cc, driven_gates.cc), and the result (score_result.cc).

namespace akad {

Layout layoutFor(const Task& task, const fs::path& workDir, const ScoringEnvironment& env) {
  Layout l;
  l.root = workDir;
  l.ws = workDir / "ws";
  l.gen = workDir / "gen";
  l.expected = workDir / "expected";
  l.plans = workDir / "plans";
  l.out = workDir / "out";
  l.logs = workDir / "logs";
  l.trustedRoot = env.trusted_cache / task.content_hash;
  return l;
}

namespace {

// The scoring's folders, and the checker's tolerances for every check in it (the held-out
// choice's too, which runs before the plans are written).
Status createScoringDirs(const Layout& l, const Task& task) {
  std::error_code ec;
  if (fs::exists(l.root)) return Error{"scoring directory " + l.root.string() + " already exists"};
  for (const auto& d : {l.gen, l.expected, l.plans, l.out, l.logs}) {
    fs::create_directories(d, ec);
    if (ec) return Error{"cannot create " + d.string() + ": " + ec.message()};
  }
  return writeFile(l.plans / "tolerances.json", task.tolerancesJson().dump());
}

// The gates' environment after compile: with the GPU leased now when the task needs one and
// the scoring leases its own (env.acquire_gpus).
Result<ScoringEnvironment> withLeasedGpu(const Task& task, const ScoringEnvironment& env, bool compiled,
                                         const std::function<void(const std::string&)>& notify) {
  ScoringEnvironment gpuEnv = env;
  if (compiled && task.gpu && env.acquire_gpus) {
    notify("waiting for a GPU");
    auto ids = env.acquire_gpus();
    if (!ids) return ids.error();
    gpuEnv.gpus = *ids;
  }
  return gpuEnv;
}

// A converted AKA task's candidate extension (docs/aka.md, "Build cache"): the build this
// submitter made of these exact bytes for this task version, restored into the workspace's
// build/aka-ext, where its build script takes it instead of building again. {key, hit}, or
// null when the task or the scoring keeps none.
Result<json> restoreConvertedBuild(const Task& task, const ScoringEnvironment& env, const fs::path& ws) {
  if (!task.traits().akaConverted || env.build_cache.empty()) return json(nullptr);
  auto key = aka::candidateBuildKey(task.content_hash, env.build_cache_scope + "\n" + env.image.name, task.editable, ws);
  if (!key) return key.error();
  std::error_code ec;
  fs::create_directories(ws / "build", ec);
  if (ec) return Error{"cannot create " + (ws / "build").string() + ": " + ec.message()};
  auto hit = aka::restoreCandidateBuild(env.build_cache, *key, ws / "build" / "aka-ext");
  if (!hit) return hit.error();
  return json{{"key", *key}, {"hit", *hit}};
}

// Gate 1: compile, in the scoring workspace, without a GPU.
Result<json> compileGate(const GateRunner& g, const Task& task, const fs::path& trusted, const fs::path& common) {
  const Layout& l = g.layout();
  auto cache = restoreConvertedBuild(task, g.environment(), l.ws);
  if (!cache) return cache.error();
  if (auto s = g.ownForSandbox(l.ws, "candidate"); !s) return s.error();
  SandboxRequest build = g.request(task.limits.compile_s, "compile", false, "candidate");
  build.workspace = l.ws;
  // The trusted build of this task version, read-only: a harness may link objects it made from
  // the pristine harness files instead of compiling them again (the hip harness does).
  build.binds.push_back({trusted, "/trusted", false});
  build.env["AKA_TRUSTED"] = "/trusted";
  // The harness's shared objects, which the trusted build linked (ensureCommonHarnessBuild).
  bindCommonHarness(build, common);
  build.command = {"/bin/sh", "-c", shellJoin(task.build_candidate)};
  auto compiled = g.run(build);
  if (!compiled) return compiled.error();
  const bool builtRunner = fs::is_regular_file(l.ws / "runner");
  json verdict = gate(compiled->succeeded() && builtRunner,
                      compiled->succeeded() ? (builtRunner ? "" : "the build made no ./runner")
                                            : "the build " + compiled->describe() + ": " + g.logTail("compile"));
  verdict["run"] = compiled->result;
  if (cache->is_object()) {
    if (!(*cache)["hit"].get<bool>() && verdict["pass"].get<bool>()) {
      auto kept = aka::publishCandidateBuild(g.environment().build_cache, (*cache)["key"].get<std::string>(),
                                             l.ws / "build" / "aka-ext");
      (*cache)["kept"] = kept ? *kept : "not kept: " + kept.error().message;
    }
    verdict["build_cache"] = *cache;
  }
  return verdict;
}

// The plans of both phases (for a driven harness, the trusted driver's only: the worker sees
// no plan, no seed and no input file); returns the seeds for the result.
Result<json> writePlans(const Task& task, const Layout& l, const std::vector<Phase>& phases, bool driven) {
  json seeds = json::object();
  for (const auto& p : phases) {
    for (const auto* list : {&p.check, &p.perf})
      if (!driven || list == &p.check)  // driven timed calls draw their seeds in the driver
        for (const auto& c : *list) seeds[c.name] = std::to_string(c.seed);
    if (driven) {
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
  return seeds;
}

// A converted AKA task's held-out cases are akad's rules' (docs/aka.md): those the pristine
// baseline passes, chosen once per task version and kept beside its trusted build. `result`
// gets the choice.
Result<std::vector<json>> convertedHeldOut(const GateRunner& g, const fs::path& trusted,
                                           const std::function<uint64_t()>& drawSeed, json& result) {
  const fs::path cache = aka::heldOutChoiceFile(g.environment().trusted_cache, g.task().content_hash, g.layout().root);
  json choice;
  auto kept = aka::keptHeldOutConfigs(g, trusted, cache, drawSeed, choice);
  if (!kept) return kept.error();
  result["held_out_generated"] = choice;
  return kept;
}

// Correctness, then performance of one phase; wrong timed outputs or unaccountable times fail
// the phase as well. `ok` and `speedup` are the phase's outcome (no speedup: not timed).
void scorePhase(const GateRunner& g, const fs::path& trusted, const Phase& p, const std::string& prefix, bool driven,
                bool measurePerformance, StageClock& clock, const ScoringEnvironment& env, json& gates, bool& ok,
                std::optional<double>& speedup) {
  auto notify = [&](const std::string& name) {
    clock.next(name);
    if (env.on_gate) env.on_gate(name);
  };
  const fs::path& ws = g.layout().ws;
  notify(prefix + "correctness");
  json& c = gates[prefix + "correctness"] = driven ? drivenCorrectnessGate(g, trusted, ws, p) : correctnessGate(g, ws, p);
  ok = c["pass"];
  if (!ok || !measurePerformance) return;
  // Its own two CPUs for the gate's rounds (timing_slots.h); waited for only when all are held.
  std::shared_ptr<void> slot;
  if (env.timing_slots) {
    slot = env.timing_slots->acquire([&env] { return env.canceller && env.canceller->cancelled(); },
                                     [&] { notify(prefix + "waiting to time"); });
    if (!slot) {
      gates[prefix + "performance"] = gate(false, "cancelled while waiting to be timed");
      ok = false;
      return;
    }
  }
  notify(prefix + "performance");
  const std::string timedFrom = isoTimeUtc();
  json& perf = gates[prefix + "performance"] =
      driven ? drivenPerformanceGate(g, trusted, ws, p) : performanceGate(g, trusted, ws, p);
  perf["timed"] = {{"from", timedFrom}, {"until", isoTimeUtc()}};  // while holding the slot
  if (perf["pass"]) speedup = perf["speedup"].get<double>();
  // Held-out configurations the pristine baseline cannot be timed on (a generated case checked
  // but too large to time, a shared GPU's memory) are no fault of the candidate's: its held-out
  // correctness stands, with no held-out speedup.
  else if (prefix != "held_out_" || !perf.value("baseline_failed", false)) ok = false;
}

}  // namespace

Result<json> scoreCandidate(const Task& task, const fs::path& candidateTree, const fs::path& workDir,
                            const ScoringEnvironment& env) {
  // An imported AgentKernelArena task is scored by its own harness (docs/aka.md).
  if (task.traits().akaCommands) return aka::scoreWrappedCandidate(task, candidateTree, workDir, env);
  // Wall time of every stage, for the result and the log: where a scoring's time goes.
  StageClock clock("trusted build");
  auto notify = [&](const std::string& gateName) {
    clock.next(gateName);
    if (env.on_gate) env.on_gate(gateName);
  };
  const Layout l = layoutFor(task, workDir, env);
  if (auto s = createScoringDirs(l, task); !s) return s.error();
  auto built = ensureTrustedBuild(task, env);
  if (!built) return built.error();
  const fs::path& trusted = built->dir;
  auto assembled = assembleScoringWorkspace(task, env.tasks_root, candidateTree, l.ws);
  if (!assembled) return assembled.error();
  const auto drawSeed = env.draw_seed ? env.draw_seed : secureRandom64;

  json result = {{"task", task.id},
                 {"task_hash", task.content_hash},
                 {"taken_files", assembled->taken},
                 {"ignored_changes", assembled->ignored}};
  json gates = json::object();
  GateOutcome o;

  notify("compile");
  auto compiled = compileGate(GateRunner(task, env, l), task, trusted, built->common);
  if (!compiled) return compiled.error();
  gates["compile"] = *compiled;
  o.compiled = gates["compile"]["pass"];
  if (compiled->contains("build_cache")) result["build_cache"] = (*compiled)["build_cache"];

  auto gpuEnv = withLeasedGpu(task, env, o.compiled, notify);
  if (!gpuEnv) return gpuEnv.error();
  const GateRunner g(task, *gpuEnv, l);  // from here on every gate may use the leased GPU

  const bool driven = usesDriver(task);
  std::vector<json> heldOut = task.held_out;
  if (o.compiled && task.traits().akaConverted && !heldOut.empty()) {
    notify("held_out_selection");
    auto kept = convertedHeldOut(g, trusted, drawSeed, result);
    if (!kept) return kept.error();
    heldOut = *kept;
  }
  std::vector<Phase> phases = {makePhase("visible", task.visible, task.timing, drawSeed),
                               makePhase("held_out", heldOut, task.timing, drawSeed)};
  auto seeds = writePlans(task, l, phases, driven);
  if (!seeds) return seeds.error();
  result["seeds"] = *seeds;
  if (o.compiled) {
    if (!driven) {
      notify("generate");
      if (auto s = generateData(g, trusted, phases); !s) return s.error();
    }
    scorePhase(g, trusted, phases[0], "", driven, env.measure_performance, clock, env, gates, o.correct, o.speedup);
    // Held-out configurations are scored whenever the candidate compiles, reported apart. A
    // task without any (a converted AKA task none of whose generated cases the pristine
    // baseline passes, docs/aka.md) says so instead.
    if (!phases[1].configs.empty())
      scorePhase(g, trusted, phases[1], "held_out_", driven, env.measure_performance, clock, env, gates,
                 o.heldOutCorrect, o.heldOutSpeedup);
    else
      gates["held_out_correctness"] = gate(false, "the task has no held-out configurations");
  }

  // A gate whose sandbox was cancelled (daemon shut-down, user cancel) failed for that reason,
  // not for the candidate's: such a scoring is no result at all.
  if (env.canceller && env.canceller->cancelled()) return Error{"cancelled during scoring"};
  assembleResult(result, gates, o, env.measure_performance);
  // No held-out configurations to score is not a held-out failure: the report leaves such an
  // attempt out of the held-out retention (report.cc).
  result["held_out_available"] = !phases[1].configs.empty();
  if (task.traits().akaConverted) addConvertFigures(result);
  auto [stageTimes, stageText] = clock.finish();
  result["stage_wall_s"] = stageTimes;
  log::info("scored ", task.id, ": compiled=", o.compiled, " correct=", o.correct, " speedup=", o.speedup.value_or(0),
            " held_out_correct=", o.heldOutCorrect, " stages:", stageText);
  return result;
}

}  // namespace akad
