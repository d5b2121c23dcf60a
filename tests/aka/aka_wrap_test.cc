// The wrap scorer (daemon/aka/wrap_score.cc) through the real akabox: a task imported from the
// CPU fixture checkout (plain Python, no GPU, no PyTorch) is scored from candidate trees, so the
// trust mapping, AKA's gates and the ABBA performance rounds are tried end to end. The GPU
// families' scoring is the same code with a GPU passed through; their runs are for the GPU host.

#include <gtest/gtest.h>

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <functional>
#include <optional>
#include <set>
#include <sstream>

#include "daemon/aka/convert_held_out.h"
#include "daemon/aka/import.h"
#include "daemon/aka/wrap_compat.h"
#include "daemon/aka/wrap_score.h"
#include "daemon/pipeline/files.h"
#include "daemon/pipeline/image.h"
#include "daemon/pipeline/report.h"
#include "daemon/pipeline/sandbox_run.h"
#include "daemon/pipeline/task.h"
#include "daemon/pipeline/validate.h"
#include "sandbox/gpu_discovery.h"
#include "tests/aka/aka_test_files.h"
#include "tests/daemon/harness.h"

namespace fs = std::filesystem;
using nlohmann::json;
using namespace akad;
using akad::akafixture::readText;

namespace {

constexpr uid_t kSandboxUid = 101000;
const fs::path kCpuCheckout = AKA_CPU_CHECKOUT;

class AkaWrapScoring : public ::testing::Test {
 protected:
  void SetUp() override {
    parent_ = "akad-test-aka-" + std::to_string(::getpid());
    setDefaultCgroupParent(parent_);
    ::setenv("AKABOX", AKABOX_BIN, 1);
    auto t = importCpuTask("triton2triton/cpu/py_dot", AKA_CPU_HELD_OUT);
    ASSERT_TRUE(t);
    task_ = t->second;
    // The scoring directories are made by root here and written by the sandbox uid.
    ASSERT_EQ(::chmod(tmp_.path().c_str(), 0755), 0);
  }
  void TearDown() override {
    for (const fs::path& c : test::cgroupsUnder(parent_)) ADD_FAILURE() << "cgroup left behind: " << c;
    for (const fs::path& p : test::cgroupParentDirs(parent_)) ::rmdir(p.c_str());
  }
  // One task of the CPU checkout, imported for NVIDIA into the test's state: its import verdict
  // and the task akad's loader made of it (nothing, with the failure reported, if either fails).
  std::optional<std::pair<aka::ImportedTask, Task>> importCpuTask(const std::string& name, const fs::path& heldOut = {}) {
    aka::ImportOptions o;
    o.checkout = kCpuCheckout;
    o.platform = aka::Platform::Nvidia;
    o.stateDir = tmp_ / "state";
    o.heldOutDir = heldOut;
    o.selectors = {name};
    auto r = aka::importCheckout(o);
    if (!r || r->tasks.size() != 1 || !r->tasks[0].imported) {
      ADD_FAILURE() << "import of " << name << ": " << (r ? r->tasks.at(0).toJson(false).dump() : r.error().message);
      return std::nullopt;
    }
    auto t = loadTask(aka::importedTasksRoot(o.stateDir) / r->tasks[0].id);
    if (!t) {
      ADD_FAILURE() << t.error().message;
      return std::nullopt;
    }
    return std::make_pair(r->tasks[0], *t);
  }
  ScoringEnvironment environment() const {
    ScoringEnvironment env;
    env.tasks_root = aka::importedTasksRoot(tmp_ / "state");
    env.trusted_cache = tmp_ / "state" / "tasks";
    env.sandbox_uid = env.sandbox_gid = kSandboxUid;
    return env;
  }
  // cpu/prefix_sum, a native task, in the test's own tasks root with `kernel` as its pristine
  // kernel and `editYaml` applied to its task.yaml; returns its folder.
  fs::path prefixSumWith(const std::string& kernel, const std::function<void(std::string&)>& editYaml = {}) {
    const fs::path root = tmp_ / "native-tasks";
    for (const char* layer : {"common/cpp", "common/checker", "cpu/prefix_sum"})
      EXPECT_TRUE(copyTree(fs::path(AKAD_SOURCE_TASKS) / layer, root / layer).ok()) << layer;
    const fs::path dir = root / "cpu/prefix_sum";
    std::ofstream(dir / "workspace/kernel.cpp") << kernel;
    if (editYaml) {
      std::string yaml = akafixture::readText(dir / "task.yaml");
      editYaml(yaml);
      akafixture::writeText(dir / "task.yaml", yaml);
    }
    return dir;
  }
  // What scores such a task: its tasks root, trusted cache, checker and image.
  ScoringEnvironment nativeEnvironment(const Task& task) const {
    ScoringEnvironment env = environment();
    env.tasks_root = tmp_ / "native-tasks";
    env.trusted_cache = tmp_ / "native-trusted";
    env.akacheck = AKACHECK_BIN;
    auto image = loadImageProfile(AKAD_SOURCE_IMAGES, task.image);
    EXPECT_TRUE(image) << (image ? "" : image.error().message);
    if (image) env.image = *image;
    return env;
  }
  // The agent's workspace: the pristine one, then `edit` applied.
  fs::path candidate(const std::string& name, const std::function<void(const fs::path&)>& edit) {
    const fs::path dir = tmp_ / name;
    EXPECT_TRUE(copyTree(task_.workspaceDir(), dir).ok());
    edit(dir);
    return dir;
  }

