// convert mode (daemon/aka/convert.h, docs/aka.md "Scoring (convert mode)"): AKA's gpumode tasks
// imported as akad tasks of the aka-convert harness. Against tests/aka/fixtures/convert-checkout
// (tasks in AKA's format written for these tests): the case list read from get_inputs, the
// converted task definitions akad's loader accepts, the common layers beside them, and the
// trust mapping of the scoring workspace. Running the converted harness needs PyTorch and a GPU:
// that is the device check's (scripts/device-aka convert).

#include <gtest/gtest.h>

#include "daemon/aka/convert.h"
#include "daemon/aka/import.h"
#include "daemon/pipeline/files.h"
#include "daemon/pipeline/prepare.h"
#include "daemon/pipeline/score.h"
#include "daemon/pipeline/task.h"
#include "tests/aka/aka_test_files.h"
#include "tests/daemon/harness.h"

namespace fs = std::filesystem;
using nlohmann::json;
using namespace akad;
using namespace akad::aka;
using namespace akad::akafixture;

namespace {

const fs::path kConvertFixture = AKA_CONVERT_CHECKOUT;
const fs::path kCommon = fs::path(AKAD_SOURCE_TASKS) / "common";

struct ConvertWorkdir {
  test::TempDir tmp;
  fs::path checkout = tmp / "aka";
  fs::path state = tmp / "state";
  ConvertWorkdir() {
    EXPECT_TRUE(copyTree(kConvertFixture, checkout).ok());
    fs::create_directories(state);
  }
  Result<ImportReport> import(bool convert) {
    ImportOptions o;
    o.checkout = checkout;
    o.platform = Platform::Nvidia;
    o.stateDir = state;
    o.convert = convert;
    o.commonSource = kCommon;
    return importCheckout(o);
  }
  fs::path root() const { return importedTasksRoot(state); }
};

const ImportedTask& taskNamed(const ImportReport& r, const std::string& name) {
  for (const auto& t : r.tasks)
    if (t.name == name) return t;
  throw std::runtime_error("no task " + name);
}

std::string getInputsSource(const std::string& body) { return "import torch\n\n\ndef get_inputs():\n" + body + "\n\ndef get_init_inputs():\n    return []\n"; }

}  // namespace

TEST(AkaConvert, TheCaseListIsReadFromGetInputs) {
  // A name bound to a list, comments and strings holding commas and brackets, a trailing comma.
  auto named = caseListElements(getInputsSource(
      "    configs = [\n        ([1024],),  # 1D, with ] and ,\n        ([8, 64], \"a, [b\"),\n"
      "        # a whole-line comment\n        ([3, 5, 7],),\n    ]\n    for shape in configs:\n"
      "        yield [torch.randn(shape[0])]\n"));
  ASSERT_TRUE(named) << named.error().message;
  EXPECT_EQ(*named, (std::vector<std::string>{"([1024],)", "([8, 64], \"a, [b\")", "([3, 5, 7],)"}));
  // A literal in the loop itself, tuples of sizes unpacked.
  auto literal = caseListElements(getInputsSource("    for b, d in [(512, 16384), (1024, 16384)]:\n        yield [torch.rand(b, d)]\n"));
  ASSERT_TRUE(literal) << literal.error().message;
  EXPECT_EQ(*literal, (std::vector<std::string>{"(512, 16384)", "(1024, 16384)"}));
  // A docstring first, then the loop.
  auto doc = caseListElements(getInputsSource("    \"\"\"Sizes: [1, 2], (3, 4).\"\"\"\n    for n in (4, 8,):\n        yield [torch.rand(n)]\n"));
  ASSERT_TRUE(doc) << doc.error().message;
  EXPECT_EQ(*doc, (std::vector<std::string>{"4", "8"}));
}

