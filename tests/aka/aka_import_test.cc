// Import of an AgentKernelArena checkout (daemon/aka/): discovery, config validation,
// classification per platform, commit and file-hash records, and the task definitions the
// importer writes, all against the fixture checkout in tests/aka/fixtures/checkout (tasks in
// AKA's format written for these tests). Every test works on its own copy in a temp dir.

#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <sstream>

#include "common/sha256.h"
#include "daemon/aka/checkout.h"
#include "daemon/aka/classify.h"
#include "daemon/aka/config.h"
#include "daemon/aka/import.h"
#include "daemon/aka/measured.h"
#include "daemon/pipeline/files.h"
#include "daemon/pipeline/task.h"
#include "tests/aka/aka_test_files.h"
#include "tests/daemon/harness.h"

namespace fs = std::filesystem;
using nlohmann::json;
using namespace akad;
using namespace akad::aka;

using namespace akad::akafixture;

namespace {

// A copy of the fixture checkout and a state dir, both the test's own.
struct Workdir {
  test::TempDir tmp;
  fs::path checkout = tmp / "aka";
  fs::path state = tmp / "state";
  Workdir() {
    EXPECT_TRUE(copyTree(kFixture, checkout).ok());
    fs::create_directories(state);
  }
  Result<ImportReport> import(Platform p, std::vector<std::string> select = {}) {
    ImportOptions o;
    o.checkout = checkout;
    o.selectors = std::move(select);
    o.platform = p;
    o.stateDir = state;
    return importCheckout(o);
  }
};

std::map<std::string, const ImportedTask*> byName(const ImportReport& r) {
  std::map<std::string, const ImportedTask*> m;
  for (const auto& t : r.tasks) m[t.name] = &t;
  return m;
}

bool anyReasonHas(const ImportedTask& t, const std::string& text) {
  return std::any_of(t.reasons.begin(), t.reasons.end(), [&](const std::string& r) { return r.find(text) != std::string::npos; });
}

const std::vector<std::string> kAllTasks = {
    "hip2hip/gpumode/ScaledRelu",
    "torch2hip/gpumode/AddBias",
    "torch2hip/gpumode/ApplyUtilsNeg",
    "triton2triton/geak_eval/L3/fp4_gate",
    "triton2triton/rocmbench/easy/test_vec_add",
    "triton2triton/rocmbench/hard/test_tuned_matmul",
    "triton2triton/vllm/triton_broken",
    "triton2triton/vllm/triton_fp8_cast",
    "triton2triton/vllm/triton_plain_copy",
    "triton2triton/vllm/triton_scale_rows",
};

}  // namespace

TEST(AkaDiscovery, EveryConfigYamlUnderTasksIsATaskNamedByItsPath) {
  auto names = discoverTasks(kFixture, {});
  ASSERT_TRUE(names) << names.error().message;
  EXPECT_EQ(*names, kAllTasks);
}

TEST(AkaDiscovery, SelectorsArePathPrefixesByWholeComponents) {
  auto vllm = discoverTasks(kFixture, {"triton2triton/vllm"});
  ASSERT_TRUE(vllm) << vllm.error().message;
  EXPECT_EQ(vllm->size(), 4u);
  auto two = discoverTasks(kFixture, {"hip2hip", "triton2triton/rocmbench/easy/"});
  ASSERT_TRUE(two) << two.error().message;
  EXPECT_EQ(*two, (std::vector<std::string>{"hip2hip/gpumode/ScaledRelu", "triton2triton/rocmbench/easy/test_vec_add"}));
  auto partial = discoverTasks(kFixture, {"triton2triton/vll"});
  ASSERT_FALSE(partial);
  EXPECT_NE(partial.error().message.find("'triton2triton/vll' matches no task"), std::string::npos) << partial.error().message;
  test::TempDir empty;
  auto none = discoverTasks(empty.path(), {});
  ASSERT_FALSE(none);
  EXPECT_NE(none.error().message.find("has no tasks/ folder"), std::string::npos);
}

