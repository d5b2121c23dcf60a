// AKA's held-out shapes (daemon/aka/held_out.h): the injection formats, and their import with a
// task: checked against the pristine files, kept where only the scorer reads them.

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "common/sha256.h"
#include "daemon/aka/held_out.h"
#include "daemon/aka/held_out_rules.h"
#include "daemon/aka/import.h"
#include "tests/aka/aka_test_files.h"
#include "tests/daemon/harness.h"

namespace fs = std::filesystem;
using nlohmann::json;
using namespace akad;
using namespace akad::aka;

using namespace akad::akafixture;

namespace {

const fs::path kHeldOut = AKA_FIXTURE_HELD_OUT;

}  // namespace

TEST(AkaHeldOut, TestShapesAreReplacedWholeAtTheirIndentation) {
  const std::string src = "import x\n\nTEST_SHAPES = [\n    (4, [1, 2]),\n    (8, [3]),\n]\nWARMUP = 10\n\n"
                          "def f():\n    TEST_SHAPES = [1]\n";
  auto out = applyInjection(src, {"r.py", "TEST_SHAPES", "TEST_SHAPES = [\n    (5, [7]),\n]\n", ""});
  ASSERT_TRUE(out) << out.error().message;
  EXPECT_EQ(*out, "import x\n\nTEST_SHAPES = [\n    (5, [7]),\n]\nWARMUP = 10\n\ndef f():\n    TEST_SHAPES = [1]\n");
  auto indented = applyInjection("class C:\n    TEST_SHAPES = [1, 2]\n    y = 1\n", {"r.py", "TEST_SHAPES", "TEST_SHAPES = [3]", ""});
  ASSERT_TRUE(indented);
  EXPECT_EQ(*indented, "class C:\n    TEST_SHAPES = [3]\n    y = 1\n");
  auto missing = applyInjection("SHAPES = [1]\n", {"r.py", "TEST_SHAPES", "TEST_SHAPES = [3]", ""});
  ASSERT_FALSE(missing);
  EXPECT_NE(missing.error().message.find("r.py: no 'TEST_SHAPES = ['"), std::string::npos);
  auto same = applyInjection("TEST_SHAPES = [3]\n", {"r.py", "TEST_SHAPES", "TEST_SHAPES = [3]", ""});
  ASSERT_FALSE(same);
  EXPECT_NE(same.error().message.find("changes nothing"), std::string::npos);
}

TEST(AkaHeldOut, GetInputsIsReplacedUpToTheNextStatementAtItsLevel) {
  const std::string src = "import torch\n\ndef get_inputs():\n    # shapes\n    x = torch.randn(4, 4)\n\n    return [x]\n\n"
                          "def get_init_inputs():\n    return []\n";
  auto out = applyInjection(src, {"m.py", "def get_inputs():", "def get_inputs():\n    return [torch.randn(3, 7)]\n", ""});
  ASSERT_TRUE(out) << out.error().message;
  EXPECT_EQ(*out, "import torch\n\ndef get_inputs():\n    return [torch.randn(3, 7)]\ndef get_init_inputs():\n    return []\n");
}

TEST(AkaHeldOut, MalformedFilesAreRefusedWithTheEntryNamed) {
  EXPECT_FALSE(parseHeldOutShapes("injections: []\n", "t"));
  auto noOld = parseHeldOutShapes("injections:\n  - {file: a.py, find_marker: raw_replace, replacement_code: x}\n", "t");
  ASSERT_FALSE(noOld);
  EXPECT_NE(noOld.error().message.find("t: injections[0]: raw_replace needs old_code"), std::string::npos) << noOld.error().message;
  auto marker = parseHeldOutShapes("injections:\n  - {file: a.py, find_marker: SHAPES, replacement_code: x}\n", "t");
  ASSERT_FALSE(marker);
  EXPECT_NE(marker.error().message.find("find_marker 'SHAPES'"), std::string::npos);
  auto climbing = parseHeldOutShapes("injections:\n  - {file: ../a.py, find_marker: TEST_SHAPES, replacement_code: x}\n", "t");
  ASSERT_FALSE(climbing);
  EXPECT_NE(climbing.error().message.find("inside the task folder"), std::string::npos);
  auto ok = parseHeldOutShapes(readText(kHeldOut / "triton2triton/rocmbench/easy/test_vec_add/held_out_shapes.yaml"), "t");
  ASSERT_TRUE(ok) << ok.error().message;
  ASSERT_EQ(ok->size(), 1u);
  EXPECT_EQ((*ok)[0].marker, "raw_replace");
}