TEST(AkaConvert, GetInputsThatIsNoPlainCaseListIsRefusedWithTheReason) {
  const std::vector<std::pair<std::string, std::string>> refused = {
      {getInputsSource("    n = 4\n    while n < 64:\n        yield [torch.rand(n)]\n        n *= 4\n"), "while"},
      {getInputsSource("    for a in [1, 2]:\n        for b in [3, 4]:\n            yield [torch.rand(a, b)]\n"), "loop inside its loop"},
      {getInputsSource("    for a in [1, 2]:\n        yield [torch.rand(a)]\n        yield [torch.rand(a + 1)]\n"), "exactly once"},
      {getInputsSource("    for a in range(4):\n        yield [torch.rand(a)]\n"), "list literal"},
      {getInputsSource("    return [torch.rand(64, 4096)]\n"), "exactly one loop"},
      {getInputsSource("    for a in []:\n        yield [torch.rand(a)]\n"), "empty list"},
      {"import torch\n", "no get_inputs"},
  };
  for (const auto& [source, reason] : refused) {
    auto r = caseListElements(source);
    ASSERT_FALSE(r) << source;
    EXPECT_NE(r.error().message.find(reason), std::string::npos) << r.error().message << "\n" << source;
  }
  std::string many = "    for n in [";
  for (int i = 0; i < 33; ++i) many += std::to_string(i + 1) + ", ";
  auto tooMany = caseListElements(getInputsSource(many + "]:\n        yield [torch.rand(n)]\n"));
  ASSERT_FALSE(tooMany);
  EXPECT_NE(tooMany.error().message.find("more than 32"), std::string::npos);
}

// akad's held-out cases for converted tasks (convert_held_out.h): only the numbers that vary
// between cases of one form change, numbers equal in every case stay equal, the rest of the
// text (names with digits, strings, floats) is untouched.
TEST(AkaConvert, HeldOutCasesChangeOnlyTheSizesThatVaryBetweenCasesOfOneForm) {
  auto texts = [](const std::vector<HeldOutCase>& cases) {
    std::vector<std::string> t;
    for (const auto& c : cases) t.push_back(c.text + " " + c.rule);
    return t;
  };
  // Two forms: 1-D (sizes 1024, 4096) and 2-D (both sizes vary); the groups are taken in turn.
  EXPECT_EQ(texts(heldOutCases({"([1024],)", "([4096],)", "([64, 128],)", "([128, 256],)"})),
            (std::vector<std::string>{"([1031],) prime", "([67, 131],) prime", "([4099],) prime", "([131, 257],) prime",
                                      "([8192],) scaled-up", "([128, 512],) scaled-up"}));
  // x and y share their batch in every case, and the features (128) are the model's.
  EXPECT_EQ(texts(heldOutCases({"([512, 128], [512, 128])", "([1024, 128], [1024, 128])"}, 3)),
            (std::vector<std::string>{"([521, 128], [521, 128]) prime", "([1031, 128], [1031, 128]) prime",
                                      "([2048, 128], [2048, 128]) scaled-up"}));
  // Two sizes that vary apart (input and index lengths), a dimension index that does not vary.
  auto gather = heldOutCases({"([1024], 0, [256])", "([4096], 0, [512])"}, 2);
  EXPECT_EQ(texts(gather), (std::vector<std::string>{"([1031], 0, [257]) prime", "([4099], 0, [521]) prime"}));
  // Names, floats and strings keep their digits; a case alone of its form makes nothing.
  auto typed = heldOutCases({"([64, 32], torch.float32, 1.5, \"v2\")", "([96, 32], torch.float32, 1.5, \"v2\")",
                             "([7, 5, 16],)"}, 1);
  EXPECT_EQ(texts(typed), (std::vector<std::string>{"([67, 32], torch.float32, 1.5, \"v2\") prime"}));
  EXPECT_TRUE(heldOutCases({"([7, 5, 16],)"}).empty());
  EXPECT_TRUE(heldOutCases({"([8, 16],)", "([8, 16],)"}).empty());  // nothing varies
  // Plain sizes (kernelbench's `for b in [...]`).
  EXPECT_EQ(texts(heldOutCases({"4096", "8192", "16384"}, 2)), (std::vector<std::string>{"4099 prime", "16411 prime"}));
}

