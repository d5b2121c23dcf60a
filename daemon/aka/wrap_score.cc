#include "daemon/aka/wrap_score.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <optional>

#include "common/log.h"
#include "daemon/aka/build_cache.h"
#include "daemon/aka/checkout.h"
#include "daemon/aka/classify.h"
#include "daemon/aka/held_out_rules.h"
#include "daemon/aka/wrap_runner.h"
#include "daemon/pipeline/files.h"
#include "daemon/pipeline/score_result.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace akad::aka {
namespace {

// Which generated shapes the pristine baseline passes, each tried alone (compile, then AKA's
// correctness) as the trusted baseline. Decided once per task version and kept beside its
// trusted caches: the set depends on the task only, never on a candidate.
Result<json> keptGeneratedShapes(const WrapRunner& w, const WrapSpec& spec, const Task& task, const ScoringEnvironment& env,
                                 const fs::path& workDir, const fs::path& baselineJit) {
  const fs::path cache = heldOutChoiceFile(env.trusted_cache, task.content_hash, workDir);
  if (auto recorded = readHeldOutChoice(cache)) return *recorded;
  json kept = json::array(), dropped = json::array();
  for (std::size_t i = 0; i < spec.generated.shapes.size(); ++i) {
    const auto& shape = spec.generated.shapes[i];
    const fs::path dir = workDir / ("held-out-trial-" + std::to_string(i));
    if (auto s = copyTree(task.workspaceDir(), dir, FileTimes::Kept); !s) return s.error();
    const Injection one = generatedInjection(spec, {shape});
    if (auto s = applyInjections(dir, {one}); !s) return s.error();
    auto side = makeSide("held-out-trial-" + std::to_string(i), false, dir, baselineJit, env, {one});
    if (!side) return side.error();
    const std::string log = "held-out-trial-" + std::to_string(i);
    auto c = commandGate(w, *side, spec.compile, task.limits.compile_s, log + "-compile", false);
    if (!c) return c.error();
    bool pass = (*c)["pass"];
    if (pass) {
      auto k = commandGate(w, *side, spec.correctness, task.limits.correctness_s, log + "-correctness", true);
      if (!k) return k.error();
      pass = (*k)["pass"];
    }
    json entry = {{"shape", shape}, {"rule", spec.generated.rules.at(i)}};
    (pass ? kept : dropped).push_back(entry);
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
  json out = {{"kept", kept}, {"dropped", dropped}};
  if (!env.gpu_shared) recordHeldOutChoice(cache, out);  // made beside other scorings on one GPU: a drop may be theirs
  return out;
}

constexpr const char* kNoPristineKernel =
    "the pristine workspace has no kernel (the agent writes it): the PyTorch original, timed in each run, is the baseline";

// Whether the pristine workspace holds a kernel to compare with. AKA's torch2hip tasks ship
// their target file empty: the agent writes it from nothing, and AKA's harness times the
// PyTorch original beside it (ori_time).
bool hasPristineKernel(const WrapSpec& spec, const Task& task) {
  if (spec.task_type != "torch2hip") return true;
  for (const auto& rel : spec.mapping.editable) {
    auto text = readFileLimited(task.workspaceDir() / rel, 16 << 20);
    if (!text || text->find_first_not_of(" \t\r\n") != std::string::npos) return true;
  }
  return false;
}

// One scoring of a wrapped task, phase by phase: the visible phase, then (when the candidate
// compiles) the held-out one. Every gate's verdict goes into gates(), each stage's start into
// the stage clock.
class WrapScoring {
 public:
  // One phase's outcome.
  struct PhaseOutcome {
    bool compiled = false, correct = false;
    double speedup = 0, akaSpeedup = 0;
  };

  using Clock = std::chrono::steady_clock;

  WrapScoring(const Task& task, const ScoringEnvironment& env, const WrapSpec& spec, fs::path workDir,
              Clock::time_point started)
      : task_(task), env_(env), spec_(spec), work_(std::move(workDir)),
        baselineJit_(env.trusted_cache.empty() ? work_ / "jit-baseline"
                                               : env.trusted_cache / task.content_hash / "aka-jit-baseline"),
        stages_{{"prepare", started}}, pristineKernel_(hasPristineKernel(spec, task)) {}

  void notify(const std::string& name) {
    stages_.emplace_back(name, Clock::now());
    if (env_.on_gate) env_.on_gate(name);
  }

  // A new scoring directory with its logs folder.
  Status prepare() {
    std::error_code ec;
    if (fs::exists(work_)) return Error{"scoring directory " + work_.string() + " already exists"};
    fs::create_directories(work_ / "logs", ec);
    if (ec) return Error{"cannot create " + (work_ / "logs").string() + ": " + ec.message()};
    return {};
  }
  // The pristine baseline's copy (beside the assembled workspace), the GPU, the seed salt and
  // the runner with its sitecustomize.
  Status startRunner(const CompatLayer& compat) {
    if (auto s = copyTree(task_.workspaceDir(), work_ / "baseline", FileTimes::Kept); !s) return s;
    std::vector<std::string> gpus = env_.gpus;
    if (env_.acquire_gpus) {
      notify("waiting for a GPU");
      auto ids = env_.acquire_gpus();
      if (!ids) return ids.error();
      gpus = *ids;
    }
    salt_ = (env_.draw_seed ? env_.draw_seed : secureRandom64)();
    runner_.emplace(task_, env_, work_, salt_, gpus);
    runner_->useCompat(compat);
    if (auto s = runner_->prepareSite(); !s) return s;
    if (env_.sandbox_uid != 0)
      if (auto s = chownTree(work_ / "site", env_.sandbox_uid, env_.sandbox_gid); !s) return s;
    return {};
  }

  // The baseline's correctness command, once per task version (a marker in its kept cache
  // folder): AKA's hip2hip correctness and performance scripts load a module that the compile
  // command does not build. Untimed here, its build would land inside the baseline's first
  // timed round (88-122 s of its wall time on an H100), and the candidate's correctness step
  // would build it again instead of being seeded with it.
  Status warmBaseline(const Side& base) {
    const fs::path marker = baselineJit_ / ".correctness-ran";
    if (fs::exists(marker)) return {};
    notify("baseline correctness");
    auto r = commandGate(*runner_, base, spec_.correctness, task_.limits.correctness_s, "baseline-correctness", true);
    if (!r) return r.error();
    // A failure here (a shared GPU's memory) only leaves the builds to the commands after it.
    if (!(*r)["pass"].get<bool>()) {
      log::warn(task_.id, ": the pristine baseline's correctness command failed before the timed rounds: ",
                (*r)["reason"].get<std::string>());
      return {};
    }
    // Unwritten, the next scoring only runs the command again.
    if (auto w = writeFile(marker, "the pristine baseline's correctness command ran with this folder\n"); !w)
      log::warn(task_.id, ": ", w.error().message);
    return {};
  }

  // One phase: the candidate's compile (held-out: a fresh tree, so no build output of the visible
  // phase is reused), its correctness, then ABBA performance against the pristine baseline.
  Result<PhaseOutcome> scorePhase(const std::string& prefix, const fs::path& candDir, const fs::path& baseDir,
                                  const std::vector<Injection>& injected = {}) {
    const WrapRunner& w = *runner_;
    PhaseOutcome ph;
    auto cand = makeSide(prefix + "candidate", true, candDir, work_ / "jit-candidate", env_, injected);
    if (!cand) return cand.error();
    if (seedsCandidate()) cand->seed_from = baselineJit_;
    auto base = makeSide(prefix + "baseline", false, baseDir, baselineJit_, env_, injected);
    if (!base) return base.error();
    // The baseline's own build (a hip task's extension) comes first when it will be timed: the
    // candidate's commands then find the modules it built from the same bytes (seed_from).
    if (prefix.empty() && pristineKernel_ && env_.measure_performance) {
      notify("baseline compile");
      auto bc = commandGate(w, *base, spec_.compile, task_.limits.compile_s, "baseline-compile", false);
      if (!bc) return bc.error();
      if (!(*bc)["pass"].get<bool>())
        return Error{"the pristine baseline of " + task_.id + " does not build: " + (*bc)["reason"].get<std::string>()};
      if (auto s = warmBaseline(*base); !s) return s.error();
    }
    notify(prefix + "compile");
    auto compiled = commandGate(w, *cand, spec_.compile, task_.limits.compile_s, prefix + "compile", false);
    if (!compiled) return compiled.error();
    gates_[prefix + "compile"] = *compiled;
    ph.compiled = (*compiled)["pass"];
    if (!ph.compiled) return ph;
    notify(prefix + "correctness");
    auto c = commandGate(w, *cand, spec_.correctness, task_.limits.correctness_s, prefix + "correctness", true);
    if (!c) return c.error();
    gates_[prefix + "correctness"] = *c;
    ph.correct = (*c)["pass"];
    if (!prefix.empty()) {
      auto baseCheck = pristineKernel_ ? checkBaselineOnHeldOut(prefix, *base) : Result<json>(wrapGate(true, kNoPristineKernel));
      if (!baseCheck) return baseCheck.error();
      gates_[prefix + "baseline"] = *baseCheck;
    }
    if (!ph.correct || !env_.measure_performance) return ph;
    notify(prefix + "performance");
    if (!pristineKernel_ || prefix.empty()) {
      // Nothing of the pristine workspace to build (the PyTorch original is timed in each run),
      // or it was built before the candidate's compile.
    } else if (!gates_[prefix + "baseline"]["pass"].get<bool>()) {
      gates_[prefix + "performance"] = wrapGate(false, "the pristine baseline fails these held-out shapes");
      ph.correct = false;
      return ph;
    }
    auto p = performanceGate(w, pristineKernel_ ? &*base : nullptr, *cand, spec_, task_, ph.speedup, ph.akaSpeedup);
    if (!p) return p.error();
    gates_[prefix + "performance"] = *p;
    if (!(*p)["pass"].get<bool>()) ph.correct = false;
    return ph;
  }

  // The held-out shapes to score: AKA's own or, with `chooseGenerated`, those of akad's rules
  // that the pristine baseline passes (chosen once per task version; `result` gets the choice).
  // `note` says which.
  Result<std::vector<Injection>> heldOutShapes(bool chooseGenerated, json& result, std::string& note) {
    std::vector<Injection> heldOut = spec_.held_out;
    note = heldOut.empty() ? "none for this task (akactl tasks import aka DIR --held-out DIR)"
                           : std::to_string(heldOut.size()) + " injection(s) of AKA's held_out_shapes.yaml";
    if (!chooseGenerated || !heldOut.empty() || spec_.generated.shapes.empty()) return heldOut;
    notify("held_out_selection");
    auto kept = keptGeneratedShapes(*runner_, spec_, task_, env_, work_, baselineJit_);
    if (!kept) return kept.error();
    result["held_out_generated"] = *kept;
    std::vector<Shape> shapes;
    for (const json& k : (*kept)["kept"]) shapes.push_back(k["shape"].get<Shape>());
    if (!shapes.empty())
      heldOut = {generatedInjection(spec_, shapes)};
    note = std::to_string(shapes.size()) + " of " + std::to_string(spec_.generated.shapes.size()) +
           " shapes from akad's rules, kept where the pristine baseline passes them";
    return heldOut;
  }

  // The held-out phase on fresh copies of the candidate's and the baseline's trees with the
  // shapes injected.
  Result<PhaseOutcome> scoreHeldOut(const fs::path& candidateTree, const std::vector<Injection>& heldOut) {
    auto heldWs = assembleWrappedWorkspace(spec_.mapping, task_.workspaceDir(), candidateTree, work_ / "ws-held");
    if (!heldWs) return heldWs.error();
    if (auto s = applyInjections(work_ / "ws-held", heldOut); !s) return s.error();
    if (auto s = copyTree(task_.workspaceDir(), work_ / "baseline-held", FileTimes::Kept); !s) return s.error();
    if (auto s = applyInjections(work_ / "baseline-held", heldOut); !s) return s.error();
    return scorePhase("held_out_", work_ / "ws-held", work_ / "baseline-held", heldOut);
  }

  // Seconds from each stage's start to the next's.
  json stageTimes() {
    stages_.emplace_back("", Clock::now());
    json times = json::object();
    for (std::size_t i = 0; i + 1 < stages_.size(); ++i)
      times[stages_[i].first] =
          std::round(std::chrono::duration<double>(stages_[i + 1].second - stages_[i].second).count() * 1000) / 1000;
    return times;
  }

  // Whether the candidate's cache folder gets the baseline's built extensions: only where no
  // held-out injection touches anything but Python files, so no module the baseline built for
  // held-out shapes holds them.
  bool seedsCandidate() const {
    auto python = [](const std::string& f) { return fs::path(f).extension() == ".py"; };
    if (!spec_.generated.file.empty() && !python(spec_.generated.file)) return false;
    return std::all_of(spec_.held_out.begin(), spec_.held_out.end(), [&](const Injection& i) { return python(i.file); });
  }

  const json& gates() const { return gates_; }
  json compatRecord() const { return runner_ ? runner_->compatRecord() : json::array(); }
  uint64_t salt() const { return salt_; }

 private:
  // Whether the pristine baseline itself passes these shapes: if not, the held-out set asks for
  // more than the task was made for (AKA's both_fail), whatever the candidate did.
  Result<json> checkBaselineOnHeldOut(const std::string& prefix, const Side& base) {
    const WrapRunner& w = *runner_;
    auto bc = commandGate(w, base, spec_.compile, task_.limits.compile_s, prefix + "baseline-compile", false);
    if (!bc) return bc.error();
    if (!(*bc)["pass"].get<bool>()) return bc;
    return commandGate(w, base, spec_.correctness, task_.limits.correctness_s, prefix + "baseline-correctness", true);
  }

  const Task& task_;
  const ScoringEnvironment& env_;
  const WrapSpec& spec_;
  fs::path work_;
  fs::path baselineJit_;
  uint64_t salt_ = 0;
  std::optional<WrapRunner> runner_;
  json gates_ = json::object();
  std::vector<std::pair<std::string, Clock::time_point>> stages_;
  const bool pristineKernel_;
};

// The result's verdict fields: the visible phase's, the held-out phase's apart, AKA's score and
// speedup beside akad's, and the first failed visible gate.
void fillVerdict(json& result, const json& gates, const WrapScoring::PhaseOutcome& visible,
                 const WrapScoring::PhaseOutcome& held, const std::string& heldOutNote, bool measured) {
  const bool compileOk = visible.compiled, correct = visible.correct;
  result["gates"] = gates;
  result["compiled"] = compileOk;
  result["correct"] = correct;
  result["speedup"] = correct && measured ? json(visible.speedup) : json(nullptr);
  result["held_out_correct"] = held.correct;
  result["held_out_speedup"] = held.correct && measured ? json(held.speedup) : json(nullptr);
  result["held_out"] = heldOutNote;
  result["score"] = measured ? json(arenaScore(compileOk, correct, visible.speedup)) : json(nullptr);
  result["aka"] = {{"speedup", correct && measured ? json(visible.akaSpeedup) : json(nullptr)},
                   {"score", measured ? json(arenaScore(compileOk, correct, visible.akaSpeedup)) : json(nullptr)},
                   {"held_out_speedup", held.correct && measured ? json(held.akaSpeedup) : json(nullptr)}};
  addSpeedupInterval(result, gates);
  if (!measured) result["performance_measured"] = false;
  for (const char* name : {"compile", "correctness", "performance"})
    if (gates.contains(name) && !gates[name]["pass"].get<bool>()) {
      result["failure"] = std::string(name) + ": " + gates[name].value("reason", std::string());
      break;
    }
}


// The candidate's kept build for these exact bytes, copied into its cache folder before its
// first command (build_cache.h). Returns {key, hit}, or null when the scoring keeps none.
Result<json> restoreBuild(const Task& task, const WrapSpec& spec, const ScoringEnvironment& env, const fs::path& workDir) {
  if (env.build_cache.empty()) return json(nullptr);
  auto key = candidateBuildKey(task.content_hash, env.build_cache_scope + "\n" + env.image.name, spec.mapping.editable,
                               workDir / "ws");
  if (!key) return key.error();
  auto hit = restoreCandidateBuild(env.build_cache, *key, workDir / "jit-candidate");
  if (!hit) return hit.error();
  return json{{"key", *key}, {"hit", *hit}};
}

// Keeps what a compiled candidate built for its next scoring; a kept build that cannot be
// written is a note, not a failed scoring.
json keepBuild(const ScoringEnvironment& env, json cache, const fs::path& workDir, bool compiled) {
  if (cache["hit"].get<bool>()) return cache;
  if (!compiled) {
    cache["kept"] = "not kept: the candidate did not compile";
    return cache;
  }
  auto kept = publishCandidateBuild(env.build_cache, cache["key"].get<std::string>(), workDir / "jit-candidate");
  cache["kept"] = kept ? *kept : "not kept: " + kept.error().message;
  return cache;
}

}  // namespace

Result<json> scoreWrappedCandidate(const Task& task, const fs::path& candidateTree, const fs::path& workDir,
                                   const ScoringEnvironment& env) {
  const auto started = WrapScoring::Clock::now();
  auto spec = loadWrapSpec(task);
  if (!spec) return spec.error();
  WrapScoring scoring(task, env, *spec, workDir, started);
  if (auto s = scoring.prepare(); !s) return s.error();
  auto assembled = assembleWrappedWorkspace(spec->mapping, task.workspaceDir(), candidateTree, workDir / "ws");
  if (!assembled) return assembled.error();
  const CompatLayer compat = locateCompatLayer(*spec, env.image);
  if (auto s = scoring.startRunner(compat); !s) return s.error();
  json applied = spec->materialised.empty() ? json::array() : json::array({compat::kPerfHelpers});
  for (const auto& f : compat.features) applied.push_back(f);
  json result = {{"task", task.id},
                 {"task_hash", task.content_hash},
                 {"mode", "wrap"},
                 {"aka_task", spec->name},
                 {"taken_files", assembled->taken},
                 {"spliced", assembled->spliced},
                 {"ignored_changes", assembled->ignored},
                 {"compat_needed", spec->compat},
                 {"compat_applied", applied},
                 {"seeds", {{"torch_manual_seed_salt", std::to_string(scoring.salt() % (1ull << 62))}}}};

  auto cache = restoreBuild(task, *spec, env, workDir);
  if (!cache) return cache.error();
  auto visible = scoring.scorePhase("", workDir / "ws", workDir / "baseline");
  if (!visible) return visible.error();
  // Held-out shapes are scored whenever the candidate compiles, reported apart, as for native tasks.
  WrapScoring::PhaseOutcome held;
  std::string heldOutNote;
  auto heldOut = scoring.heldOutShapes(visible->compiled, result, heldOutNote);
  if (!heldOut) return heldOut.error();
  if (visible->compiled && !heldOut->empty()) {
    auto h = scoring.scoreHeldOut(candidateTree, *heldOut);
    if (!h) return h.error();
    held = *h;
  }
  if (env.canceller && env.canceller->cancelled()) return Error{"cancelled during scoring"};
  if (cache->is_object()) result["build_cache"] = keepBuild(env, *cache, workDir, visible->compiled);
  fillVerdict(result, scoring.gates(), *visible, held, heldOutNote, env.measure_performance);
  result["held_out_available"] = !heldOut->empty();  // none: left out of the report's retention
  if (!compat.unavailable.empty()) result["compat_unavailable"] = compat.unavailable;
  if (compat.active()) result["compat_record"] = scoring.compatRecord();
  result["stage_wall_s"] = scoring.stageTimes();
  log::info("scored ", task.id, " (wrap): compiled=", visible->compiled, " correct=", visible->correct,
            " speedup=", visible->speedup, " aka_speedup=", visible->akaSpeedup, " held_out_correct=", held.correct);
  return result;
}

Result<json> validateWrappedTask(const Task& task, const ScoringEnvironment& env, const fs::path& workDir) {
  auto spec = loadWrapSpec(task);
  if (!spec) return spec.error();
  std::error_code ec;
  fs::remove_all(workDir, ec);
  const fs::path brokenTree = workDir / "broken-tree";
  if (auto s = copyTree(task.workspaceDir(), brokenTree); !s) return s.error();
  // A line no build accepts, inside what the scorer takes: for spliced files inside the first
  // target definition (a line after it would be ignored as a change outside it).
  for (const auto& e : spec->mapping.editable) {
    const bool python = fs::path(e).extension() == ".py";
    const std::string bad = python ? "    this line is not Python: broken on purpose by task validation\n"
                                   : "\n#error this file was broken on purpose by task validation\n";
    auto text = readFileLimited(brokenTree / e, 16 << 20);
    if (!text) return text.error();
    std::string broken = *text + bad;
    if (!spec->mapping.splice_functions.empty()) {
      auto span = findTopLevelDef(*text, spec->mapping.splice_functions.front());
      if (span && *span) {
        broken = *text;
        const std::size_t at = (*span)->end;
        broken.insert(at, (at > 0 && broken[at - 1] != '\n' ? "\n" : "") + bad);
      }
    }
    if (auto s = writeFile(brokenTree / e, broken); !s) return s.error();
  }
  json out = {{"task", task.id}, {"task_hash", task.content_hash}, {"mode", "wrap"}};
  std::vector<std::string> problems;
  ScoringEnvironment correctnessOnly = env;
  correctnessOnly.measure_performance = false;
  if (!hasPristineKernel(*spec, task)) {
    // Only the evaluator can be checked: it must reject the broken candidate below.
    out["baseline"] = {{"kernel", false}, {"note", kNoPristineKernel}};
  } else {
    auto baseline = scoreWrappedCandidate(task, task.workspaceDir(), workDir / "score-baseline", correctnessOnly);
    if (!baseline) return baseline.error();
    out["baseline"] = {{"compiled", (*baseline)["compiled"]}, {"correct", (*baseline)["correct"]},
                       {"failure", baseline->value("failure", std::string())}};
    if (!(*baseline)["correct"].get<bool>())
      problems.push_back("the baseline does not pass: " + baseline->value("failure", std::string()));
    if (!spec->held_out.empty() || !spec->generated.shapes.empty()) {
      out["baseline"]["held_out_correct"] = (*baseline)["held_out_correct"];
      if (!(*baseline)["held_out_correct"].get<bool>())
        problems.push_back("the baseline does not pass the held-out shapes (" + baseline->value("held_out", std::string()) + ")");
    }
  }
  auto broken = scoreWrappedCandidate(task, brokenTree, workDir / "score-broken", correctnessOnly);
  if (!broken) return broken.error();
  out["broken"] = {{"compiled", (*broken)["compiled"]}, {"correct", (*broken)["correct"]}};
  if ((*broken)["correct"].get<bool>()) problems.push_back("a broken candidate passed");
  out["ok"] = problems.empty();
  out["problems"] = problems;
  fs::remove_all(workDir, ec);
  return out;
}

}  // namespace akad::aka