  test::TempDir tmp_;
  std::string parent_;
  Task task_;
};

// The GPU host's first NVIDIA GPU and the torch image, or why this host is not one (`skip`).
std::optional<std::pair<std::string, ImageProfile>> torchGpuHost(std::string& skip) {
  auto gpus = gpu::discoverGpus();
  std::string gpuId;
  if (gpus)
    for (const auto& g : *gpus)
      if (g.vendor == "nvidia" && gpuId.empty()) gpuId = g.id;
  if (gpuId.empty()) return skip = "no NVIDIA GPU on this host; this test is for the GPU host", std::nullopt;
  auto image = loadImageProfile(AKAD_SOURCE_IMAGES, "torch");
  if (!image) return skip = "the torch image is not usable here: " + image.error().message, std::nullopt;
  if (!fs::exists("/opt/torch/.venv/bin/python3")) return skip = "no /opt/torch/.venv (the torch image's Python)", std::nullopt;
  return std::make_pair(gpuId, *image);
}

// The pairsum fixtures' kernels fail odd sizes: of the sizes generated from visible 1000 and
// 4000, only the scaled-up 8000 passes the pristine baseline, and the held-out phase times it.
void expectOnlyTheEvenScaledUpSizeKept(const json& s) {
  const json& gen = s["held_out_generated"];
  ASSERT_EQ(gen["kept"].size(), 1u) << s.dump(2);
  EXPECT_EQ(gen["kept"][0]["shape"], json::array({8000}));
  EXPECT_EQ(gen["kept"][0]["rule"], "scaled-up");
  EXPECT_EQ(gen["dropped"].size(), 3u);  // 1009, 4001 (prime) and 501 (scaled down): odd
  EXPECT_TRUE(s["held_out_correct"].get<bool>()) << s.dump(2);
  std::vector<std::string> cases;
  for (const json& c : s["gates"]["held_out_performance"]["cases"]) cases.push_back(c["case"]);
  EXPECT_EQ(cases, std::vector<std::string>{"n_8000"});
}

const char* kFastDot = "def dot(a, b):\n    return sum(x * y for x, y in zip(a, b))\n";

TEST_F(AkaWrapScoring, AFasterKernelIsCorrectAndFasterInAbbaRounds) {
  const fs::path tree = candidate("fast", [](const fs::path& d) { std::ofstream(d / "source/py_dot.py") << kFastDot; });
  auto r = scoreCandidate(task_, tree, tmp_ / "score-fast", environment());
  ASSERT_TRUE(r) << r.error().message;
  const json& j = *r;
  EXPECT_EQ(j["mode"], "wrap");
  EXPECT_TRUE(j["compiled"].get<bool>()) << j.dump(2);
  EXPECT_TRUE(j["correct"].get<bool>()) << j.dump(2);
  EXPECT_EQ(j["taken_files"], json::array({"source/py_dot.py"}));
  EXPECT_TRUE(j["ignored_changes"].empty()) << j.dump(2);
  const json& perf = j["gates"]["performance"];
  EXPECT_EQ(perf["order"], "ABBA");
  EXPECT_EQ(perf["rounds"], 2);
  ASSERT_EQ(perf["cases"].size(), 3u) << perf.dump(2);
  for (const json& c : perf["cases"]) {
    EXPECT_EQ(c["baseline_ms"].size(), 2u);
    EXPECT_EQ(c["candidate_ms"].size(), 2u);
  }
  // The baseline does its work six times over.
  EXPECT_GT(j["speedup"].get<double>(), 1.5) << perf.dump(2);
  EXPECT_EQ(j["speedup_interval"]["rounds"].size(), 2u) << "one paired speedup per ABBA round";
  EXPECT_LE(j["speedup_interval"]["low"].get<double>(), j["speedup"].get<double>());
  EXPECT_GT(j["aka"]["speedup"].get<double>(), 1.5);
  EXPECT_GT(j["score"].get<double>(), 120.0);
  EXPECT_EQ(perf["outside_wall_s"]["baseline"].size(), 2u);
  EXPECT_FALSE(j["seeds"]["torch_manual_seed_salt"].get<std::string>().empty());
  // The imported held-out sizes, scored apart on fresh copies with the shapes injected.
  EXPECT_TRUE(j["held_out_correct"].get<bool>()) << j.dump(2);
  EXPECT_EQ(j["held_out_available"], true);
  EXPECT_GT(j["held_out_speedup"].get<double>(), 1.5);
  std::vector<std::string> heldCases;
  for (const json& c : j["gates"]["held_out_performance"]["cases"]) heldCases.push_back(c["case"]);
  EXPECT_EQ(heldCases, (std::vector<std::string>{"n_3001", "n_30011", "n_7919"}));
  EXPECT_TRUE(j["gates"]["held_out_baseline"]["pass"].get<bool>());
}

// Without AKA's held-out files: akad's rules make sizes from the runner's TEST_SHAPES = [1000,
// 4000], and the pristine baseline, made for even sizes only, decides which stay.
TEST_F(AkaWrapScoring, GeneratedHeldOutSizesAreKeptOnlyWhereThePristineBaselinePasses) {
  auto imported = importCpuTask("triton2triton/cpu/py_pairsum");
  ASSERT_TRUE(imported);
  ASSERT_EQ(imported->first.held_out_generated, 4u) << imported->first.toJson(false).dump();
  const Task* task = &imported->second;
  const fs::path tree = tmp_ / "pairsum";
  ASSERT_TRUE(copyTree(task->workspaceDir(), tree).ok());
  std::ofstream(tree / "source/py_pairsum.py") << "def pairsum(a):\n    return [x + y for x, y in zip(a[0::2], a[1::2])]\n";

  auto s = scoreCandidate(*task, tree, tmp_ / "score-pairsum", environment());
  ASSERT_TRUE(s) << s.error().message;
  expectOnlyTheEvenScaledUpSizeKept(*s);
  const json& gen = (*s)["held_out_generated"];
  EXPECT_NE((*s)["held_out"].get<std::string>().find("1 of 4 shapes"), std::string::npos);

  // Decided once per task version: a second scoring tries no shape again.
  auto again = scoreCandidate(*task, tree, tmp_ / "score-pairsum-2", environment());
  ASSERT_TRUE(again) << again.error().message;
  EXPECT_EQ((*again)["held_out_generated"], gen);
  for (const auto& e : fs::directory_iterator(tmp_ / "score-pairsum-2" / "logs"))
    EXPECT_EQ(e.path().filename().string().find("held-out-trial"), std::string::npos) << e.path();
}

// A choice made beside other scorings on one GPU (tasks validate --parallel) may have dropped a
// shape for want of the memory they held: it serves that scoring only, and the next decides again.
TEST_F(AkaWrapScoring, AHeldOutChoiceMadeOnASharedGpuIsNotKeptForLaterScorings) {
  auto imported = importCpuTask("triton2triton/cpu/py_pairsum");
  ASSERT_TRUE(imported);
  const Task* task = &imported->second;
  const fs::path tree = tmp_ / "pairsum-shared";
  ASSERT_TRUE(copyTree(task->workspaceDir(), tree).ok());
  ScoringEnvironment shared = environment();
  shared.gpu_shared = true;
  auto s = scoreCandidate(*task, tree, tmp_ / "score-shared", shared);
  ASSERT_TRUE(s) << s.error().message;
  expectOnlyTheEvenScaledUpSizeKept(*s);
  EXPECT_FALSE(fs::exists(shared.trusted_cache / task->content_hash / "aka-held-out-kept.json"));
  auto alone = scoreCandidate(*task, tree, tmp_ / "score-alone", environment());
  ASSERT_TRUE(alone) << alone.error().message;
  EXPECT_EQ((*alone)["held_out_generated"], (*s)["held_out_generated"]);
  bool tried = false;
  for (const auto& e : fs::directory_iterator(tmp_ / "score-alone" / "logs"))
    tried = tried || e.path().filename().string().find("held-out-trial") != std::string::npos;
  EXPECT_TRUE(tried) << "the scoring on its own GPU decided the held-out shapes again";
  EXPECT_TRUE(fs::exists(shared.trusted_cache / task->content_hash / "aka-held-out-kept.json"));
}

// The converted tasks' held-out choice (convert_held_out.h) through the real driver, worker and
// checker, on akad's cpp task cpu/prefix_sum in place of a converted task (whose harness needs
// PyTorch and a GPU): its pristine kernel, cut to scan at most 2000 columns, passes the held-out
// configurations within that reach only. The choice is kept per task version, and not when it
// was made on a GPU shared with other scorings.
TEST_F(AkaWrapScoring, TheHeldOutChoiceKeepsWhatThePristineBaselinePasses_CppTaskInPlaceOfAConvertedOne) {
  const fs::path dir = prefixSumWith(
      "#include <cstddef>\n\nextern \"C\" void row_scan(const float* x, float* out, size_t rows, size_t cols) {\n"
      "  for (size_t r = 0; r < rows; ++r) {\n    double sum = 0;\n"
      "    for (size_t c = 0; c < cols; ++c) {\n      if (c < 2000) sum += x[r * cols + c];\n"
      "      out[r * cols + c] = static_cast<float>(sum);\n    }\n  }\n}\n",
      [](std::string& yaml) {
        const auto from = yaml.find("  held_out:\n"), to = yaml.find("tolerances:");
        ASSERT_NE(from, std::string::npos);
        yaml.replace(from, to - from,
                     "  held_out:\n    - {name: held-out-0-prime, rows: 3, cols: 1999, rule: prime}\n"
                     "    - {name: held-out-1-scaled-up, rows: 2, cols: 4001, rule: scaled-up}\n"
                     "    - {name: held-out-2-aspect, rows: 5000, cols: 7, rule: aspect}\n");
      });
  auto task = loadTask(dir);
  ASSERT_TRUE(task) << task.error().message;
  const ScoringEnvironment env = nativeEnvironment(*task);
  auto built = ensureTrustedBuild(*task, env);
  ASSERT_TRUE(built) << built.error().message;

  auto choose = [&](const std::string& name, const ScoringEnvironment& e, const fs::path& cache) {
    const Layout l = layoutFor(*task, tmp_ / name, e);
    for (const auto& d : {l.plans, l.out, l.logs}) fs::create_directories(d);
    EXPECT_TRUE(writeFile(l.plans / "tolerances.json", task->tolerancesJson().dump()).ok());
    json choice;
    auto kept = aka::keptHeldOutConfigs(GateRunner(*task, e, l), built->dir, cache, secureRandom64, choice);
    EXPECT_TRUE(kept) << (kept ? "" : kept.error().message);
    std::vector<std::string> names;
    for (const json& c : kept ? *kept : std::vector<json>{}) names.push_back(c["name"]);
    return std::make_pair(names, choice);
  };
  const fs::path cache = tmp_ / "native-trusted" / "choice.json";
  ScoringEnvironment shared = env;
  shared.gpu_shared = true;
  const auto [sharedNames, sharedChoice] = choose("choice-shared", shared, cache);
  EXPECT_EQ(sharedNames, (std::vector<std::string>{"held-out-0-prime", "held-out-2-aspect"})) << sharedChoice.dump(2);
  EXPECT_FALSE(fs::exists(cache)) << "a choice made on a shared GPU was kept";

  const auto [names, choice] = choose("choice", env, cache);
  EXPECT_EQ(names, (std::vector<std::string>{"held-out-0-prime", "held-out-2-aspect"})) << choice.dump(2);
  ASSERT_EQ(choice["dropped"].size(), 1u) << choice.dump(2);
  EXPECT_EQ(choice["dropped"][0]["name"], "held-out-1-scaled-up");
  EXPECT_EQ(choice["dropped"][0]["rule"], "scaled-up");
  EXPECT_FALSE(choice["dropped"][0]["reason"].get<std::string>().empty());
  ASSERT_TRUE(fs::exists(cache));
  // Kept for the task version: the next choice runs nothing.
  const auto [again, againChoice] = choose("choice-again", env, cache);
  EXPECT_EQ(again, names);
  EXPECT_EQ(againChoice, choice);
  EXPECT_FALSE(fs::exists(tmp_ / "choice-again" / "out" / "held_out_choice-check")) << "the cached choice ran a check";
}

// A held-out configuration that the pristine baseline passes when checked but cannot be timed
// on (on the H100 a generated case held 68 GiB in the baseline's timed run) is no fault of the
// candidate's: its held-out correctness stands, without a held-out speedup, and the report
// leaves it out of the held-out speedup. Here the baseline aborts after ten calls of the
// 5000x7 configuration: a check calls it fewer times, a timed run more.
TEST_F(AkaWrapScoring, AHeldOutConfigurationTheBaselineCannotBeTimedOnIsNotTheCandidatesFault) {
  const fs::path dir = prefixSumWith(
      "#include <cstddef>\n#include <cstdlib>\n\nextern \"C\" void row_scan(const float* x, float* out, size_t rows, size_t cols) {\n"
      "  static int calls = 0;\n  if (cols == 7 && ++calls > 10) std::abort();\n"
      "  for (size_t r = 0; r < rows; ++r) {\n    double sum = 0;\n"
      "    for (size_t c = 0; c < cols; ++c) {\n      sum += x[r * cols + c];\n"
      "      out[r * cols + c] = static_cast<float>(sum);\n    }\n  }\n}\n");
  auto task = loadTask(dir);
  ASSERT_TRUE(task) << task.error().message;
  const ScoringEnvironment env = nativeEnvironment(*task);
  // The candidate: the shipped pristine kernel, which is correct everywhere.
  const fs::path tree = tmp_ / "honest";
  ASSERT_TRUE(copyTree(fs::path(AKAD_SOURCE_TASKS) / "cpu/prefix_sum/workspace", tree).ok());
  auto r = scoreCandidate(*task, tree, tmp_ / "score-untimeable", env);
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_TRUE((*r)["correct"].get<bool>()) << r->dump(2);
  EXPECT_TRUE((*r)["speedup"].is_number()) << r->dump(2);
  const json& perf = (*r)["gates"]["held_out_performance"];
  EXPECT_FALSE(perf["pass"].get<bool>()) << r->dump(2);
  EXPECT_TRUE(perf.value("baseline_failed", false)) << r->dump(2);
  EXPECT_NE(perf.value("reason", std::string()).find("baseline failed (task problem)"), std::string::npos);
  EXPECT_TRUE((*r)["gates"]["held_out_correctness"]["pass"].get<bool>()) << r->dump(2);
  EXPECT_TRUE((*r)["held_out_correct"].get<bool>()) << r->dump(2);
  EXPECT_TRUE((*r)["held_out_speedup"].is_null()) << r->dump(2);
  EXPECT_FALSE(r->contains("failure")) << r->dump(2);

  // In a report: kept in the held-out correctness, left out of the held-out speedup.
  const json report = runReport({{"1", task->id, "scored", *r, ""}});
  EXPECT_DOUBLE_EQ(report["held_out_correctness_retention"].get<double>(), 1.0);
  EXPECT_TRUE(report["held_out_speedup_retention"].is_null()) << report.dump(2);
  EXPECT_TRUE(report["per_attempt"][0]["held_out_speedup"].is_null());
}

TEST_F(AkaWrapScoring, AKernelFittedToTheVisibleSizesFailsTheHeldOutOnes) {
  const fs::path tree = candidate("fitted", [](const fs::path& d) {
    std::ofstream(d / "source/py_dot.py") << "def dot(a, b):\n    if len(a) in (2000, 20000, 60000):\n"
                                             "        return sum(x * y for x, y in zip(a, b))\n    return 0.0\n";
  });
  auto r = scoreCandidate(task_, tree, tmp_ / "score-fitted", environment());
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_TRUE((*r)["correct"].get<bool>()) << r->dump(2);
  EXPECT_FALSE((*r)["held_out_correct"].get<bool>()) << r->dump(2);
  EXPECT_TRUE((*r)["held_out_speedup"].is_null());
  EXPECT_NE((*r)["gates"]["held_out_correctness"]["reason"].get<std::string>().find("correctness: FAIL for n=3001"),
            std::string::npos) << r->dump(2);
}

// A task classified compat on NVIDIA (it passes AMD-only Triton launch options) runs with the
// compat layer of the torch image's cuda-hip folder: the options are dropped before the launch,
// and the result lists the feature and what was dropped. The Triton here is a STAND-IN inside
// the fixture task (the real one needs a GPU) that refuses unknown options as Triton's CUDA
// backend does, so without the layer the same task fails. An unchanged task gets no layer.
TEST_F(AkaWrapScoring, SizesFromAPytestParametrizeListAreKeptOnlyWhereThePristineBaselinePasses) {
  auto imported = importCpuTask("triton2triton/cpu/py_param_sum");
  ASSERT_TRUE(imported);
  ASSERT_EQ(imported->first.held_out_generated, 4u) << imported->first.toJson(false).dump();
  const Task* task = &imported->second;
  auto spec = json::parse(readText(task->dir / "aka.json"));
  EXPECT_EQ(spec["held_out_generated"]["old_code"], "@pytest.mark.parametrize(\"n\", [1000, 4000]");
  const fs::path tree = tmp_ / "param-sum";
  ASSERT_TRUE(copyTree(task->workspaceDir(), tree).ok());
  {
    std::string text = readText(tree / "test_pairsum.py");
    const std::string slow = text.substr(text.find("def pairsum(a):"), text.find("@pytest") - text.find("def pairsum(a):"));
    text.replace(text.find(slow), slow.size(), "def pairsum(a):\n    return [x + y for x, y in zip(a[0::2], a[1::2])]\n\n\n");
    std::ofstream(tree / "test_pairsum.py") << text;
  }
  auto s = scoreCandidate(*task, tree, tmp_ / "score-param-sum", environment());
  ASSERT_TRUE(s) << s.error().message;
  expectOnlyTheEvenScaledUpSizeKept(*s);
  // The agent's file keeps its visible sizes; only the scorer's copy had them replaced.
  EXPECT_NE(readText(task->workspaceDir() / "test_pairsum.py").find("[1000, 4000]"), std::string::npos);
}

TEST_F(AkaWrapScoring, AmdTritonOptionsAreDroppedAndRecordedWithAStandInTriton) {
  auto imported = importCpuTask("triton2triton/cpu/py_amd_options");
  ASSERT_TRUE(imported);
  ASSERT_EQ(imported->first.cls, aka::TaskClass::Compat) << imported->first.toJson(false).dump();
  ASSERT_EQ(imported->first.compat, (std::vector<std::string>{"triton-amd-options"}));
  const Task* task = &imported->second;
  auto image = loadImageProfile(AKAD_SOURCE_IMAGES, "torch");
  ASSERT_TRUE(image) << image.error().message;
  ScoringEnvironment env = environment();
  env.image = *image;
  env.measure_performance = false;

  auto s = scoreCandidate(*task, task->workspaceDir(), tmp_ / "score-compat", env);
  ASSERT_TRUE(s) << s.error().message;
  EXPECT_TRUE((*s)["correct"].get<bool>()) << s->dump(2);
  EXPECT_EQ((*s)["compat_applied"], json::array({"triton-amd-options"}));
  std::set<std::string> dropped;
  for (const json& e : (*s)["compat_record"])
    if (e.value("action", "") == "dropped") dropped.insert(e.value("option", "") + "@" + e.value("kernel", ""));
  EXPECT_EQ(dropped, (std::set<std::string>{"kpack@scale_kernel", "waves_per_eu@scale_kernel"})) << s->dump(2);

  // The same task where the image carries no layer: nothing is applied, and it says so.
  auto bare = scoreCandidate(*task, task->workspaceDir(), tmp_ / "score-bare", environment());
  ASSERT_TRUE(bare) << bare.error().message;
  EXPECT_FALSE((*bare)["correct"].get<bool>()) << bare->dump(2);
  EXPECT_NE((*bare)["failure"].get<std::string>().find("waves_per_eu was specified but unrecognised"), std::string::npos);
  EXPECT_EQ((*bare)["compat_applied"], json::array());
  EXPECT_FALSE((*bare)["compat_unavailable"].get<std::string>().empty());

  // An unchanged task, with the same image: no layer, no record.
  auto plain = scoreCandidate(task_, task_.workspaceDir(), tmp_ / "score-plain", env);
  ASSERT_TRUE(plain) << plain.error().message;
  EXPECT_TRUE((*plain)["correct"].get<bool>()) << plain->dump(2);
  EXPECT_EQ((*plain)["compat_applied"], json::array());
  EXPECT_FALSE(plain->contains("compat_record"));
  EXPECT_FALSE(fs::exists(tmp_ / "score-plain" / "compat"));
}

TEST_F(AkaWrapScoring, ThePristineBaselinesCachesAreKeptPerTaskVersionAcrossScorings) {
  const fs::path tree = candidate("fast", [](const fs::path& d) { std::ofstream(d / "source/py_dot.py") << kFastDot; });
  auto first = scoreCandidate(task_, tree, tmp_ / "score-1", environment());
  ASSERT_TRUE(first) << first.error().message;
  const fs::path kept = environment().trusted_cache / task_.content_hash / "aka-jit-baseline" / "pycache";
  // Python's compiled standard library, written by the baseline's first run: a module whose
  // source does not change between scorings.
  fs::path cached;
  for (const auto& e : fs::recursive_directory_iterator(kept))
    if (e.path().filename().string().rfind("random.", 0) == 0 && e.path().extension() == ".pyc") cached = e.path();
  ASSERT_FALSE(cached.empty()) << "no compiled random module under " << kept;
  const auto firstWrite = fs::last_write_time(cached);
  // The candidate's caches live in its scoring directory only.
  EXPECT_TRUE(fs::exists(tmp_ / "score-1" / "jit-candidate" / "pycache"));
  EXPECT_FALSE(fs::exists(tmp_ / "score-1" / "jit-baseline"));

  auto second = scoreCandidate(task_, tree, tmp_ / "score-2", environment());
  ASSERT_TRUE(second) << second.error().message;
  EXPECT_TRUE((*second)["correct"].get<bool>());
  EXPECT_EQ(fs::last_write_time(cached), firstWrite) << "the kept bytecode was written again: " << cached;
  // The baseline's correctness command ran, untimed, in the task version's first scoring only:
  // what its scripts build is then in the kept folder before any timed round.
  EXPECT_TRUE(fs::exists(tmp_ / "score-1" / "logs" / "baseline-correctness.out"));
  EXPECT_TRUE((*first)["stage_wall_s"].contains("baseline correctness")) << first->dump(2);
  EXPECT_FALSE(fs::exists(tmp_ / "score-2" / "logs" / "baseline-correctness.out"));
  EXPECT_FALSE((*second)["stage_wall_s"].contains("baseline correctness")) << second->dump(2);
}

// The compiled candidate module under a scoring's cache folder (Python's bytecode of
// source/py_dot.py), or nothing.
fs::path candidateBytecode(const fs::path& scoring) {
  std::error_code ec;
  for (fs::recursive_directory_iterator it(scoring / "jit-candidate" / "pycache", ec), end; it != end; it.increment(ec))
    if (it->path().filename().string().rfind("py_dot.", 0) == 0 && it->path().extension() == ".pyc") return it->path();
  return {};
}

TEST_F(AkaWrapScoring, AReScoreOfTheSameBytesStartsFromTheirKeptBuildAndNothingElseDoes) {
  ScoringEnvironment env = environment();
  env.build_cache = tmp_ / "state" / "build-cache";
  env.build_cache_scope = "uid 1000";
  const fs::path tree = candidate("fast", [](const fs::path& d) { std::ofstream(d / "source/py_dot.py") << kFastDot; });
  auto first = scoreCandidate(task_, tree, tmp_ / "score-1", env);
  ASSERT_TRUE(first) << first.error().message;
  ASSERT_TRUE((*first)["correct"].get<bool>()) << first->dump(2);
  const json& c1 = (*first)["build_cache"];
  EXPECT_FALSE(c1["hit"].get<bool>()) << c1.dump();
  EXPECT_EQ(c1["kept"].get<std::string>().rfind("kept (", 0), 0u) << c1.dump();
  const fs::path built = candidateBytecode(tmp_ / "score-1");
  ASSERT_FALSE(built.empty()) << "the candidate's module was not compiled into its cache folder";

  // The same bytes again (a re-score): the kept build is current, so Python does not write the
  // module's bytecode again (its time is the first scoring's, kept through the cache).
  auto second = scoreCandidate(task_, tree, tmp_ / "score-2", env);
  ASSERT_TRUE(second) << second.error().message;
  EXPECT_TRUE((*second)["correct"].get<bool>()) << second->dump(2);
  EXPECT_TRUE((*second)["build_cache"]["hit"].get<bool>()) << second->dump(2);
  EXPECT_EQ((*second)["build_cache"]["key"], c1["key"]);
  const fs::path again = candidateBytecode(tmp_ / "score-2");
  ASSERT_FALSE(again.empty());
  EXPECT_EQ(fs::last_write_time(again), fs::last_write_time(built)) << "the module was compiled again: " << again;
  // Within one scoring the held-out phase's copy is current too (same bytes, same times).
  EXPECT_TRUE((*second)["held_out_correct"].get<bool>()) << second->dump(2);

  // Other bytes, or the same bytes from another submitter, start from nothing.
  const fs::path other = candidate("other", [](const fs::path& d) {
    std::ofstream(d / "source/py_dot.py") << kFastDot << "# another candidate\n";
  });
  auto third = scoreCandidate(task_, other, tmp_ / "score-3", env);
  ASSERT_TRUE(third) << third.error().message;
  EXPECT_FALSE((*third)["build_cache"]["hit"].get<bool>()) << third->dump(2);
  EXPECT_NE((*third)["build_cache"]["key"], c1["key"]);
  ScoringEnvironment otherSubmitter = env;
  otherSubmitter.build_cache_scope = "uid 1001";
  auto fourth = scoreCandidate(task_, tree, tmp_ / "score-4", otherSubmitter);
  ASSERT_TRUE(fourth) << fourth.error().message;
  EXPECT_FALSE((*fourth)["build_cache"]["hit"].get<bool>()) << fourth->dump(2);
  // A candidate that does not compile leaves nothing behind for its bytes.
  const fs::path broken = candidate("broken", [](const fs::path& d) { std::ofstream(d / "source/py_dot.py") << "def dot(:\n"; });
  auto fifth = scoreCandidate(task_, broken, tmp_ / "score-5", env);
  ASSERT_TRUE(fifth) << fifth.error().message;
  EXPECT_EQ((*fifth)["build_cache"]["kept"], "not kept: the candidate did not compile") << fifth->dump(2);
  EXPECT_FALSE(fs::exists(env.build_cache / (*fifth)["build_cache"]["key"].get<std::string>()));
}

// AKA's torch2hip tasks ship their target file empty (the agent writes the kernel from nothing),
// found on the H200 with AKA d6f7c8a4: there is no pristine kernel to build or to time.
TEST_F(AkaWrapScoring, ATaskWithoutAPristineKernelIsTimedAgainstThePyTorchOriginal) {
  auto imported = importCpuTask("torch2hip/cpu/py_relu");
  ASSERT_TRUE(imported);
  const Task* task = &imported->second;
  // Validation can check only the evaluator: a broken candidate must fail.
  auto v = validateTask(*task, environment(), tmp_ / "validate-relu", 1.2);
  ASSERT_TRUE(v) << v.error().message;
  EXPECT_TRUE((*v)["ok"].get<bool>()) << v->dump(2);
  EXPECT_EQ((*v)["baseline"]["kernel"], false) << v->dump(2);
  EXPECT_FALSE((*v)["broken"]["compiled"].get<bool>()) << v->dump(2);

  // A kernel written into the empty file: correct, and timed only in the candidate's runs, each
  // of which times the original beside it.
  const fs::path tree = tmp_ / "relu";
  ASSERT_TRUE(copyTree(task->workspaceDir(), tree).ok());
  std::ofstream(tree / "kernel/relu_impl.py") << "def forward(xs):\n    return [x if x > 0 else 0.0 for x in xs]\n";
  auto s = scoreCandidate(*task, tree, tmp_ / "score-relu", environment());
  ASSERT_TRUE(s) << s.error().message;
  EXPECT_TRUE((*s)["correct"].get<bool>()) << s->dump(2);
  const json& perf = (*s)["gates"]["performance"];
  EXPECT_EQ(perf["order"].get<std::string>().rfind("candidate only", 0), 0u) << perf.dump(2);
  ASSERT_EQ(perf["cases"].size(), 2u) << perf.dump(2);
  for (const json& c : perf["cases"]) {
    EXPECT_EQ(c["baseline_ms"].size(), 2u) << c.dump();  // the original's time from each of the two runs
    EXPECT_GT(c["speedup"].get<double>(), 0.0);
  }
  EXPECT_TRUE(perf["outside_speedup"].is_null());
  // Imported without held-out shapes and with no list akad's rules read: none to score, which
  // the report does not count as a held-out failure.
  EXPECT_EQ((*s)["held_out_available"], false) << s->dump(2);
  EXPECT_EQ((*s)["held_out"].get<std::string>().rfind("none for this task", 0), 0u) << s->dump(2);
  for (const auto& e : fs::directory_iterator(tmp_ / "score-relu" / "logs"))
    EXPECT_EQ(e.path().filename().string().find("baseline-compile"), std::string::npos) << "the empty pristine file was built";

  // The pristine (empty) file as a candidate does not compile.
  auto empty = scoreCandidate(*task, task->workspaceDir(), tmp_ / "score-empty", environment());
  ASSERT_TRUE(empty) << empty.error().message;
  EXPECT_FALSE((*empty)["compiled"].get<bool>()) << empty->dump(2);
  EXPECT_EQ((*empty)["score"], 0.0);
}

TEST_F(AkaWrapScoring, AnEditToTheEvaluatorIsIgnoredSoAWrongKernelFails) {
  // The kernel is wrong, and the agent rewrote AKA's runner to pass whatever it is given.
  const fs::path tree = candidate("cheat", [](const fs::path& d) {
    std::ofstream(d / "source/py_dot.py") << "def dot(a, b):\n    return 0.0\n";
    std::ofstream(d / "scripts/task_runner.py") << "print('correctness: PASS')\n";
  });
  auto r = scoreCandidate(task_, tree, tmp_ / "score-cheat", environment());
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_TRUE((*r)["compiled"].get<bool>()) << r->dump(2);
  EXPECT_FALSE((*r)["correct"].get<bool>()) << r->dump(2);
  EXPECT_NE((*r)["failure"].get<std::string>().find("correctness: FAIL"), std::string::npos) << r->dump(2);
  EXPECT_EQ((*r)["ignored_changes"], json::array({"scripts/task_runner.py (changed)"}));
  EXPECT_EQ((*r)["score"], 20.0);
}

TEST_F(AkaWrapScoring, ValidationPassesThePristineBaselineAndRejectsABrokenOne) {
  auto v = validateTask(task_, environment(), tmp_ / "validate", 1.2);
  ASSERT_TRUE(v) << v.error().message;
  EXPECT_TRUE((*v)["ok"].get<bool>()) << v->dump(2);
  EXPECT_TRUE((*v)["baseline"]["correct"].get<bool>());
  EXPECT_TRUE((*v)["baseline"]["held_out_correct"].get<bool>()) << v->dump(2);
  EXPECT_FALSE((*v)["broken"]["compiled"].get<bool>()) << v->dump(2);
}

// Which tasks get the compat layer: on NVIDIA a task of class compat, with its run-time features
// (perf-helpers were filled in at import); never an unchanged task, never a task imported for AMD.
TEST(AkaCompatLayer, OnlyCompatTasksImportedForNvidiaGetIt) {
  ImageProfile torch;
  torch.name = "torch";
  torch.binds.push_back({fs::path(AKAD_SOURCE_IMAGES) / "cuda-hip", "/akad/images/cuda-hip", false});
  aka::WrapSpec spec;
  spec.platform = "nvidia";
  spec.cls = "compat";
  spec.compat = {"hip-extension", "perf-helpers", "rocm-torch-headers"};
  const aka::CompatLayer layer = aka::locateCompatLayer(spec, torch);
  EXPECT_EQ(layer.features, (std::vector<std::string>{"hip-extension", "rocm-torch-headers"}));
  EXPECT_EQ(layer.hostDir, fs::path(AKAD_SOURCE_IMAGES) / "cuda-hip" / "aka-compat");
  EXPECT_EQ(layer.sandboxDir, "/akad/images/cuda-hip/aka-compat");

  SandboxRequest r;
  r.env = {{"PYTHONPATH", "/akad/aka-site"}, {"HIP_PATH", "/akad/images/cuda-hip"}};
  test::TempDir tmp;
  ASSERT_TRUE(aka::addCompatLayer(r, layer, tmp / "record", 0, 0).ok());
  EXPECT_EQ(r.env["AKAD_AKA_COMPAT"], "hip-extension,rocm-torch-headers");
  EXPECT_EQ(r.env["PYTHONPATH"], "/akad/aka-site:/akad/images/cuda-hip/aka-compat/python");
  EXPECT_EQ(r.env["HIPCXX"], "/akad/images/cuda-hip/bin/hipcc");
  ASSERT_EQ(r.binds.size(), 1u);
  EXPECT_EQ(r.binds[0].target, "/akad/aka-compat-record");
  EXPECT_TRUE(r.binds[0].writable);

  spec.platform = "amd";
  EXPECT_FALSE(aka::locateCompatLayer(spec, torch).active());
  EXPECT_TRUE(aka::locateCompatLayer(spec, torch).unavailable.empty());
  spec.platform = "nvidia";
  spec.cls = "unchanged";
  EXPECT_FALSE(aka::locateCompatLayer(spec, torch).active());
  spec.cls = "compat";
  spec.compat = {"perf-helpers"};
  EXPECT_FALSE(aka::locateCompatLayer(spec, torch).active());
  spec.compat = {"triton-amd-options"};
  const aka::CompatLayer none = aka::locateCompatLayer(spec, ImageProfile{});
  EXPECT_FALSE(none.active());
  EXPECT_NE(none.unavailable.find("has no compat layer"), std::string::npos) << none.unavailable;
}

// The record is read from what the sandbox left: malformed lines are skipped, and a record that
// is not a regular file (a link to a file of the host) is not read at all.
TEST(AkaCompatLayer, TheRecordIsReadOnlyFromARegularFile) {
  test::TempDir tmp;
  std::ofstream(tmp / "record.jsonl") << "{\"feature\": \"triton-amd-options\", \"action\": \"dropped\"}\nnot json\n"
                                      << "{\"action\": \"no feature\"}\n[1]\n";
  auto lines = aka::readCompatRecord(tmp.path(), 10);
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0]["action"], "dropped");
  fs::create_directories(tmp / "linked");
  fs::create_symlink(tmp / "record.jsonl", tmp / "linked" / "record.jsonl");
  EXPECT_TRUE(aka::readCompatRecord(tmp / "linked", 10).empty());
}