// A torch2hip task of class Model whose module and functional files are both `source`: what
// planConversion reads of a task.
AkaTaskConfig modelTaskConfig() {
  AkaTaskConfig c;
  c.task_type = "torch2hip";
  c.target_file = "hip/hip_1_Model.hip";
  c.correctness = {"python3 check.py --py_modu_file m.py --py_func_file f.py --hip_file hip/hip_1_Model.hip"};
  return c;
}

TaskFolder modelTaskFolder(const std::string& source) {
  TaskFolder folder;
  for (const auto& [path, text] : {std::pair<std::string, std::string>{"m.py", source},
                                   {"f.py", source},
                                   {"hip/hip_1_Model.hip", ""},
                                   {"check.py", ""}})
    folder.contents.push_back({path, text, false});
  return folder;
}

// A case whose tensor cannot fit one data file of the trusted driver is a refusal at import, not
// a failure at validation (1067_Transpose's last case, [64, 128, 256, 512]: 4 GiB as float32).
TEST(AkaConvert, ACaseTooLargeForOneDataFileIsRefusedAtImport) {
  EXPECT_DOUBLE_EQ(largestShapeBytes("([64, 128, 256, 512],)"), 4.0 * (1ull << 30));
  EXPECT_DOUBLE_EQ(largestShapeBytes("(1024, 2048, 1024)"), 0.0);  // M, K, N of a matmul: no one shape
  EXPECT_DOUBLE_EQ(largestShapeBytes("([8, 16], [4096, 4096])"), 4.0 * 4096 * 4096);
  EXPECT_DOUBLE_EQ(largestShapeBytes("(torch.float32, 'x1')"), 0.0);
  EXPECT_DOUBLE_EQ(largestShapeBytes("([2.5, 3],)"), 0.0);  // not whole numbers: not a shape
  EXPECT_GT(largestShapeBytes("([" + std::string(400, '9') + "],)"), 1e18);  // read, not thrown

  auto source = [](const std::string& lastCase) {
    return "import torch\n\nclass Model(torch.nn.Module):\n    pass\n\n\ndef get_inputs():\n    configs = [\n"
           "        ([4, 8, 16, 32],),\n        ([32, 64, 128, 256],),\n        " + lastCase + ",\n    ]\n"
           "    for shape in configs:\n        yield [torch.rand(shape)]\n";
  };
  const AkaTaskConfig c = modelTaskConfig();
  auto fits = planConversion(c, modelTaskFolder(source("([64, 128, 256, 256],)")));  // 2 GiB
  ASSERT_TRUE(fits) << fits.error().message;
  for (const auto& h : fits->heldOut) EXPECT_LT(largestShapeBytes(h.text), 4.0 * (1ull << 30)) << h.text;
  auto refused = planConversion(c, modelTaskFolder(source("([64, 128, 256, 512],)")));
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.error().message.find("case 2 ([64, 128, 256, 512],) makes a tensor of 4 GiB"), std::string::npos)
      << refused.error().message;
}

