#include "daemon/aka/wrap_score.h"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <fstream>
#include <regex>

#include <sys/stat.h>

#include "common/log.h"
#include "common/quantile.h"
#include "daemon/aka/checkout.h"
#include "daemon/aka/held_out_rules.h"
#include "daemon/pipeline/files.h"
#include "daemon/pipeline/sandbox_run.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace akad::aka {
namespace {

constexpr std::size_t kMaxSpecBytes = 16 << 20;
constexpr std::size_t kMaxReportBytes = 4 << 20;
constexpr std::size_t kMaxOutputRead = 8 << 20;
constexpr std::size_t kLogTailBytes = 4000;
constexpr uint64_t kMaxDataFileBytes = 4ull << 30;

// Python's sitecustomize, imported by every interpreter the harness starts: once torch is
// loaded, torch.manual_seed(s) seeds with a number made from s and this scoring's salt. The
// harness still calls it with its literal seeds; the inputs it makes from them are new per
// scoring, the same for baseline and candidate of one scoring.
constexpr const char* kSiteCustomize = R"PY(# Written by akad for a wrapped AgentKernelArena task (docs/aka.md, "Fresh seeds").
import os
import sys

_salt = os.environ.pop("AKAD_SEED_SALT", None)
if _salt is not None:
    import importlib.abc
    import importlib.util

    def _remap(torch):
        original = torch.manual_seed

        def manual_seed(seed):
            return original((int(seed) * 6364136223846793005 + int(_salt)) % (1 << 63))

        torch.manual_seed = manual_seed
        torch.random.manual_seed = manual_seed

    class _AfterTorch(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path, target=None):
            if name != "torch":
                return None
            sys.meta_path.remove(self)
            spec = importlib.util.find_spec("torch")
            if spec is None or spec.loader is None:
                return spec
            run = spec.loader.exec_module

            def exec_module(module):
                run(module)
                _remap(module)

            spec.loader.exec_module = exec_module
            return spec

    sys.meta_path.insert(0, _AfterTorch())
)PY";

Result<std::vector<std::string>> stringList(const json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_array()) return Error{std::string("aka.json: '") + key + "' must be a list of strings"};
  std::vector<std::string> out;
  for (const json& s : *it) {
    if (!s.is_string()) return Error{std::string("aka.json: '") + key + "' must be a list of strings"};
    out.push_back(s.get<std::string>());
  }
  return out;
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::optional<double> number(const json& j) {
  if (j.is_number()) return j.get<double>();
  if (j.is_string()) {
    try {
      std::size_t used = 0;
      const double v = std::stod(j.get<std::string>(), &used);
      if (used == j.get<std::string>().size()) return v;
    } catch (...) {
    }
  }
  return std::nullopt;
}

// One case of a report, by AKA's key order (src/testcases.py _extract_time_from_dict).
std::optional<double> caseTime(const json& c, const std::string& taskType, bool torchOriginal) {
  if (taskType == "torch2hip") {
    const char* key = torchOriginal ? "ori_time" : "opt_time";
    if (c.contains(key))
      if (auto v = number(c[key])) return v;
  }
  for (const char* key : {"device_time_ms", "gpu_time_ms", "kernel_time_ms", "cuda_event_time_ms",
                          "cuda_graph_time_ms", "execution_time_ms"})
    if (c.contains(key))
      if (auto v = number(c[key])) return v;
  for (const char* key : {"execution_time", "time_ms", "time"})
    if (c.contains(key))
      if (auto v = number(c[key])) return std::string(key) == "time_ms" || *v < 1000.0 ? *v : *v * 1000.0;
  for (const char* key : {"host_time_ms", "wall_time_ms", "elapsed_time_ms", "total_time_ms", "end_to_end_time_ms"})
    if (c.contains(key)) return std::nullopt;
  if (auto t = c.find("timing_ms"); t != c.end() && t->is_object()) {
    for (const char* key : {"mean", "median", "min"})
      if (t->contains(key)) return number((*t)[key]);
  }
  return std::nullopt;
}

std::string joinShell(const std::vector<std::string>& cmds) {
  std::string s;
  for (const auto& c : cmds) s += (s.empty() ? "" : " && ") + std::string("( ") + c + " )";
  return s;
}