TEST(AkaCommit, ReadWithoutGitFromLooseRefPackedRefDetachedHeadAndWorktreeFile) {
  test::TempDir d;
  const std::string a(40, 'a'), b = "0123456789abcdef0123456789abcdef01234567", c(40, 'c');
  EXPECT_FALSE(readCheckoutCommit(d.path()).known());
  EXPECT_NE(readCheckoutCommit(d.path()).note.find("not a git checkout"), std::string::npos);

  writeText(d / ".git/HEAD", "ref: refs/heads/main\n");
  writeText(d / ".git/refs/heads/main", a + "\n");
  auto loose = readCheckoutCommit(d.path());
  EXPECT_EQ(loose.commit, a);
  EXPECT_EQ(loose.ref, "refs/heads/main");

  fs::remove(d / ".git/refs/heads/main");
  writeText(d / ".git/packed-refs", "# pack-refs with: peeled fully-peeled sorted\n" + b + " refs/heads/main\n^" + c + "\n");
  EXPECT_EQ(readCheckoutCommit(d.path()).commit, b);

  writeText(d / ".git/HEAD", c + "\n");
  auto detached = readCheckoutCommit(d.path());
  EXPECT_EQ(detached.commit, c);
  EXPECT_TRUE(detached.ref.empty());

  // A linked worktree: .git is a file, refs live in the main repository ("commondir").
  test::TempDir w;
  writeText(w / ".git", "gitdir: " + (d / ".git/worktrees/wt").string() + "\n");
  writeText(d / ".git/worktrees/wt/HEAD", "ref: refs/heads/main\n");
  writeText(d / ".git/worktrees/wt/commondir", "../..\n");
  EXPECT_EQ(readCheckoutCommit(w.path()).commit, b);

  // A ref that climbs out of .git is not followed.
  writeText(d / ".git/HEAD", "ref: refs/../../../etc/passwd\n");
  auto climbing = readCheckoutCommit(d.path());
  EXPECT_FALSE(climbing.known());
  EXPECT_NE(climbing.note.find("unusable ref"), std::string::npos);
}

TEST(AkaConfig, MalformedConfigIsRefusedWithEveryProblemNamed) {
  auto text = readText(kFixture / "tasks/triton2triton/vllm/triton_broken/config.yaml");
  auto c = parseTaskConfig(text, "triton2triton/vllm/triton_broken");
  ASSERT_FALSE(c);
  const std::string& m = c.error().message;
  EXPECT_NE(m.find("triton2triton/vllm/triton_broken/config.yaml"), std::string::npos) << m;
  EXPECT_NE(m.find("source_file_path: must be a list of strings"), std::string::npos) << m;
  EXPECT_NE(m.find("compile_command: missing"), std::string::npos) << m;
  EXPECT_NE(m.find("performance_command: is an empty list"), std::string::npos) << m;
  EXPECT_NE(m.find("compile_timeout: must be a number of seconds"), std::string::npos) << m;

  // Several names in one entry, as some of AKA's rocmbench configs write them.
  auto tuned = parseTaskConfig(readText(kFixture / "tasks/triton2triton/rocmbench/hard/test_tuned_matmul/config.yaml"),
                               "triton2triton/rocmbench/hard/test_tuned_matmul");
  ASSERT_TRUE(tuned) << tuned.error().message;
  EXPECT_EQ(tuned->target_kernel_functions, (std::vector<std::string>{"matmul_kernel", "matmul"}));

  EXPECT_FALSE(parseTaskConfig("- a list\n", "x"));
  EXPECT_FALSE(parseTaskConfig("key: [unclosed\n", "x"));
  auto escaping = parseTaskConfig(
      "task_type: hip2hip\nsource_file_path: [../../etc/passwd]\ncompile_command: [a]\ncorrectness_command: [b]\n"
      "performance_command: [c]\n", "x");
  ASSERT_FALSE(escaping);
  EXPECT_NE(escaping.error().message.find("must be a relative path inside the task folder"), std::string::npos);
}

namespace {
// The fields an AKA task must have, valid.
const std::string kRequired =
    "task_type: hip2hip\nsource_file_path: [k.hip]\ncompile_command: [a]\ncorrectness_command: [b]\n"
    "performance_command: [c]\n";
}  // namespace

// config.yaml is read by the one config validator: every problem at once, one line each, named
// "TASK/config.yaml: KEY: what" as the import reports name them.
TEST(AkaConfig, EveryProblemOfAConfigIsReportedOnALineOfItsOwn) {
  auto c = parseTaskConfig(
      "task_type: [hip2hip]\nsource_file_path: [k.hip, '']\ncompile_command: ''\ncorrectness_command: {run: b}\n"
      "performance_command: [c]\ncompile_timeout: 0\nperformance_timeout: [60]\ntarget_file_path: /etc/passwd\n"
      "prompt: [do it]\n",
      "suite/t");
  ASSERT_FALSE(c);
  const std::string& m = c.error().message;
  const std::vector<std::string> lines = test::linesOf(m);
  EXPECT_EQ(lines.size(), 8u) << m;
  for (const std::string& line : lines) EXPECT_EQ(line.rfind("suite/t/config.yaml: ", 0), 0u) << line;
  for (const char* needle : {"task_type: must be a string", "source_file_path[1]: must be a non-empty string",
                             "compile_command: is an empty string", "correctness_command: must be a list of strings",
                             "compile_timeout: must be between 1 and 604800 seconds, not 0",
                             "performance_timeout: must be a number of seconds, not a list",
                             "target_file_path: '/etc/passwd' must be a relative path inside the task folder",
                             "prompt: must be a map (instructions, ...) or a string"})
    EXPECT_NE(m.find(needle), std::string::npos) << needle << " not in:\n" << m;
}