// Cases that are tuples of sizes, unpacked by get_inputs's loop into the names its tensors are
// made of (kernelbench's matrix-vector task: its last case is a 4096 x 262144 float32 matrix,
// 4 GiB, which failed only at validation before).
TEST(AkaConvert, ATensorMadeFromAnUnpackedCaseTooLargeForOneDataFileIsRefusedAtImport) {
  auto module = [](const std::string& cases, const std::string& loop, const std::string& yield) {
    return "import torch\n\nclass Model(torch.nn.Module):\n    pass\n\n\ndef get_inputs():\n    for " + loop +
           " in [" + cases + "]:\n        yield [" + yield + "]\n";
  };
  const std::string mv = module("(1024, 131072), (4096, 262144)", "M, K", "torch.rand(M, K), torch.rand(K, 1)");
  EXPECT_DOUBLE_EQ(largestLoopTensorBytes(mv, "(4096, 262144)"), 4.0 * (1ull << 30));
  EXPECT_DOUBLE_EQ(largestLoopTensorBytes(mv, "(1024, 131072)"), 0.5 * (1ull << 30));
  // A matmul's M, K and N make two matrices, not one tensor of M x K x N.
  const std::string mm = module("(1024, 2048, 1024)", "M, K, N", "torch.randn(M, K), torch.randn(K, N)");
  EXPECT_DOUBLE_EQ(largestLoopTensorBytes(mm, "(1024, 2048, 1024)"), 4.0 * 1024 * 2048);
  // The dtype's width, keywords after the sizes, and sizes this rule cannot read.
  const std::string half = module("(65536, 32768)", "M, N", "torch.rand(M, N, dtype=torch.float16, device='cuda')");
  EXPECT_DOUBLE_EQ(largestLoopTensorBytes(half, "(65536, 32768)"), 2.0 * 65536 * 32768);
  const std::string wide = module("(65536, 32768)", "M, N", "torch.zeros(M, N, dtype=torch.float64)");
  EXPECT_DOUBLE_EQ(largestLoopTensorBytes(wide, "(65536, 32768)"), 8.0 * 65536 * 32768);
  const std::string scaled = module("(8, 16)", "B, N", "torch.rand(B * 1000, N), torch.ones(B, 4, N)");
  EXPECT_DOUBLE_EQ(largestLoopTensorBytes(scaled, "(8, 16)"), 4.0 * 8 * 4 * 16);
  // Nothing unpacked, a case that is not a tuple of whole numbers, or one of another length.
  EXPECT_DOUBLE_EQ(largestLoopTensorBytes(module("(4096, 262144)", "shape", "torch.rand(shape)"), "(4096, 262144)"), 0.0);
  EXPECT_DOUBLE_EQ(largestLoopTensorBytes(mv, "(4096, 'x')"), 0.0);
  EXPECT_DOUBLE_EQ(largestLoopTensorBytes(mv, "(4096, 262144, 2)"), 0.0);
  EXPECT_DOUBLE_EQ(largestLoopTensorBytes("def f():\n    pass\n", "(4096, 262144)"), 0.0);

  const AkaTaskConfig c = modelTaskConfig();
  auto refused = planConversion(c, modelTaskFolder(mv));
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.error().message.find("case 1 (4096, 262144) makes a tensor of 4 GiB"), std::string::npos)
      << refused.error().message;
  const std::string fits = module("(1024, 131072), (2048, 262144)", "M, K", "torch.rand(M, K), torch.rand(K, 1)");
  auto plan = planConversion(c, modelTaskFolder(fits));  // 2 GiB: converted
  ASSERT_TRUE(plan) << plan.error().message;
  // The rules' scaled-up case of (2048, 262144) would be 8 GiB: not made; the others are.
  const std::vector<HeldOutCase> all = heldOutCases(plan->cases);
  ASSERT_TRUE(std::any_of(all.begin(), all.end(), [](const HeldOutCase& h) { return h.rule == "scaled-up"; }));
  ASSERT_FALSE(plan->heldOut.empty());
  for (const auto& h : plan->heldOut) {
    EXPECT_NE(h.rule, "scaled-up") << h.text;
    EXPECT_LT(largestLoopTensorBytes(fits, h.text), 4.0 * (1ull << 30)) << h.text;
  }
}