// The GEAK harnesses' printed latency shares its output with the candidate's code, which may
// print anything after the key: what is not one finite positive number is no time, and never
// an exception in the daemon (std::stod of "." or of 400 digits threw, and nothing caught it).
TEST(AkaReports, APrintedGeakLatencyThatIsNoNumberIsNoTimeAndNoCrash) {
  EXPECT_EQ(aka::geakLatencyMs("warm-up\nGEAK_RESULT_LATENCY_MS=0.125\n"), 0.125);
  EXPECT_EQ(aka::geakLatencyMs("GEAK_RESULT_LATENCY_MS=2\nGEAK_RESULT_LATENCY_MS=0.001\n"), 2.0);  // the first, as AKA
  for (const std::string& hostile : std::vector<std::string>{"GEAK_RESULT_LATENCY_MS=.", "GEAK_RESULT_LATENCY_MS=...", "GEAK_RESULT_LATENCY_MS=1.2.3",
                                    "GEAK_RESULT_LATENCY_MS=0", "GEAK_RESULT_LATENCY_MS=" + std::string(400, '9'),
                                    "GEAK_RESULT_LATENCY_MS=-1", "no latency here"})
    EXPECT_FALSE(aka::geakLatencyMs(hostile)) << hostile;
}

TEST(AkaReports, TimesAreReadWithAkasKeysAndHostTimesRefused) {
  auto list = aka::parsePerformanceReport(
      R"([{"test_case_id": "a", "execution_time_ms": 2.0, "wall_time_ms": 9},
          {"test_case_id": "b", "timing_ms": {"median": 3.0}},
          {"test_case_id": "c", "wall_time_ms": 4.0},
          {"time": 1500}])",
      "triton2triton", false);
  ASSERT_TRUE(list) << list.error().message;
  EXPECT_EQ(list->size(), 3u);
  EXPECT_EQ(list->at("a"), 2.0);
  EXPECT_EQ(list->at("b"), 3.0);
  EXPECT_FALSE(list->count("c"));
  EXPECT_EQ(list->at("test_case_3"), 1500000.0);  // AKA reads an "execution time" >= 1000 as seconds
  auto torch = R"({"test_cases": [{"test_case_id": "x", "ori_time": 5.0, "opt_time": 2.5}]})";
  EXPECT_EQ(aka::parsePerformanceReport(torch, "torch2hip", false)->at("x"), 2.5);
  EXPECT_EQ(aka::parsePerformanceReport(torch, "torch2hip", true)->at("x"), 5.0);
  EXPECT_FALSE(aka::parsePerformanceReport("[{\"test_case_id\": \"d\", \"time_ms\": 1}, {\"test_case_id\": \"d\", \"time_ms\": 2}]",
                                           "triton2triton", false));
  EXPECT_FALSE(aka::parsePerformanceReport("not json", "triton2triton", false));
  EXPECT_TRUE(aka::akaOutputSaysFail("test FAILED\n"));
  EXPECT_FALSE(aka::akaOutputSaysFail("1 failed, 3 passed"));
  EXPECT_FALSE(aka::akaOutputSaysFail("all good"));
}