// A quoted timeout is a string, as it is to AKA's Python (where it would fail its subprocess
// call); and YAML 1.1's yes is no boolean but the text written.
TEST(AkaConfig, AValueOfTheWrongTypeIsRefusedAndPlainScalarsStayAsWritten) {
  auto quoted = parseTaskConfig(kRequired + "compile_timeout: \"600\"\n", "x");
  ASSERT_FALSE(quoted);
  EXPECT_NE(quoted.error().message.find("x/config.yaml: compile_timeout: must be a number of seconds, not '600'"),
            std::string::npos)
      << quoted.error().message;
  auto plain = parseTaskConfig(
      "task_type: yes\nsource_file_path: 1.10\ncompile_command: [make, 2024]\ncorrectness_command: [b]\n"
      "performance_command: c\ncompile_timeout: 600\ncorrectness_timeout: 1.5e2\nprompt: 42\n",
      "x");
  ASSERT_TRUE(plain) << plain.error().message;
  EXPECT_EQ(plain->task_type, "yes");
  EXPECT_EQ(plain->source_files, std::vector<std::string>{"1.10"});
  EXPECT_EQ(plain->compile, (std::vector<std::string>{"make", "2024"}));
  EXPECT_EQ(plain->performance, std::vector<std::string>{"c"});
  EXPECT_EQ(plain->compile_timeout_s, 600);
  EXPECT_EQ(plain->correctness_timeout_s, 150);
  EXPECT_EQ(plain->performance_timeout_s, 3600) << "AKA's default";
  EXPECT_EQ(plain->instructions, "42");
}

// AKA's tasks carry keys akad does not read (and AKA adds more): they are ignored, never refused.
// A key with no value is no key, as for AKA's dict.get; platform_support is tolerated as AKA
// tolerates it.
TEST(AkaConfig, UnknownKeysAreIgnoredAndEmptyValuesAreAbsent) {
  auto c = parseTaskConfig(kRequired +
                               "difficulty: hard\nbenchmark: {suite: rocm, shapes: [[1, 2]]}\ntarget_file_path:\n"
                               "compile_timeout:\nprompt: {instructions: Go., cheatsheet: none}\n"
                               "platform_support: {status: SKIP, skip_reason: needs MI300, required_arch: [gfx942], "
                               "vendor: amd}\n",
                           "x");
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_EQ(c->target_file, "");
  EXPECT_EQ(c->compile_timeout_s, 3600);
  EXPECT_EQ(c->instructions, "Go.");
  EXPECT_TRUE(c->platform_support.present);
  EXPECT_EQ(c->platform_support.status, "skip");
  EXPECT_EQ(c->platform_support.skip_reason, "needs MI300");
  EXPECT_EQ(c->platform_support.required_arch, "");
  EXPECT_EQ(c->notes, std::vector<std::string>{"platform_support.required_arch is not a string; ignored, as AKA does"});
  auto missing = parseTaskConfig("task_type: hip2hip\nsource_file_path:\ncompile_command: [a]\n", "x");
  ASSERT_FALSE(missing);
  for (const char* needle : {"source_file_path: missing", "correctness_command: missing", "performance_command: missing"})
    EXPECT_NE(missing.error().message.find(needle), std::string::npos) << needle << " not in:\n" << missing.error().message;
}