TEST(AkaConvert, GpumodeTasksBecomeTasksOfTheProtectedHarnessBesideTheWrappedOnes) {
  ConvertWorkdir w;
  auto report = w.import(/*convert=*/true);
  ASSERT_TRUE(report) << report.error().message;

  const ImportedTask& bias = taskNamed(*report, "hip2hip/gpumode/AddChannelBias");
  ASSERT_TRUE(bias.imported) << bias.reasons.size();
  EXPECT_EQ(bias.id, "aka-hip2hip-gpumode/addchannelbias");
  EXPECT_EQ(bias.convert_id, "aka-convert-hip2hip-gpumode/addchannelbias");
  ASSERT_TRUE(bias.converted) << (bias.convert_reasons.empty() ? "" : bias.convert_reasons[0]);
  auto task = loadTask(w.root() / bias.convert_id);
  ASSERT_TRUE(task) << task.error().message;
  EXPECT_EQ(task->harness, "aka-convert");
  EXPECT_EQ(task->editable, std::vector<std::string>{"hip/hip_7_AddChannelBias.hip"});
  ASSERT_EQ(task->visible.size(), 3u);
  for (std::size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(task->visible[i]["name"], "case-" + std::to_string(i));
    EXPECT_EQ(task->visible[i]["case"], i);
  }
  // Held-out cases made from the two 2-D cases (the 3-D one has no other of its form): the row
  // count varies, the 16 channels the module was built with stay. The agent's configs.json has
  // none of them.
  ASSERT_EQ(task->held_out.size(), 4u);
  std::vector<std::string> heldTexts;
  for (const auto& c : task->held_out) heldTexts.push_back(c["case_text"]);
  EXPECT_EQ(heldTexts, (std::vector<std::string>{"([37, 16],)", "([67, 16],)", "([128, 16],)", "([17, 16],)"}));
  EXPECT_EQ(task->held_out[0]["name"], "held-out-0-prime");
  EXPECT_EQ(task->held_out[2]["rule"], "scaled-up");
  const json agentConfigs = task->configsJson(/*withHeldOut=*/false);
  EXPECT_EQ(agentConfigs["configs"].size(), 3u);
  EXPECT_EQ(agentConfigs.dump().find("case_text"), std::string::npos) << agentConfigs.dump();
  EXPECT_DOUBLE_EQ(task->tolerances.at("f32").atol, 1e-5);  // AKA's allclose
  EXPECT_DOUBLE_EQ(task->tolerances.at("f32").rtol, 1e-4);
  EXPECT_DOUBLE_EQ(task->tolerances.at("i64").atol, 0);
  // The trusted reference's data: AKA's module and functional model, the class its harness uses.
  const fs::path dir = w.root() / bias.convert_id;
  const json spec = json::parse(readText(dir / "harness/aka_convert.json"));
  EXPECT_EQ(spec["class"], "AddChannelBias");
  EXPECT_EQ(spec["hip"], "hip/hip_7_AddChannelBias.hip");
  EXPECT_EQ(spec["cases"], 3);
  const fs::path aka = w.checkout / "tasks/hip2hip/gpumode/AddChannelBias";
  EXPECT_EQ(readText(dir / "harness/aka_module.py"), readText(aka / "pytorch_code_module/py_7_AddChannelBias.py"));
  EXPECT_EQ(readText(dir / "harness/aka_functional.py"),
            readText(aka / "pytorch_code_functional/py_7_AddChannelBias_func.py"));
  EXPECT_EQ(readText(dir / "workspace/kernel.py"), readText(kCommon / "aka-convert/kernel_loader.py"));
  EXPECT_EQ(readText(dir / "workspace/hip/hip_7_AddChannelBias.hip"), readText(aka / "hip/hip_7_AddChannelBias.hip"));
  const json record = json::parse(readText(dir / "aka.json"));
  EXPECT_EQ(record["mode"], "convert");
  EXPECT_EQ(record["files"].size(), bias.files.size());
  // The layers the converted tasks are assembled from, beside them.
  for (const auto& layer : kConvertLayers) EXPECT_TRUE(fs::is_directory(w.root() / "common" / layer)) << layer;
  EXPECT_EQ(harnessLayers(w.root(), "aka-convert"), (std::vector<std::string>{"cpp", "python", "aka-convert", "checker"}));

  // kernelbench: the module is the agent's source_file_path in AKA, but only the HIP file is editable.
  const ImportedTask& rowsum = taskNamed(*report, "torch2hip/kernelbench/level1/l1n7_RowSum");
  ASSERT_TRUE(rowsum.converted) << (rowsum.convert_reasons.empty() ? "" : rowsum.convert_reasons[0]);
  auto rowTask = loadTask(w.root() / rowsum.convert_id);
  ASSERT_TRUE(rowTask) << rowTask.error().message;
  EXPECT_EQ(rowTask->editable, std::vector<std::string>{"hip/hip_l1n7_RowSum.hip"});
  EXPECT_EQ(rowTask->visible.size(), 3u);

  // A get_inputs that is no plain list keeps its wrapped import and says why it is not converted.
  const ImportedTask& loop = taskNamed(*report, "torch2hip/gpumode/9_WhileInputs");
  EXPECT_FALSE(loop.converted);
  EXPECT_FALSE(fs::exists(w.root() / loop.convert_id));
  ASSERT_FALSE(loop.convert_reasons.empty());
  EXPECT_NE(loop.convert_reasons[0].find("while"), std::string::npos) << loop.convert_reasons[0];
  const json listed = loop.toJson(false);
  EXPECT_EQ(listed["convert"]["imported"], false);
}