TEST(AkaHeldOut, ImportKeepsTheShapesFromTheAgentAndChecksThemAgainstThePristineTask) {
  test::TempDir tmp;
  ImportOptions o;
  o.checkout = kFixture;
  o.platform = Platform::Nvidia;
  o.stateDir = tmp / "state";
  o.heldOutDir = kHeldOut;
  auto r = importCheckout(o);
  ASSERT_TRUE(r) << r.error().message;
  std::map<std::string, const ImportedTask*> t;
  for (const auto& task : r->tasks) t[task.name] = &task;
  EXPECT_EQ(t["triton2triton/vllm/triton_scale_rows"]->held_out_injections, 1u);
  EXPECT_EQ(t["hip2hip/gpumode/ScaledRelu"]->held_out_injections, 1u);
  EXPECT_EQ(t["triton2triton/rocmbench/easy/test_vec_add"]->held_out_injections, 1u);
  EXPECT_EQ(t["triton2triton/vllm/triton_fp8_cast"]->held_out_injections, 0u);  // refused tasks: nothing to keep
  // A set that does not apply leaves the task imported without held-out shapes, and says why.
  const ImportedTask& plain = *t["triton2triton/vllm/triton_plain_copy"];
  EXPECT_TRUE(plain.imported);
  EXPECT_EQ(plain.held_out_injections, 0u);
  EXPECT_TRUE(std::any_of(plain.reasons.begin(), plain.reasons.end(), [](const std::string& s) {
    return s.find("held-out shapes not used") != std::string::npos && s.find("old_code is not in the file") != std::string::npos;
  })) << plain.toJson(false).dump();

  const ImportedTask& scale = *t["triton2triton/vllm/triton_scale_rows"];
  const std::string rel = "triton2triton/vllm/triton_scale_rows/held_out_shapes.yaml";
  EXPECT_EQ(scale.files.at("held-out:" + rel), sha256Hex(readText(kHeldOut / rel)));
  const fs::path dir = importedTasksRoot(o.stateDir) / scale.id;
  // The agent's starting files keep the visible shapes; the held-out ones live in aka.json only.
  const std::string runner = readText(dir / "workspace/scripts/task_runner.py");
  EXPECT_NE(runner.find("(256, 4096)"), std::string::npos);
  EXPECT_EQ(runner.find("(129, 4097)"), std::string::npos);
  auto spec = json::parse(readText(dir / "aka.json"));
  ASSERT_EQ(spec["held_out_injections"].size(), 1u);
  EXPECT_NE(spec["held_out_injections"][0]["replacement_code"].get<std::string>().find("(129, 4097)"), std::string::npos);
  for (const auto& e : fs::recursive_directory_iterator(dir / "workspace")) {
    if (e.is_regular_file()) {
      EXPECT_EQ(readText(e.path()).find("(129, 4097)"), std::string::npos) << e.path();
    }
  }
}

TEST(AkaHeldOutRules, PlainShapeListsAreReadAndAnythingElseIsRefused) {
  auto tuples = parseTestShapes("X = 1\n# (rows, cols)\nTEST_SHAPES = [\n    (4, 128),  # small\n    (64, 1000),\n]\n");
  ASSERT_TRUE(tuples) << tuples.error().message;
  EXPECT_FALSE(tuples->scalars);
  EXPECT_EQ(tuples->shapes, (std::vector<Shape>{{4, 128}, {64, 1000}}));
  auto ints = parseTestShapes("TEST_SHAPES = [2000, 20000, 60000]\n");
  ASSERT_TRUE(ints);
  EXPECT_TRUE(ints->scalars);
  EXPECT_EQ(ints->shapes.size(), 3u);
  auto ones = parseTestShapes("TEST_SHAPES = [(7,), (9,)]\n");
  ASSERT_TRUE(ones);
  EXPECT_EQ(testShapesCode(ones->shapes, false), "TEST_SHAPES = [\n    (7,),\n    (9,),\n]\n");
  for (const char* bad : {"TEST_SHAPES = [(1 << 20, 4)]\n", "TEST_SHAPES = [(4, 'silu')]\n", "TEST_SHAPES = [(4, [8, 12], 64)]\n",
                          "TEST_SHAPES = [(4, 8), 16]\n", "TEST_SHAPES = [(4, 8), (1, 2, 3)]\n", "TEST_SHAPES = []\n", "SHAPES = [1]\n"})
    EXPECT_FALSE(parseTestShapes(bad)) << bad;
}