TEST(AkaClassify, OnNvidiaEachClassWithItsReason) {
  Workdir w;
  auto r = w.import(Platform::Nvidia);
  ASSERT_TRUE(r) << r.error().message;
  ASSERT_EQ(r->tasks.size(), kAllTasks.size());
  auto t = byName(*r);

  const ImportedTask& plain = *t["triton2triton/vllm/triton_plain_copy"];
  EXPECT_EQ(plain.cls, TaskClass::Unchanged);
  EXPECT_TRUE(plain.compat.empty());

  const ImportedTask& scale = *t["triton2triton/vllm/triton_scale_rows"];
  EXPECT_EQ(scale.cls, TaskClass::Compat);
  EXPECT_EQ(scale.compat, std::vector<std::string>{"perf-helpers"});
  EXPECT_TRUE(anyReasonHas(scale, "AKA-GENERATED"));

  const ImportedTask& vecAdd = *t["triton2triton/rocmbench/easy/test_vec_add"];
  EXPECT_EQ(vecAdd.cls, TaskClass::Compat);
  EXPECT_EQ(vecAdd.compat, std::vector<std::string>{"perf-helpers"});

  const ImportedTask& matmul = *t["triton2triton/rocmbench/hard/test_tuned_matmul"];
  EXPECT_EQ(matmul.cls, TaskClass::Compat);
  EXPECT_EQ(matmul.compat, std::vector<std::string>{"triton-amd-options"});
  EXPECT_TRUE(anyReasonHas(matmul, "waves_per_eu"));

  const ImportedTask& relu = *t["hip2hip/gpumode/ScaledRelu"];
  EXPECT_EQ(relu.cls, TaskClass::Compat);
  EXPECT_EQ(relu.compat, (std::vector<std::string>{"hip-extension", "hip-runtime-macros", "rocm-torch-headers"}));
  EXPECT_TRUE(anyReasonHas(relu, "c10/hip/HIPStream.h"));

  const ImportedTask& bias = *t["torch2hip/gpumode/AddBias"];
  EXPECT_EQ(bias.cls, TaskClass::Compat);
  EXPECT_EQ(bias.compat, (std::vector<std::string>{"hip-extension", "rocm-torch-headers"}));
  EXPECT_TRUE(anyReasonHas(bias, "the ROCm-PyTorch header ATen/cuda/HIPContext.h, shimmed"));

  const ImportedTask& neg = *t["torch2hip/gpumode/ApplyUtilsNeg"];
  EXPECT_EQ(neg.cls, TaskClass::NeedsEdit);
  EXPECT_TRUE(anyReasonHas(neg, "ATen/hip/HIPApplyUtils.cuh, for which akad has no shim"));

  const ImportedTask& fp4 = *t["triton2triton/geak_eval/L3/fp4_gate"];
  EXPECT_EQ(fp4.cls, TaskClass::Impossible);
  EXPECT_TRUE(anyReasonHas(fp4, "exits unless the GPU is the AMD architecture gfx950")) << fp4.toJson(false).dump();

  const ImportedTask& fp8 = *t["triton2triton/vllm/triton_fp8_cast"];
  EXPECT_EQ(fp8.cls, TaskClass::Impossible);
  EXPECT_TRUE(anyReasonHas(fp8, "float8_e4m3fnuz"));

  const ImportedTask& broken = *t["triton2triton/vllm/triton_broken"];
  EXPECT_EQ(broken.cls, TaskClass::Invalid);
  EXPECT_TRUE(anyReasonHas(broken, "compile_command: missing"));

  for (const auto& task : r->tasks) {
    EXPECT_FALSE(task.reasons.empty()) << task.name;
    EXPECT_EQ(task.imported, isRunnable(task.cls)) << task.name;
  }
}

// InnerProd's pattern (measured on the H200: a SIGSEGV at its first call): host code that reads
// a tensor's device data, which ROCm maps for the host and CUDA does not.
TEST(AkaClassify, HostReadsOfDeviceDataNeedManagedMemoryOnNvidiaOnly) {
  AkaTaskConfig c;
  c.task_type = "hip2hip";
  c.source_files = {"hip/k.hip"};
  c.target_file = "hip/k.hip";
  c.compile = {"python3 compile.py"};
  c.correctness = {"python3 compile.py"};
  c.performance = {"python3 compile.py"};
  auto file = [](const std::string& path, const std::string& text) {
    TaskFile f;
    f.path = path;
    f.text = text;
    f.scanned = true;
    return f;
  };
  const std::string kernel = "#include <torch/extension.h>\n#include <hip/hip_runtime.h>\n";
  const TaskFile script = file("compile.py", "from torch.utils.cpp_extension import load\n");
  for (const char* read : {"  const float  bi = bias.data_ptr<float>()[0];\n", "  float b = *bias.data_ptr<float>();\n"}) {
    auto k = classifyTask("hip2hip/gpumode/K", c, {script, file("hip/k.hip", kernel + read)}, Platform::Nvidia);
    EXPECT_TRUE(std::count(k.compat.begin(), k.compat.end(), "host-reads-device-memory")) << read;
    EXPECT_TRUE(std::any_of(k.reasons.begin(), k.reasons.end(), [](const std::string& r) {
      return r.find("hip/k.hip:3 reads a tensor's data on the host") != std::string::npos;
    })) << read;
    auto amd = classifyTask("hip2hip/gpumode/K", c, {script, file("hip/k.hip", kernel + read)}, Platform::Amd);
    EXPECT_TRUE(amd.compat.empty()) << read;
  }
  // Passing the pointers to a kernel reads nothing on the host.
  auto launch = classifyTask("hip2hip/gpumode/K", c,
                             {script, file("hip/k.hip", kernel + "  float* p = x.data_ptr<float>(); f<<<1, 1>>>(p, y.data_ptr<float>());\n")},
                             Platform::Nvidia);
  EXPECT_FALSE(std::count(launch.compat.begin(), launch.compat.end(), "host-reads-device-memory"));
}