TEST(AkaConvert, TheHarnessIsPartOfTheConvertedTasksVersion) {
  ConvertWorkdir w;
  auto report = w.import(true);
  ASSERT_TRUE(report) << report.error().message;
  const fs::path dir = w.root() / taskNamed(*report, "hip2hip/gpumode/AddChannelBias").convert_id;
  auto before = loadTask(dir);
  ASSERT_TRUE(before) << before.error().message;
  std::ofstream(w.root() / "common/aka-convert/reference.py", std::ios::app) << "\n# changed\n";
  auto after = loadTask(dir);
  ASSERT_TRUE(after) << after.error().message;
  EXPECT_NE(before->content_hash, after->content_hash);
}

TEST(AkaConvert, WithoutTheFlagNothingIsConvertedAndARefusedConversionIsRemoved) {
  ConvertWorkdir w;
  auto plain = w.import(false);
  ASSERT_TRUE(plain) << plain.error().message;
  for (const auto& t : plain->tasks) EXPECT_TRUE(t.convert_id.empty()) << t.name;
  EXPECT_FALSE(fs::exists(w.root() / "aka-convert-hip2hip-gpumode"));
  EXPECT_FALSE(fs::exists(w.root() / "common"));

  auto converted = w.import(true);
  ASSERT_TRUE(converted) << converted.error().message;
  const std::string id = taskNamed(*converted, "hip2hip/gpumode/AddChannelBias").convert_id;
  ASSERT_TRUE(fs::exists(w.root() / id));
  // The module's get_inputs changes so that it is no plain list: the earlier conversion goes.
  const fs::path module = w.checkout / "tasks/hip2hip/gpumode/AddChannelBias/pytorch_code_module/py_7_AddChannelBias.py";
  std::string text = readText(module);
  text.replace(text.find("for shape in configs:"), 21, "for shape in configs[:2]:");
  writeText(module, text);
  auto again = w.import(true);
  ASSERT_TRUE(again) << again.error().message;
  const ImportedTask& bias = taskNamed(*again, "hip2hip/gpumode/AddChannelBias");
  EXPECT_TRUE(bias.imported);
  EXPECT_FALSE(bias.converted);
  EXPECT_FALSE(fs::exists(w.root() / id));
}