struct Side {
  std::string who;      // "candidate" | "baseline"
  fs::path dir;         // its workspace
  fs::path jit;         // its JIT and extension-build caches
  uid_t uid = 0;
  gid_t gid = 0;
};

struct CommandRun {
  SandboxOutcome outcome;
  std::string output;  // stdout + stderr, at most kMaxOutputRead of each
  std::string log;     // the log name
};

class WrapRunner {
 public:
  WrapRunner(const Task& task, const ScoringEnvironment& env, fs::path workDir, uint64_t salt, std::vector<std::string> gpus)
      : task_(task), env_(env), work_(std::move(workDir)), salt_(salt), gpus_(std::move(gpus)) {}

  Status prepareSite() {
    const fs::path site = work_ / "site";
    std::error_code ec;
    fs::create_directories(site, ec);
    if (ec) return Error{"cannot create " + site.string() + ": " + ec.message()};
    return writeFile(site / "sitecustomize.py", kSiteCustomize);
  }

  Result<CommandRun> run(const Side& side, const std::string& command, double wallS, const std::string& logName) const {
    if (env_.canceller && env_.canceller->cancelled()) return Error{"cancelled"};
    SandboxRequest r;
    r.outside_uid = side.uid;
    r.outside_gid = side.gid;
    r.workspace = side.dir;
    r.memory_bytes = task_.limits.memory_bytes;
    r.pids = task_.limits.pids;
    r.wall_s = wallS;
    r.binds = env_.image.binds;
    r.env = env_.image.env;
    r.gpus = gpus_;
    r.output_limit = kMaxDataFileBytes;
    r.binds.push_back({work_ / "site", "/akad/aka-site", false});
    r.binds.push_back({side.jit, "/jit", true});
    r.env["PYTHONPATH"] = "/akad/aka-site";
    r.env["AKAD_SEED_SALT"] = std::to_string(salt_ % (1ull << 62));
    r.env["HOME"] = "/jit/home";
    r.env["TRITON_CACHE_DIR"] = "/jit/triton";
    r.env["TORCH_EXTENSIONS_DIR"] = "/jit/torch_extensions";
    r.env["CUDA_CACHE_PATH"] = "/jit/cuda";
    r.env["PYTHONPYCACHEPREFIX"] = "/jit/pycache";
    r.env["PYTHONDONTWRITEBYTECODE"] = "";  // empty is unset for Python; the torch image sets it
    // AKA's commands name python3 and pytest: the image's Python environment comes first.
    std::string path = r.env.count("PATH") ? r.env["PATH"] : "/usr/local/bin:/usr/bin:/bin";
    if (auto py = r.env.find("AKA_PYTHON"); py != r.env.end())
      path = fs::path(py->second).parent_path().string() + ":" + path;
    r.env["PATH"] = path;
    r.stdout_file = work_ / "logs" / (logName + ".out");
    r.stderr_file = work_ / "logs" / (logName + ".err");
    r.command = {"/bin/sh", "-c", command};
    auto outcome = runSandbox(r, env_.canceller);
    if (!outcome) return outcome.error();
    CommandRun c{*outcome, "", logName};
    for (const char* ext : {".out", ".err"}) {
      auto text = readFileLimited(work_ / "logs" / (logName + ext), kMaxOutputRead);
      c.output += text ? *text : tailOfFile(work_ / "logs" / (logName + ext), kMaxOutputRead);
    }
    return c;
  }

  std::string tail(const std::string& logName) const {
    std::string out = tailOfFile(work_ / "logs" / (logName + ".err"), kLogTailBytes);
    std::string so = tailOfFile(work_ / "logs" / (logName + ".out"), kLogTailBytes);
    if (!so.empty()) out += (out.empty() ? "" : "\n") + so;
    return out;
  }

 private:
  const Task& task_;
  const ScoringEnvironment& env_;
  fs::path work_;
  uint64_t salt_;
  std::vector<std::string> gpus_;
};

json gate(bool pass, const std::string& reason) { return {{"pass", pass}, {"reason", reason}}; }