TEST(AkaClassify, OnAmdTheNvidiaGapsAreNoReason) {
  Workdir w;
  auto r = w.import(Platform::Amd);
  ASSERT_TRUE(r) << r.error().message;
  auto t = byName(*r);
  EXPECT_EQ(t["triton2triton/vllm/triton_fp8_cast"]->cls, TaskClass::Unchanged);
  EXPECT_EQ(t["triton2triton/rocmbench/hard/test_tuned_matmul"]->cls, TaskClass::Unchanged);
  EXPECT_EQ(t["hip2hip/gpumode/ScaledRelu"]->cls, TaskClass::Unchanged);
  EXPECT_EQ(t["torch2hip/gpumode/ApplyUtilsNeg"]->cls, TaskClass::Unchanged);
  // AKA's helpers are filled in on every platform.
  EXPECT_EQ(t["triton2triton/vllm/triton_scale_rows"]->cls, TaskClass::Compat);
  EXPECT_EQ(t["triton2triton/vllm/triton_broken"]->cls, TaskClass::Invalid);
}

TEST(AkaClassify, WithoutAGpuEveryTaskIsImpossible) {
  Workdir w;
  auto r = w.import(Platform::Cpu);
  ASSERT_TRUE(r) << r.error().message;
  for (const auto& t : r->tasks) {
    if (t.name == "triton2triton/vllm/triton_broken") continue;
    EXPECT_EQ(t.cls, TaskClass::Impossible) << t.name;
    EXPECT_TRUE(anyReasonHas(t, "needs a GPU")) << t.name;
    EXPECT_FALSE(t.imported);
  }
  EXPECT_FALSE(fs::exists(importedTasksRoot(w.state) / "aka-triton2triton-vllm"));
}

TEST(AkaClassify, PlatformSupportAndNetworkAndMissingScriptsAreRead) {
  Workdir w;
  const fs::path task = w.checkout / "tasks/triton2triton/vllm/triton_plain_copy/config.yaml";
  std::string cfg = readText(task);
  writeText(task, cfg + "platform_support:\n  required_arch: gfx950\n  status: active\n");
  auto arch = w.import(Platform::Nvidia, {"triton2triton/vllm/triton_plain_copy"});
  ASSERT_TRUE(arch) << arch.error().message;
  EXPECT_EQ(arch->tasks[0].cls, TaskClass::Impossible);
  EXPECT_TRUE(anyReasonHas(arch->tasks[0], "gfx950"));

  writeText(task, cfg + "platform_support:\n  status: skip\n  skip_reason: flaky on every GPU\n");
  auto skip = w.import(Platform::Amd, {"triton2triton/vllm/triton_plain_copy"});
  ASSERT_TRUE(skip);
  EXPECT_EQ(skip->tasks[0].cls, TaskClass::Impossible);
  EXPECT_TRUE(anyReasonHas(skip->tasks[0], "flaky on every GPU"));

  // A harness that imports AMD's aiter library cannot run on NVIDIA (seen on the H200).
  const fs::path runner = w.checkout / "tasks/triton2triton/vllm/triton_plain_copy/scripts/task_runner.py";
  const std::string runnerText = readText(runner);
  writeText(task, cfg);
  writeText(runner, "import os\nfrom aiter import ops\n" + runnerText);
  auto aiter = w.import(Platform::Nvidia, {"triton2triton/vllm/triton_plain_copy"});
  ASSERT_TRUE(aiter);
  EXPECT_EQ(aiter->tasks[0].cls, TaskClass::Impossible);
  EXPECT_TRUE(anyReasonHas(aiter->tasks[0], "imports aiter"));
  writeText(runner, runnerText);

  std::string net = cfg;
  net.replace(net.find("python3 scripts/task_runner.py compile"), 38, "pip install triton && python3 scripts/missing.py");
  writeText(task, net);
  auto fetch = w.import(Platform::Nvidia, {"triton2triton/vllm/triton_plain_copy"});
  ASSERT_TRUE(fetch);
  EXPECT_EQ(fetch->tasks[0].cls, TaskClass::NeedsEdit);
  EXPECT_TRUE(anyReasonHas(fetch->tasks[0], "sandboxes have no network"));
  EXPECT_TRUE(anyReasonHas(fetch->tasks[0], "scripts/missing.py, which is not a file of the task folder"));
}