TEST(AkaReports, ARunReportShowsAkasOwnScoreBesideAkads) {
  AttemptOutcome wrapped{"a-1", "aka-triton2triton-vllm/x", "scored",
                         {{"mode", "wrap"}, {"compiled", true}, {"correct", true}, {"speedup", 1.5}, {"score", 270.0},
                          {"held_out_correct", false}, {"aka", {{"speedup", 2.0}, {"score", 320.0}}}},
                         ""};
  AttemptOutcome native{"a-2", "cpu/softmax", "scored", {{"compiled", true}, {"correct", false}, {"score", 20.0}}, ""};
  json report = runReport({wrapped, native});
  const json& rows = report["per_attempt"];
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0]["mode"], "wrap");
  EXPECT_EQ(rows[0]["speedup"], 1.5);
  EXPECT_EQ(rows[0]["aka_speedup"], 2.0);
  EXPECT_EQ(rows[0]["aka_score"], 320.0);
  EXPECT_FALSE(rows[1].contains("aka_score"));
}

// On a host with an NVIDIA GPU and the torch image's Python: the pristine baseline of each
// Triton family of the fixture checkout passes AKA's own gates in wrap mode, timed against
// itself (so about 1x). The HIP families need the compat layer (docs/aka.md, "Not built yet").
TEST_F(AkaWrapScoring, OnAGpuTheTritonFamiliesPristineBaselinesPass) {
  std::string skip;
  const auto host = torchGpuHost(skip);
  if (!host) GTEST_SKIP() << skip;
  const auto& [gpuId, image] = *host;

  aka::ImportOptions o;
  o.checkout = AKA_FIXTURE_CHECKOUT;
  o.platform = aka::Platform::Nvidia;
  o.stateDir = tmp_ / "gpu-state";
  o.selectors = {"triton2triton/vllm/triton_plain_copy", "triton2triton/vllm/triton_scale_rows",
                 "triton2triton/rocmbench/easy/test_vec_add"};
  auto r = aka::importCheckout(o);
  ASSERT_TRUE(r) << r.error().message;
  ScoringEnvironment env = environment();
  env.image = image;
  env.gpus = {gpuId};
  for (const auto& t : r->tasks) {
    ASSERT_TRUE(t.imported) << t.toJson(false).dump();
    auto task = loadTask(aka::importedTasksRoot(o.stateDir) / t.id);
    ASSERT_TRUE(task) << task.error().message;
    const auto start = std::chrono::steady_clock::now();
    auto s = scoreCandidate(*task, task->workspaceDir(), tmp_ / ("score-" + t.id.substr(t.id.find('/') + 1)), env);
    ASSERT_TRUE(s) << s.error().message;
    EXPECT_TRUE((*s)["correct"].get<bool>()) << t.name << ": " << s->dump(2);
    if ((*s)["correct"].get<bool>()) {
      EXPECT_GT((*s)["speedup"].get<double>(), 0.5) << t.name;
      EXPECT_LT((*s)["speedup"].get<double>(), 2.0) << t.name;
    }
    std::printf("%s: scored in %.1f s (stages %s)\n", t.name.c_str(),
                std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(),
                (*s)["stage_wall_s"].dump().c_str());
  }
}