// `who` names the side in logs and messages; `candidate` says whose code it runs.
// Caches (Triton's, torch extensions', CUDA's, Python's): the candidate's live for one scoring,
// shared by its visible and held-out phases; the pristine baseline's are trusted and kept per
// task version across scorings (beside the native tasks' trusted JIT caches), so a re-score or a
// held-out phase does not build the baseline's extension again. `jit` is where they go.
Result<Side> makeSide(const std::string& who, bool candidateCode, const fs::path& dir, const fs::path& jit,
                      const ScoringEnvironment& env) {
  Side s;
  s.who = who;
  s.dir = dir;
  s.jit = jit;
  const bool candidate = candidateCode && env.candidate_uid != 0;
  s.uid = candidate ? env.candidate_uid : env.sandbox_uid;
  s.gid = candidate ? env.candidate_gid : env.sandbox_gid;
  std::error_code ec;
  const bool fresh = !fs::exists(s.jit / "home", ec);
  fs::create_directories(s.jit / "home", ec);
  if (ec) return Error{"cannot create " + s.jit.string() + ": " + ec.message()};
  if (s.uid != 0) {
    if (auto st = chownTree(s.dir, s.uid, s.gid); !st) return st.error();
    struct stat st {};
    // A kept cache is walked again only when another uid made it (a daemon with other ids).
    if (fresh || (::lstat(s.jit.c_str(), &st) == 0 && st.st_uid != s.uid))
      if (auto c = chownTree(s.jit, s.uid, s.gid); !c) return c.error();
  }
  return s;
}

// Runs a list of AKA commands one by one (as AKA's evaluator does); the gate fails at the first
// that fails.
Result<json> commandGate(const WrapRunner& w, const Side& side, const std::vector<std::string>& cmds, double wallS,
                         const std::string& name, bool akaFailRule) {
  json runs = json::array();
  for (std::size_t i = 0; i < cmds.size(); ++i) {
    const std::string logName = name + (cmds.size() > 1 ? "-" + std::to_string(i) : "");
    auto r = w.run(side, cmds[i], wallS, logName);
    if (!r) return r.error();
    runs.push_back(r->outcome.result);
    if (!r->outcome.succeeded()) {
      json g = gate(false, "`" + cmds[i] + "` " + r->outcome.describe() + ": " + w.tail(logName));
      g["runs"] = runs;
      return g;
    }
    if (akaFailRule && akaOutputSaysFail(r->output)) {
      json g = gate(false, "`" + cmds[i] + "` reported a failure: " + w.tail(logName));
      g["runs"] = runs;
      return g;
    }
  }
  json g = gate(true, "");
  g["runs"] = runs;
  return g;
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
    static const std::regex geak(R"(GEAK_RESULT_LATENCY_MS=([0-9.]+))");
    std::smatch m;
    if (std::regex_search(r->output, m, geak)) p.times["test_case_0"] = std::stod(m[1]);
  }
  if (p.times.empty()) why = side.who + ": the performance command left no report with kernel times";
  return p;
}