TEST(AkaImport, RunnableTasksBecomeTaskDefinitionsAkadsLoaderAccepts) {
  Workdir w;
  auto r = w.import(Platform::Nvidia);
  ASSERT_TRUE(r) << r.error().message;
  const fs::path root = importedTasksRoot(w.state);
  int imported = 0;
  for (const auto& t : r->tasks) {
    const fs::path dir = root / t.id;
    if (!t.imported) {
      EXPECT_FALSE(fs::exists(dir)) << t.id;
      continue;
    }
    ++imported;
    auto task = loadTask(dir);
    ASSERT_TRUE(task) << task.error().message;
    EXPECT_EQ(task->id, t.id);
    EXPECT_EQ(task->harness, "aka-wrap");
    EXPECT_TRUE(task->gpu);
    EXPECT_EQ(task->image, "torch");
    EXPECT_TRUE(task->held_out.empty());
    EXPECT_EQ(task->editable, t.editable);
    auto spec = json::parse(readText(dir / "aka.json"));
    EXPECT_EQ(spec["name"], t.name);
    EXPECT_EQ(spec["mode"], "wrap");
    EXPECT_FALSE(spec["commands"]["performance"].empty());
  }
  EXPECT_EQ(imported, 6);
  auto t = byName(*r);
  EXPECT_EQ(t["hip2hip/gpumode/ScaledRelu"]->id, "aka-hip2hip-gpumode/scaledrelu");
  EXPECT_EQ(t["triton2triton/rocmbench/easy/test_vec_add"]->id, "aka-triton2triton-rocmbench/easy-test_vec_add");
  // The trust mapping: torch2hip's agent edits the HIP file only, never the PyTorch reference.
  EXPECT_EQ(t["torch2hip/gpumode/AddBias"]->editable, std::vector<std::string>{"hip/hip_add_bias.hip"});
  EXPECT_EQ(t["hip2hip/gpumode/ScaledRelu"]->editable, std::vector<std::string>{"hip/hip_scaled_relu.hip"});
  auto rocm = json::parse(readText(root / t["triton2triton/rocmbench/easy/test_vec_add"]->id / "aka.json"));
  EXPECT_EQ(rocm["editable"], json::array({"test_vec_add.py"}));
  EXPECT_EQ(rocm["splice_functions"], json::array({"vec_add_kernel"}));
  auto rocmTask = loadTask(root / t["triton2triton/rocmbench/easy/test_vec_add"]->id);
  ASSERT_TRUE(rocmTask);
  EXPECT_NE(rocmTask->prompt.find("only the top-level definitions of vec_add_kernel are taken"), std::string::npos)
      << rocmTask->prompt;

  // Every verdict, refused ones included, is kept for `akactl tasks list`.
  auto index = readImportIndex(w.state);
  ASSERT_TRUE(index) << index.error().message;
  EXPECT_EQ(index->size(), kAllTasks.size());
  EXPECT_EQ((*index)["triton2triton/vllm/triton_fp8_cast"]["class"], "impossible");
  EXPECT_EQ((*index)["triton2triton/vllm/triton_broken"]["class"], "invalid");
  EXPECT_FALSE((*index)["triton2triton/vllm/triton_broken"]["reasons"].empty());
}

TEST(AkaImport, RecordsTheCommitAndTheHashOfEveryFileRead) {
  Workdir w;
  const std::string commit = "d6f7c8a4d6f7c8a4d6f7c8a4d6f7c8a4d6f7c8a4";
  auto before = w.import(Platform::Nvidia, {"triton2triton/vllm/triton_scale_rows"});
  ASSERT_TRUE(before);
  EXPECT_FALSE(before->commit.known());
  EXPECT_NE(before->commit.note.find("not a git checkout"), std::string::npos);
  EXPECT_TRUE(before->toJson(false)["commit"].is_null());

  writeText(w.checkout / ".git/HEAD", "ref: refs/heads/main\n");
  writeText(w.checkout / ".git/refs/heads/main", commit + "\n");
  auto r = w.import(Platform::Nvidia, {"triton2triton/vllm/triton_scale_rows"});
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->commit.commit, commit);
  const ImportedTask& t = r->tasks.at(0);
  const std::vector<std::string> expected = {
      "src/tools/perf/vllm_cuda_graph_block.py",
      "tasks/triton2triton/vllm/triton_scale_rows/config.yaml",
      "tasks/triton2triton/vllm/triton_scale_rows/scripts/task_runner.py",
      "tasks/triton2triton/vllm/triton_scale_rows/source/triton_scale_rows.py",
  };
  std::vector<std::string> got;
  for (const auto& [path, sha] : t.files) {
    got.push_back(path);
    auto real = sha256File(w.checkout / path);
    ASSERT_TRUE(real);
    EXPECT_EQ(sha, *real) << path;
  }
  EXPECT_EQ(got, expected);
  auto spec = json::parse(readText(importedTasksRoot(w.state) / t.id / "aka.json"));
  EXPECT_EQ(spec["commit"], commit);
  EXPECT_EQ(spec["files"].size(), expected.size());
  EXPECT_EQ(spec["files"]["src/tools/perf/vllm_cuda_graph_block.py"], t.files.at("src/tools/perf/vllm_cuda_graph_block.py"));
}