// convert mode on a GPU (docs/aka.md, "Scoring (convert mode)"): the fixture checkout's gpumode
// tasks, converted, through akad's own driver and worker. The pristine kernel passes and runs
// about as fast as itself, and akad's held-out cases are those of its rules the pristine kernel
// passes; a kernel that skips the bias fails however the agent edits AKA's module (the scorer
// takes the HIP file only), and its second scoring takes the build from the cache; an empty
// torch2hip file runs the PyTorch model.
TEST_F(AkaWrapScoring, OnAGpuConvertedTasksAreScoredByTheProtectedHarness) {
  std::string skip;
  const auto host = torchGpuHost(skip);
  if (!host) GTEST_SKIP() << skip;
  const auto& [gpuId, image] = *host;

  aka::ImportOptions o;
  o.checkout = AKA_CONVERT_CHECKOUT;
  o.platform = aka::Platform::Nvidia;
  o.stateDir = tmp_ / "convert-state";
  o.convert = true;
  o.commonSource = fs::path(AKAD_SOURCE_TASKS) / "common";
  auto r = aka::importCheckout(o);
  ASSERT_TRUE(r) << r.error().message;
  ScoringEnvironment env = environment();
  env.tasks_root = aka::importedTasksRoot(o.stateDir);
  env.trusted_cache = o.stateDir / "tasks";
  env.akacheck = AKACHECK_BIN;
  env.image = image;
  env.gpus = {gpuId};
  env.build_cache = o.stateDir / "build-cache";
  env.build_cache_scope = "uid 0";
  auto load = [&](const std::string& id) {
    auto t = loadTask(env.tasks_root / id);
    EXPECT_TRUE(t) << (t ? "" : t.error().message);
    return *t;
  };
  int scorings = 0;
  auto score = [&](const Task& task, const std::function<void(const fs::path&)>& edit) {
    const fs::path dir = tmp_ / ("agent-" + std::to_string(scorings));
    EXPECT_TRUE(copyTree(task.workspaceDir(), dir).ok());
    edit(dir);
    const auto start = std::chrono::steady_clock::now();
    auto s = scoreCandidate(task, dir, tmp_ / ("score-" + std::to_string(scorings++)), env);
    EXPECT_TRUE(s) << (s ? "" : s.error().message);
    std::printf("%s: scored in %.1f s: compiled %d correct %d speedup %s stages %s\n", task.id.c_str(),
                std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(),
                s ? (*s)["compiled"].get<bool>() : 0, s ? (*s)["correct"].get<bool>() : 0,
                s ? (*s)["speedup"].dump().c_str() : "-", s ? (*s)["stage_wall_s"].dump().c_str() : "-");
    // Per configuration, for convert mode's timing of calls that are mostly Python: the same
    // pristine code has read 0.95x and 1.39x against itself on an H100.
    const json perf = s ? s->value("gates", json::object()).value("performance", json::object()) : json::object();
    for (const json& c : perf.value("configs", json::array()))
      std::printf("  %s: speedup %s overhead_ns %s round medians %s\n", c.value("name", "?").c_str(),
                  c.value("speedup", json()).dump().c_str(), c.value("overhead_ns", json()).dump().c_str(),
                  c.value("round_medians_ns", json()).dump().c_str());
    std::fflush(stdout);
    return s ? *s : json::object();
  };
  const Task bias = load("aka-convert-hip2hip-gpumode/addchannelbias");
  const std::string hip = "hip/hip_7_AddChannelBias.hip";
  const json pristine = score(bias, [](const fs::path&) {});
  ASSERT_TRUE(pristine.contains("correct") && pristine["correct"].get<bool>()) << pristine.dump(2);
  EXPECT_GT(pristine["speedup"].get<double>(), 0.7);
  EXPECT_LT(pristine["speedup"].get<double>(), 1.4);
  EXPECT_EQ(pristine["mode"], "convert");
  EXPECT_TRUE(pristine["aka"]["speedup"].is_number()) << pristine.dump(2);
  // Held-out: akad's four cases for it vary the rows; the pristine kernel (one block, at most
  // 1024 elements) passes the two within its reach, and only those are scored.
  ASSERT_TRUE(pristine.contains("held_out_generated")) << pristine.dump(2);
  EXPECT_EQ(pristine["held_out_generated"]["kept"], json({"held-out-0-prime", "held-out-3-scaled-down"})) << pristine.dump(2);
  EXPECT_EQ(pristine["held_out_generated"]["dropped"].size(), 2u);
  EXPECT_TRUE(pristine["held_out_correct"].get<bool>()) << pristine.dump(2);
  EXPECT_TRUE(pristine["stage_wall_s"].contains("held_out_selection")) << pristine.dump(2);
  // The bias left out, and AKA's module edited to leave it out too: the edit is ignored. The
  // same bytes twice: built once, then taken from the build cache.
  auto skipBias = [&](const fs::path& d) {
    std::string k = akafixture::readText(d / hip);
    k.replace(k.find("x[i] + bias[i % channels]"), 25, "x[i]");
    akafixture::writeText(d / hip, k);
    akafixture::writeText(d / "pytorch_code_module/py_7_AddChannelBias.py",
                          "# edited\n" + akafixture::readText(d / "pytorch_code_module/py_7_AddChannelBias.py"));
  };
  const json first = score(bias, skipBias);
  const json second = score(bias, skipBias);
  for (const json* s : {&first, &second}) {
    EXPECT_TRUE((*s)["compiled"].get<bool>()) << s->dump(2);
    EXPECT_FALSE((*s)["correct"].get<bool>()) << s->dump(2);
    EXPECT_NE((*s)["ignored_changes"].dump().find("pytorch_code_module"), std::string::npos) << s->dump(2);
  }
  EXPECT_FALSE(first["held_out_correct"].get<bool>()) << first.dump(2);
  // The choice is the task version's: later scorings read it.
  EXPECT_EQ(first["held_out_generated"], pristine["held_out_generated"]);
  EXPECT_LT(first["stage_wall_s"].value("held_out_selection", 99.0), 0.5) << first.dump(2);  // no run: read
  EXPECT_EQ(first["build_cache"]["hit"], false) << first.dump(2);
  EXPECT_EQ(second["build_cache"]["hit"], true) << second.dump(2);
  // torch2hip ships its kernel file empty: the PyTorch model runs, as fast as itself.
  const json empty = score(load("aka-convert-torch2hip-kernelbench/level1-l1n7_rowsum"), [](const fs::path&) {});
  EXPECT_TRUE(empty["correct"].get<bool>()) << empty.dump(2);
}