// ABBA rounds of the pristine baseline and the candidate on the same GPU.
Result<json> performanceGate(const WrapRunner& w, const Side& base, const Side& cand, const WrapSpec& spec,
                             const Task& task, double& speedup, double& akaSpeedup) {
  std::map<std::string, std::vector<double>> baseTimes, candTimes, akaBase;
  std::vector<double> baseWall, candWall;
  const int rounds = std::max(1, task.timing.rounds);
  for (int round = 0; round < rounds; ++round) {
    const bool baseFirst = round % 2 == 0;
    for (int k = 0; k < 2; ++k) {
      const bool isBase = (k == 0) == baseFirst;
      const Side& side = isBase ? base : cand;
      std::string why;
      auto p = perfRun(w, side, spec, task.limits.performance_s, "perf-" + side.who + "-r" + std::to_string(round), why);
      if (!p) return p.error();
      if (!why.empty()) return gate(false, why);
      for (const auto& [id, t] : p->times) (isBase ? baseTimes : candTimes)[id].push_back(t);
      for (const auto& [id, t] : p->akaBaseline) akaBase[id].push_back(t);
      (isBase ? baseWall : candWall).push_back(p->wall_s);
    }
  }
  std::vector<std::string> baseIds, candIds;
  for (const auto& [id, _] : baseTimes) baseIds.push_back(id);
  for (const auto& [id, _] : candTimes) candIds.push_back(id);
  if (baseIds != candIds) return gate(false, "the candidate's performance report names other test cases than the baseline's");
  json cases = json::array();
  double logSum = 0, akaSum = 0;
  int n = 0;
  for (const auto& id : baseIds) {
    const double b = median(baseTimes[id]), c = median(candTimes[id]);
    if (!(b > 0) || !(c > 0)) return gate(false, "test case " + id + " has no positive time (baseline " +
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
  json g = gate(true, "");
  g["speedup"] = speedup;
  g["rounds"] = rounds;
  g["order"] = "ABBA";
  g["cases"] = cases;
  g["timing_source"] = "AKA's harness, in the candidate's process";
  g["outside_wall_s"] = {{"baseline", baseWall}, {"candidate", candWall}};
  g["outside_speedup"] = median(baseWall) / std::max(1e-9, median(candWall));
  return g;
}

// Which generated shapes the pristine baseline passes, each tried alone (compile, then AKA's
// correctness) as the trusted baseline. Decided once per task version and kept beside its
// trusted caches: the set depends on the task only, never on a candidate.
Result<json> keptGeneratedShapes(const WrapRunner& w, const WrapSpec& spec, const Task& task, const ScoringEnvironment& env,
                                 const fs::path& workDir, const fs::path& baselineJit) {
  const fs::path cache = env.trusted_cache.empty() ? workDir / "aka-held-out-kept.json"
                                                   : env.trusted_cache / task.content_hash / "aka-held-out-kept.json";
  if (auto text = readFileLimited(cache, 1 << 20)) {
    try {
      json kept = json::parse(*text);
      if (kept.is_object() && kept.contains("kept") && kept["kept"].is_array()) return kept;
    } catch (const json::exception&) {
    }
  }
  json kept = json::array(), dropped = json::array();
  for (std::size_t i = 0; i < spec.generated.shapes.size(); ++i) {
    const auto& shape = spec.generated.shapes[i];
    const fs::path dir = workDir / ("held-out-trial-" + std::to_string(i));
    if (auto s = copyTree(task.workspaceDir(), dir); !s) return s.error();
    Injection one{spec.generated.file, "TEST_SHAPES", testShapesCode({shape}, spec.generated.scalars), ""};
    if (auto s = applyInjections(dir, {one}); !s) return s.error();
    auto side = makeSide("held-out-trial-" + std::to_string(i), false, dir, baselineJit, env);
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
  const fs::path tmp = cache.string() + ".tmp-" + randomHex(4);
  std::error_code ec;
  fs::create_directories(cache.parent_path(), ec);
  if (auto s = writeFile(tmp, out.dump(2) + "\n"); s) fs::rename(tmp, cache, ec);
  return out;
}

}  // namespace

const char* seedRemapSiteCustomize() { return kSiteCustomize; }

Result<WrapSpec> loadWrapSpec(const Task& task) {
  auto text = readFileLimited(task.dir / "aka.json", kMaxSpecBytes);
  if (!text) return Error{"task " + task.id + " has no readable aka.json: " + text.error().message};
  json j;
  try {
    j = json::parse(*text);
  } catch (const json::exception& e) {
    return Error{"task " + task.id + ": aka.json is not JSON: " + e.what()};
  }
  if (!j.is_object() || j.value("mode", "") != "wrap") return Error{"task " + task.id + ": aka.json is not a wrap-mode spec"};
  WrapSpec s;
  s.name = j.value("name", "");
  s.family = j.value("family", "");
  s.task_type = j.value("task_type", "");
  for (auto [key, into] : std::initializer_list<std::pair<const char*, std::vector<std::string>*>>{
           {"editable", &s.mapping.editable}, {"splice_functions", &s.mapping.splice_functions},
           {"compat", &s.compat}, {"materialised", &s.materialised}}) {
    auto list = stringList(j, key);
    if (!list) return Error{"task " + task.id + ": " + list.error().message};
    *into = *list;
  }
  const json& cmds = j.value("commands", json::object());
  for (auto [key, into] : std::initializer_list<std::pair<const char*, std::vector<std::string>*>>{
           {"compile", &s.compile}, {"correctness", &s.correctness}, {"performance", &s.performance}}) {
    auto list = stringList(cmds, key);
    if (!list || list->empty()) return Error{"task " + task.id + ": aka.json: commands." + key + " must be a non-empty list"};
    *into = *list;
  }
  if (auto g = j.find("held_out_generated"); g != j.end() && g->is_object()) {
    s.generated.file = g->value("file", "");
    s.generated.scalars = g->value("scalars", false);
    if (!isInsideRelativePath(s.generated.file) || !g->contains("shapes") || !(*g)["shapes"].is_array())
      return Error{"task " + task.id + ": aka.json: held_out_generated is malformed"};
    for (const json& e : (*g)["shapes"]) {
      if (!e.is_object() || !e.contains("shape") || !e["shape"].is_array())
        return Error{"task " + task.id + ": aka.json: held_out_generated is malformed"};
      std::vector<std::int64_t> shape;
      for (const json& d : e["shape"]) {
        if (!d.is_number_integer()) return Error{"task " + task.id + ": aka.json: a generated shape is not integers"};
        shape.push_back(d.get<std::int64_t>());
      }
      s.generated.shapes.push_back(shape);
      s.generated.rules.push_back(e.value("rule", ""));
    }
  }
  if (auto h = j.find("held_out_injections"); h != j.end()) {
    auto injections = injectionsFromJson(*h);
    if (!injections) return Error{"task " + task.id + ": aka.json: " + injections.error().message};
    s.held_out = *injections;
  }
  for (const auto& e : s.mapping.editable)
    if (!isInsideRelativePath(e)) return Error{"task " + task.id + ": aka.json: editable '" + e + "' is not a relative path"};
  return s;
}

bool akaOutputSaysFail(const std::string& output) {
  const std::string l = lower(output);
  return l.find("fail") != std::string::npos && l.find("pass") == std::string::npos;
}

fs::path findPerformanceReport(const fs::path& ws) {
  std::error_code ec;
  for (const char* rel : {"build/performance_report.json", "performance_report.json", "build/perf_report.json",
                          "perf_report.json", "perf/benchmark_results.json"})
    if (fs::is_regular_file(fs::symlink_status(ws / rel, ec))) return ws / rel;
  return {};
}

Result<CaseTimes> parsePerformanceReport(const std::string& text, const std::string& taskType, bool torchOriginal) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {
    return Error{std::string("the performance report is not JSON: ") + e.what()};
  }
  json list;
  if (j.is_array()) list = j;
  else if (j.is_object() && j.contains("test_cases") && j["test_cases"].is_array()) list = j["test_cases"];
  else if (j.is_object()) list = json::array({j});
  else return Error{"the performance report is neither a list of cases nor an object"};
  CaseTimes out;
  for (std::size_t i = 0; i < list.size(); ++i) {
    const json& c = list[i];
    if (!c.is_object()) continue;
    auto t = caseTime(c, taskType, torchOriginal);
    if (!t) continue;
    std::string id = "test_case_" + std::to_string(i);
    if (auto it = c.find("test_case_id"); it != c.end()) id = it->is_string() ? it->get<std::string>() : it->dump();
    if (out.count(id)) return Error{"the performance report names test case '" + id + "' twice"};
    out[id] = *t;
  }
  return out;
}

Result<json> scoreWrappedCandidate(const Task& task, const fs::path& candidateTree, const fs::path& workDir,
                                   const ScoringEnvironment& env) {
  using Clock = std::chrono::steady_clock;
  std::vector<std::pair<std::string, Clock::time_point>> stages{{"prepare", Clock::now()}};
  auto notify = [&](const std::string& name) {
    stages.emplace_back(name, Clock::now());
    if (env.on_gate) env.on_gate(name);
  };
  auto spec = loadWrapSpec(task);
  if (!spec) return spec.error();
  std::error_code ec;
  if (fs::exists(workDir)) return Error{"scoring directory " + workDir.string() + " already exists"};
  fs::create_directories(workDir / "logs", ec);
  if (ec) return Error{"cannot create " + (workDir / "logs").string() + ": " + ec.message()};
  auto assembled = assembleWrappedWorkspace(spec->mapping, task.workspaceDir(), candidateTree, workDir / "ws");
  if (!assembled) return assembled.error();
  if (auto s = copyTree(task.workspaceDir(), workDir / "baseline"); !s) return s.error();
  std::vector<std::string> gpus = env.gpus;
  if (env.acquire_gpus) {
    notify("waiting for a GPU");
    auto ids = env.acquire_gpus();
    if (!ids) return ids.error();
    gpus = *ids;
  }
  const uint64_t salt = (env.draw_seed ? env.draw_seed : secureRandom64)();
  WrapRunner w(task, env, workDir, salt, gpus);
  if (auto s = w.prepareSite(); !s) return s.error();
  if (env.sandbox_uid != 0)
    if (auto s = chownTree(workDir / "site", env.sandbox_uid, env.sandbox_gid); !s) return s.error();

  json result = {{"task", task.id},
                 {"task_hash", task.content_hash},
                 {"mode", "wrap"},
                 {"aka_task", spec->name},
                 {"taken_files", assembled->taken},
                 {"spliced", assembled->spliced},
                 {"ignored_changes", assembled->ignored},
                 {"compat_needed", spec->compat},
                 {"compat_applied", spec->materialised.empty() ? json::array() : json::array({"perf-helpers"})},
                 {"seeds", {{"torch_manual_seed_salt", std::to_string(salt % (1ull << 62))}}}};
  json gates = json::object();

  const fs::path baselineJit = env.trusted_cache.empty() ? workDir / "jit-baseline"
                                                        : env.trusted_cache / task.content_hash / "aka-jit-baseline";
  // One phase: the candidate's compile (held-out: a fresh tree, so no build output of the visible
  // phase is reused), its correctness, then ABBA performance against the pristine baseline.
  struct Phase {
    bool compiled = false, correct = false;
    double speedup = 0, akaSpeedup = 0;
  };
  auto scorePhase = [&](const std::string& prefix, const fs::path& candDir, const fs::path& baseDir) -> Result<Phase> {
    Phase ph;
    auto cand = makeSide(prefix + "candidate", true, candDir, workDir / "jit-candidate", env);
    if (!cand) return cand.error();
    auto base = makeSide(prefix + "baseline", false, baseDir, baselineJit, env);
    if (!base) return base.error();
    notify(prefix + "compile");
    auto compiled = commandGate(w, *cand, spec->compile, task.limits.compile_s, prefix + "compile", false);
    if (!compiled) return compiled.error();
    gates[prefix + "compile"] = *compiled;
    ph.compiled = (*compiled)["pass"];
    if (!ph.compiled) return ph;
    notify(prefix + "correctness");
    auto c = commandGate(w, *cand, spec->correctness, task.limits.correctness_s, prefix + "correctness", true);
    if (!c) return c.error();
    gates[prefix + "correctness"] = *c;
    ph.correct = (*c)["pass"];
    if (!prefix.empty()) {
      // Whether the pristine baseline itself passes these shapes: if not, the held-out set asks
      // for more than the task was made for (AKA's both_fail), whatever the candidate did.
      auto bc = commandGate(w, *base, spec->compile, task.limits.compile_s, prefix + "baseline-compile", false);
      if (!bc) return bc.error();
      json baseCheck = *bc;
      if ((*bc)["pass"].get<bool>()) {
        auto bk = commandGate(w, *base, spec->correctness, task.limits.correctness_s, prefix + "baseline-correctness", true);
        if (!bk) return bk.error();
        baseCheck = *bk;
      }
      gates[prefix + "baseline"] = baseCheck;
    }
    if (!ph.correct || !env.measure_performance) return ph;
    notify(prefix + "performance");
    if (prefix.empty()) {
      // The baseline's own build (a hip task's extension) before its first timed run.
      auto bc = commandGate(w, *base, spec->compile, task.limits.compile_s, "baseline-compile", false);
      if (!bc) return bc.error();
      if (!(*bc)["pass"].get<bool>())
        return Error{"the pristine baseline of " + task.id + " does not build: " + (*bc)["reason"].get<std::string>()};
    } else if (!gates[prefix + "baseline"]["pass"].get<bool>()) {
      gates[prefix + "performance"] = gate(false, "the pristine baseline fails these held-out shapes");
      ph.correct = false;
      return ph;
    }
    auto p = performanceGate(w, *base, *cand, *spec, task, ph.speedup, ph.akaSpeedup);
    if (!p) return p.error();
    gates[prefix + "performance"] = *p;
    if (!(*p)["pass"].get<bool>()) ph.correct = false;
    return ph;
  };

  auto visible = scorePhase("", workDir / "ws", workDir / "baseline");
  if (!visible) return visible.error();
  const bool compileOk = visible->compiled, correct = visible->correct;
  const double speedup = visible->speedup, akaSpeedup = visible->akaSpeedup;
  // Held-out shapes are scored whenever the candidate compiles, reported apart, as for native tasks.
  Phase held;
  std::vector<Injection> heldOut = spec->held_out;
  std::string heldOutNote = heldOut.empty() ? "none for this task (akactl tasks import aka DIR --held-out DIR)"
                                            : std::to_string(heldOut.size()) + " injection(s) of AKA's held_out_shapes.yaml";
  if (compileOk && heldOut.empty() && !spec->generated.shapes.empty()) {
    notify("held_out_selection");
    auto kept = keptGeneratedShapes(w, *spec, task, env, workDir, baselineJit);
    if (!kept) return kept.error();
    result["held_out_generated"] = *kept;
    std::vector<Shape> shapes;
    for (const json& k : (*kept)["kept"]) shapes.push_back(k["shape"].get<Shape>());
    if (!shapes.empty())
      heldOut = {Injection{spec->generated.file, "TEST_SHAPES", testShapesCode(shapes, spec->generated.scalars), ""}};
    heldOutNote = std::to_string(shapes.size()) + " of " + std::to_string(spec->generated.shapes.size()) +
                  " shapes from akad's rules, kept where the pristine baseline passes them";
  }
  if (compileOk && !heldOut.empty()) {
    auto heldWs = assembleWrappedWorkspace(spec->mapping, task.workspaceDir(), candidateTree, workDir / "ws-held");
    if (!heldWs) return heldWs.error();
    if (auto s = applyInjections(workDir / "ws-held", heldOut); !s) return s.error();
    if (auto s = copyTree(task.workspaceDir(), workDir / "baseline-held"); !s) return s.error();
    if (auto s = applyInjections(workDir / "baseline-held", heldOut); !s) return s.error();
    auto h = scorePhase("held_out_", workDir / "ws-held", workDir / "baseline-held");
    if (!h) return h.error();
    held = *h;
  }
  if (env.canceller && env.canceller->cancelled()) return Error{"cancelled during scoring"};
  result["gates"] = gates;
  result["compiled"] = compileOk;
  result["correct"] = correct;
  result["speedup"] = correct && env.measure_performance ? json(speedup) : json(nullptr);
  result["held_out_correct"] = held.correct;
  result["held_out_speedup"] = held.correct && env.measure_performance ? json(held.speedup) : json(nullptr);
  result["held_out"] = heldOutNote;
  result["score"] = env.measure_performance ? json(arenaScore(compileOk, correct, speedup)) : json(nullptr);
  result["aka"] = {{"speedup", correct && env.measure_performance ? json(akaSpeedup) : json(nullptr)},
                   {"score", env.measure_performance ? json(arenaScore(compileOk, correct, akaSpeedup)) : json(nullptr)},
                   {"held_out_speedup", held.correct && env.measure_performance ? json(held.akaSpeedup) : json(nullptr)}};
  if (!env.measure_performance) result["performance_measured"] = false;
  for (const char* name : {"compile", "correctness", "performance"})
    if (gates.contains(name) && !gates[name]["pass"].get<bool>()) {
      result["failure"] = std::string(name) + ": " + gates[name].value("reason", std::string());
      break;
    }
  stages.emplace_back("", Clock::now());
  json stageTimes = json::object();
  for (std::size_t i = 0; i + 1 < stages.size(); ++i)
    stageTimes[stages[i].first] =
        std::round(std::chrono::duration<double>(stages[i + 1].second - stages[i].second).count() * 1000) / 1000;
  result["stage_wall_s"] = stageTimes;
  log::info("scored ", task.id, " (wrap): compiled=", compileOk, " correct=", correct, " speedup=", speedup,
            " aka_speedup=", akaSpeedup, " held_out_correct=", held.correct);
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