// A measured outcome (measured.h) is keyed on the digest of the task's files as measured: the
// same name with other bytes, or on another platform, keeps the static rules' class. The digest
// follows every file's path and content.
TEST(AkaMeasured, AMeasuredOutcomeAppliesOnlyToTheBytesMeasuredOnTheirPlatform) {
  const std::string name = "hip2hip/gpumode/InnerProd";
  const std::string measured = "5c9ac2faa3de8de0da94ef0f4eac71af1d61b87ec477a6ab90a9a7251ee686ff";  // AKA d6f7c8a4
  Classification k;
  k.needCompat(compat::kHipExtension, "a .hip source");
  Classification other = k, amd = k, same = k;
  EXPECT_FALSE(applyMeasuredOutcome(name, Platform::Nvidia, std::string(64, '0'), other));
  EXPECT_EQ(other.cls, TaskClass::Compat);
  EXPECT_EQ(other.reasons, k.reasons);
  EXPECT_FALSE(applyMeasuredOutcome(name, Platform::Amd, measured, amd));
  EXPECT_EQ(amd.cls, TaskClass::Compat);
  ASSERT_TRUE(applyMeasuredOutcome(name, Platform::Nvidia, measured, same));
  EXPECT_EQ(same.cls, TaskClass::NeedsEdit);
  EXPECT_NE(same.reasons.back().find("measured"), std::string::npos);
  EXPECT_NE(same.reasons.back().find("d6f7c8a4"), std::string::npos);

  const std::map<std::string, std::string> files = {{"tasks/a/config.yaml", "11"}, {"tasks/a/k.hip", "22"}};
  const std::string d = taskDigest(files);
  EXPECT_EQ(d.size(), 64u);
  EXPECT_EQ(taskDigest(files), d);
  auto changed = files;
  changed["tasks/a/k.hip"] = "23";
  EXPECT_NE(taskDigest(changed), d);
  auto moved = files;
  moved.erase("tasks/a/k.hip");
  moved["tasks/a/k2.hip"] = "22";
  EXPECT_NE(taskDigest(moved), d);
}

// The digest the import reports is that of what it read of the task.
TEST(AkaImport, ReportsTheDigestOfTheTasksFilesAsRead) {
  Workdir w;
  auto r = w.import(Platform::Nvidia, {"triton2triton/vllm/triton_scale_rows"});
  ASSERT_TRUE(r) << r.error().message;
  const ImportedTask& t = r->tasks.at(0);
  EXPECT_EQ(t.toJson(false)["digest"], t.digest);
  std::map<std::string, std::string> read;
  for (const auto& [path, sha] : t.files)
    if (path.starts_with("tasks/")) read[path] = sha;
  EXPECT_EQ(t.digest, taskDigest(read));
}

TEST(AkaImport, HelpersAreFilledIntoTheCopyAndTheCheckoutStaysAsItWas) {
  Workdir w;
  const fs::path runner = w.checkout / "tasks/triton2triton/vllm/triton_scale_rows/scripts/task_runner.py";
  const std::string original = readText(runner);
  auto r = w.import(Platform::Nvidia, {"triton2triton"});
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(readText(runner), original);
  auto t = byName(*r);
  const fs::path root = importedTasksRoot(w.state);
  const std::string filled = readText(root / t["triton2triton/vllm/triton_scale_rows"]->id / "workspace/scripts/task_runner.py");
  EXPECT_EQ(filled.find("helpers were not filled in"), std::string::npos);
  EXPECT_NE(filled.find("start.elapsed_time(end)"), std::string::npos);
  EXPECT_NE(filled.find("# >>> AKA-GENERATED:"), std::string::npos);
  EXPECT_NE(filled.find("# <<< AKA-GENERATED <<<"), std::string::npos);
  EXPECT_NE(filled.find("def load_module():"), std::string::npos);  // the rest of the runner stays
  EXPECT_EQ(t["triton2triton/vllm/triton_scale_rows"]->materialised, std::vector<std::string>{"scripts/task_runner.py"});
  EXPECT_EQ(readText(root / t["triton2triton/rocmbench/easy/test_vec_add"]->id / "workspace/performance_utils_pytest.py"),
            readText(w.checkout / "src/tools/perf/performance_utils_pytest.py"));

  // A checkout without the helper sources cannot fill them: the task needs an edit.
  fs::remove(w.checkout / "src/tools/perf/vllm_cuda_graph_block.py");
  auto missing = w.import(Platform::Nvidia, {"triton2triton/vllm/triton_scale_rows"});
  ASSERT_TRUE(missing);
  EXPECT_EQ(missing->tasks[0].cls, TaskClass::NeedsEdit);
  EXPECT_TRUE(anyReasonHas(missing->tasks[0], "src/tools/perf/vllm_cuda_graph_block.py"));
  EXPECT_FALSE(fs::exists(root / missing->tasks[0].id));
}