// torch is not installed on the machines that run the unit tests: a stand-in module named torch
// records the seed it is given, which is all the re-mapping touches.
TEST(AkaSeeds, TorchManualSeedIsRemappedWithTheScoringsSalt_FakeTorch) {
  test::TempDir tmp;
  fs::create_directories(tmp / "site");
  fs::create_directories(tmp / "fake/torch");
  std::ofstream(tmp / "site/sitecustomize.py") << aka::seedRemapSiteCustomize();
  std::ofstream(tmp / "fake/torch/__init__.py") << "from . import random\nseeds = []\n\ndef manual_seed(s):\n    seeds.append(s)\n";
  std::ofstream(tmp / "fake/torch/random.py") << "def manual_seed(s):\n    raise RuntimeError('not re-mapped')\n";
  const std::string script =
      "import os, torch\ntorch.manual_seed(42)\ntorch.random.manual_seed(7)\n"
      "print(torch.seeds, os.environ.get('AKAD_SEED_SALT'))\n";
  const std::string path = "PYTHONPATH=" + (tmp / "site").string() + ":" + (tmp / "fake").string();
  auto salted = test::runCommand({"/usr/bin/env", path, "AKAD_SEED_SALT=123", "python3", "-c", script});
  ASSERT_EQ(salted.exitCode, 0) << salted.err;
  const unsigned long long mul = 6364136223846793005ull;
  auto remap = [&](unsigned long long s) {
    return std::to_string(static_cast<unsigned long long>((static_cast<unsigned __int128>(s) * mul + 123) % (1ull << 63)));
  };
  EXPECT_EQ(salted.out, "[" + remap(42) + ", " + remap(7) + "] None\n");
  auto plain = test::runCommand({"/usr/bin/env", path, "python3", "-c", script});
  ASSERT_NE(plain.exitCode, 0);  // without a salt nothing is re-mapped: the stand-in's random.manual_seed raises
  EXPECT_NE(plain.err.find("not re-mapped"), std::string::npos) << plain.err;
}

}  // namespace