TEST(AkaHeldOutRules, TheRulesMakeNewBoundedShapesDeterministically) {
  const ShapeList visible{{{4, 128, 8}, {8, 256, 16}, {16, 512, 32}}, false};
  const auto g = generateShapes(visible);
  std::vector<std::pair<Shape, std::string>> got;
  for (const auto& s : g) got.push_back({s.shape, s.rule});
  const std::vector<std::pair<Shape, std::string>> want = {
      {{5, 131, 11}, "prime"}, {{17, 521, 37}, "prime"}, {{11, 257, 17}, "prime"},
      {{16, 1024, 32}, "scaled-up"}, {{3, 65, 5}, "scaled-down"}, {{16, 32, 512}, "aspect"}};
  EXPECT_EQ(got, want);
  std::int64_t largest = 16 * 512 * 32;
  for (const auto& s : g) {
    EXPECT_EQ(std::find(visible.shapes.begin(), visible.shapes.end(), s.shape), visible.shapes.end());
    std::int64_t e = 1;
    for (auto d : s.shape) e *= d;
    EXPECT_LE(e, 4 * largest);
  }
  EXPECT_EQ(generateShapes(visible).size(), g.size());
  EXPECT_EQ(generateShapes(visible, 2).size(), 2u);
  EXPECT_EQ(testShapesCode({{5, 131, 11}}, false), "TEST_SHAPES = [\n    (5, 131, 11),\n]\n");
}

TEST(AkaHeldOutRules, APytestParametrizeListOfSizesIsReadAndLaunchParametersAreNot) {
  const std::string file =
      "@pytest.mark.parametrize('BLOCK_SIZE', [256, 512])\n"          // a launch parameter
      "@pytest.mark.parametrize(\"N_val\", [1024, 4096, 16384])\n"     // sizes
      "@pytest.mark.parametrize(\"dtype_str\", [\"fp32\", \"fp16\"])\n"
      "def test_kernel_sub_numerical_correctness(BLOCK_SIZE, N_val, dtype_str):\n    pass\n";
  auto p = parseParametrizedSizes(file);
  ASSERT_TRUE(p) << p.error().message;
  EXPECT_EQ(p->decorator, "@pytest.mark.parametrize(\"N_val\", [1024, 4096, 16384]");
  EXPECT_EQ(p->prefix, "@pytest.mark.parametrize(\"N_val\", [");
  EXPECT_TRUE(p->list.scalars);
  EXPECT_EQ(p->list.shapes, (std::vector<Shape>{{1024}, {4096}, {16384}}));
  EXPECT_EQ(parametrizeCode(p->prefix, {{1031}, {8192}}), "@pytest.mark.parametrize(\"N_val\", [1031, 8192]");

  // Not sizes: a performance test's list, small counts, code in the list, several names, and a
  // decorator whose text is there twice.
  for (const char* other : {
           "@pytest.mark.parametrize(\"n\", [4096, 8192])\ndef test_performance(n):\n    pass\n",
           "@pytest.mark.parametrize(\"num\", [1, 2, 4])\ndef test_x(num):\n    pass\n",
           "@pytest.mark.parametrize(\"n\", [1000, 1 << 20])\ndef test_x(n):\n    pass\n",
           "@pytest.mark.parametrize(\"M, N\", [(128, 256)])\ndef test_x(M, N):\n    pass\n",
           "@pytest.mark.parametrize(\"n\", [n for n in (128, 256)])\ndef test_x(n):\n    pass\n",
           "@pytest.mark.parametrize(\"n\", [128, 256])\ndef test_a(n):\n    pass\n"
           "@pytest.mark.parametrize(\"n\", [128, 256])\ndef test_b(n):\n    pass\n",
       })
    EXPECT_FALSE(parseParametrizedSizes(other)) << other;
}

TEST(AkaHeldOutRules, ImportGeneratesForPlainListsAndSaysWhyNotForOthers) {
  test::TempDir tmp;
  ImportOptions o;
  o.checkout = kFixture;
  o.platform = Platform::Nvidia;
  o.stateDir = tmp / "state";
  o.selectors = {"triton2triton/vllm/triton_scale_rows"};
  auto r = importCheckout(o);
  ASSERT_TRUE(r) << r.error().message;
  const ImportedTask& t = r->tasks.at(0);
  EXPECT_GT(t.held_out_generated, 0u);
  auto spec = json::parse(readText(importedTasksRoot(o.stateDir) / t.id / "aka.json"));
  EXPECT_EQ(spec["held_out_generated"]["file"], "scripts/task_runner.py");
  EXPECT_EQ(spec["held_out_generated"]["shapes"].size(), t.held_out_generated);
  // With AKA's own held-out files the rules stay out of it.
  o.heldOutDir = kHeldOut;
  auto withFiles = importCheckout(o);
  ASSERT_TRUE(withFiles);
  EXPECT_EQ(withFiles->tasks.at(0).held_out_generated, 0u);
  EXPECT_EQ(withFiles->tasks.at(0).held_out_injections, 1u);
  // rocmbench's fixture file has a parametrize list with code in it (`1 << 20`): nothing made.
  o.heldOutDir.clear();
  o.selectors = {"triton2triton/rocmbench/easy/test_vec_add"};
  auto rocm = importCheckout(o);
  ASSERT_TRUE(rocm) << rocm.error().message;
  EXPECT_EQ(rocm->tasks.at(0).held_out_generated, 0u);
}