TEST(AkaImport, ReimportReplacesTheTaskAndARefusalRemovesIt) {
  Workdir w;
  const std::string name = "triton2triton/vllm/triton_plain_copy";
  auto first = w.import(Platform::Nvidia, {name});
  ASSERT_TRUE(first);
  const fs::path dir = importedTasksRoot(w.state) / first->tasks[0].id;
  auto v1 = loadTask(dir);
  ASSERT_TRUE(v1);

  writeText(w.checkout / "tasks" / name / "source/triton_plain_copy.py",
            readText(w.checkout / "tasks" / name / "source/triton_plain_copy.py") + "# v2\n");
  auto second = w.import(Platform::Nvidia, {name});
  ASSERT_TRUE(second);
  auto v2 = loadTask(dir);
  ASSERT_TRUE(v2);
  EXPECT_NE(v1->content_hash, v2->content_hash);

  writeText(w.checkout / "tasks" / name / "config.yaml", "task_type: triton2triton\n");
  auto third = w.import(Platform::Nvidia, {name});
  ASSERT_TRUE(third);
  EXPECT_EQ(third->tasks[0].cls, TaskClass::Invalid);
  EXPECT_FALSE(fs::exists(dir));
  auto index = readImportIndex(w.state);
  ASSERT_TRUE(index);
  EXPECT_EQ((*index)[name]["class"], "invalid");
  // Nothing of the staging trees is left behind.
  for (const auto& e : fs::directory_iterator(importedTasksRoot(w.state)))
    EXPECT_NE(e.path().filename().string().rfind(".", 0), 0u) << e.path();
}

TEST(AkaImport, SymlinksAndLfsPointersInATaskAreRefusedNotFollowed) {
  Workdir w;
  const fs::path task = w.checkout / "tasks/triton2triton/vllm/triton_plain_copy";
  fs::create_symlink("/etc/hostname", task / "host");
  writeText(w.checkout / "tasks/hip2hip/gpumode/ScaledRelu/data.pt",
            "version https://git-lfs.github.com/spec/v1\noid sha256:abc\nsize 12\n");
  auto r = w.import(Platform::Nvidia, {"triton2triton/vllm/triton_plain_copy", "hip2hip"});
  ASSERT_TRUE(r) << r.error().message;
  auto t = byName(*r);
  EXPECT_EQ(t["triton2triton/vllm/triton_plain_copy"]->cls, TaskClass::NeedsEdit);
  EXPECT_TRUE(anyReasonHas(*t["triton2triton/vllm/triton_plain_copy"], "host is a symlink"))
      << t["triton2triton/vllm/triton_plain_copy"]->toJson(false).dump();
  EXPECT_EQ(t["hip2hip/gpumode/ScaledRelu"]->cls, TaskClass::NeedsEdit);
  EXPECT_TRUE(anyReasonHas(*t["hip2hip/gpumode/ScaledRelu"], "Git LFS pointer"));
}

TEST(AkaCheckoutFiles, ReadsNeverFollowASymlinkOnTheWay) {
  test::TempDir d;
  writeText(d / "outside/secret", "not the checkout's\n");
  writeText(d / "aka/tasks/a/real.txt", "ok\n");
  fs::create_directory_symlink(d / "outside", d / "aka/tasks/a/linked");
  FileLedger ledger(d / "aka");
  auto real = ledger.read("tasks/a/real.txt", 100);
  ASSERT_TRUE(real) << real.error().message;
  EXPECT_EQ(*real, "ok\n");
  auto through = ledger.read("tasks/a/linked/secret", 100);
  ASSERT_FALSE(through);
  EXPECT_NE(through.error().message.find("symlinks are not followed"), std::string::npos) << through.error().message;
  EXPECT_FALSE(ledger.hash("tasks/a/linked/secret"));
  EXPECT_FALSE(ledger.read("../outside/secret", 100));
  EXPECT_FALSE(ledger.read("tasks/a/real.txt", 2));  // over the limit
  EXPECT_EQ(ledger.hashes().size(), 1u);
  EXPECT_EQ(ledger.hashes().at("tasks/a/real.txt"), sha256Hex("ok\n"));
}

TEST(AkaImport, IdsAreStableLoaderSafeAndDistinct) {
  auto ids = assignTaskIds({"a/b/Foo", "a/b/foo", "x/y/" + std::string(80, 'k'), "top/Only", "p/q/r/s.t"});
  EXPECT_NE(ids["a/b/Foo"], ids["a/b/foo"]);
  EXPECT_EQ(ids["a/b/Foo"].rfind("aka-a-b/foo-", 0), 0u) << ids["a/b/Foo"];
  EXPECT_EQ(ids["top/Only"], "aka-top/only");
  EXPECT_EQ(ids["p/q/r/s.t"], "aka-p-q/r-s_t");
  const std::string longId = ids["x/y/" + std::string(80, 'k')];
  EXPECT_LE(longId.size() - longId.find('/') - 1, 64u);
  // The same name always maps to the same id, whatever else the checkout holds.
  EXPECT_EQ(assignTaskIds({"top/Only"})["top/Only"], ids["top/Only"]);
}