TEST(AkaConvert, TheScorerTakesOnlyTheHipFileFromTheAgent) {
  ConvertWorkdir w;
  auto report = w.import(true);
  ASSERT_TRUE(report) << report.error().message;
  auto task = loadTask(w.root() / taskNamed(*report, "hip2hip/gpumode/AddChannelBias").convert_id);
  ASSERT_TRUE(task) << task.error().message;
  // The agent's workspace, then its edits: the kernel, and the evaluator's files it must not touch.
  test::TempDir tmp;
  const fs::path agent = tmp / "agent";
  ASSERT_TRUE(prepareAgentWorkspace(*task, w.root(), agent).ok());
  writeText(agent / "hip/hip_7_AddChannelBias.hip", "// the agent's kernel\n");
  writeText(agent / "pytorch_code_module/py_7_AddChannelBias.py", "def get_inputs():\n    return []\n");
  writeText(agent / "kernel.py", "forward = lambda *a: None\n");
  writeText(agent / "harness/aka_convert.json", "{}\n");
  writeText(agent / "harness/reference.py", "def reference(c, i):\n    return {}\n");
  const fs::path ws = tmp / "ws";
  auto assembled = assembleScoringWorkspace(*task, w.root(), agent, ws);
  ASSERT_TRUE(assembled) << assembled.error().message;
  EXPECT_EQ(assembled->taken, std::vector<std::string>{"hip/hip_7_AddChannelBias.hip"});
  EXPECT_EQ(readText(ws / "hip/hip_7_AddChannelBias.hip"), "// the agent's kernel\n");
  const fs::path dir = task->dir;
  EXPECT_EQ(readText(ws / "pytorch_code_module/py_7_AddChannelBias.py"),
            readText(dir / "workspace/pytorch_code_module/py_7_AddChannelBias.py"));
  EXPECT_EQ(readText(ws / "kernel.py"), readText(dir / "workspace/kernel.py"));
  EXPECT_EQ(readText(ws / "harness/aka_convert.json"), readText(dir / "harness/aka_convert.json"));
  EXPECT_EQ(readText(ws / "harness/reference.py"), readText(kCommon / "aka-convert/reference.py"));
  auto listed = [&](const std::string& path) {
    for (const auto& i : assembled->ignored)
      if (i.rfind(path, 0) == 0) return true;
    return false;
  };
  EXPECT_TRUE(listed("pytorch_code_module/py_7_AddChannelBias.py")) << ::testing::PrintToString(assembled->ignored);
  EXPECT_TRUE(listed("kernel.py")) << ::testing::PrintToString(assembled->ignored);
}

TEST(AkaConvert, ResultsCarryAkasOwnSummaryBesideAkads) {
  // akad's speedup is the geometric mean of the cases; AKA's is their mean, scored AKA's way.
  json r = {{"compiled", true}, {"correct", true}, {"speedup", 1.0},
            {"gates", {{"performance", {{"configs", {{{"name", "case-0"}, {"speedup", 2.0}},
                                                     {{"name", "case-1"}, {"speedup", 0.5}}}}}}}}};
  addConvertFigures(r);
  EXPECT_EQ(r["mode"], "convert");
  EXPECT_DOUBLE_EQ(r["aka"]["speedup"].get<double>(), 1.25);
  EXPECT_DOUBLE_EQ(r["aka"]["score"].get<double>(), 120 + 125);
  json wrong = {{"compiled", true}, {"correct", false}, {"gates", json::object()}};
  addConvertFigures(wrong);
  EXPECT_TRUE(wrong["aka"]["speedup"].is_null());
  EXPECT_DOUBLE_EQ(wrong["aka"]["score"].get<double>(), 20);
  json broken = {{"compiled", false}, {"correct", false}, {"gates", json::object()}};
  addConvertFigures(broken);
  EXPECT_DOUBLE_EQ(broken["aka"]["score"].get<double>(), 0);
}
