// akacheck is run as the real program on crafted reference and output files: it must accept
// outputs within tolerance and reject every way an output can be wrong or hostile.
#include "akt.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <sys/wait.h>

namespace fs = std::filesystem;

namespace {

struct CheckResult {
  int exitCode = -1;
  nlohmann::json verdict;
  std::string reason() const { return verdict.is_object() ? verdict["cases"][0]["reason"].get<std::string>() : ""; }
};

class AkacheckTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("akacheck_test." + std::to_string(::getpid()));
    fs::create_directories(dir_ / "data");
    fs::create_directories(dir_ / "out");
    writeText("plan.json", R"({"cases": [{"name": "c.s0", "config": {"name": "c"}, "seed": 1}]})");
    writeText("tol.json", R"({"f32": {"atol": 1e-3, "rtol": 1e-3}, "f16": {"atol": 1e-2, "rtol": 0}})");
  }
  void TearDown() override { fs::remove_all(dir_); }

  void writeText(const std::string& name, const std::string& text) { std::ofstream(dir_ / name) << text; }
  static akt::TensorSet f32(const std::vector<float>& v, std::vector<uint64_t> dims = {}) {
    if (dims.empty()) dims = {v.size()};
    akt::TensorSet s;
    float* p = s.add(akt::Tensor("out", akt::DType::F32, dims)).data<float>();
    std::copy(v.begin(), v.end(), p);
    return s;
  }
  void ref(const akt::TensorSet& s) { akt::writeAkt((dir_ / "data/c.s0.ref.akt").string(), s); }
  void out(const akt::TensorSet& s) { akt::writeAkt((dir_ / "out/c.s0.out.akt").string(), s); }
  std::string outPath() const { return (dir_ / "out/c.s0.out.akt").string(); }

  CheckResult check(const std::string& extra = "") const {
    std::string cmd = std::string(AKACHECK_PATH) + " --plan " + (dir_ / "plan.json").string() + " --data " +
                      (dir_ / "data").string() + " --out " + (dir_ / "out").string() + " --tolerances " +
                      (dir_ / "tol.json").string() + extra + " 2>/dev/null";
    CheckResult r;
    std::FILE* p = ::popen(cmd.c_str(), "r");
    std::string text;
    char buf[4096];
    for (size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;) text.append(buf, n);
    int status = ::pclose(p);
    r.exitCode = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    if (!text.empty()) r.verdict = nlohmann::json::parse(text);
    return r;
  }
  fs::path dir_;
};

TEST_F(AkacheckTest, AcceptsWithinToleranceAndRejectsJustOutside) {
  ref(f32({1.0f, 2.0f, -3.0f}));
  out(f32({1.0019f, 2.0f, -3.0f}));  // allowed: 1e-3 + 1e-3 * 1 = 2e-3
  CheckResult ok = check();
  EXPECT_EQ(ok.exitCode, 0);
  EXPECT_TRUE(ok.verdict["ok"]);
  EXPECT_EQ(ok.verdict["cases"][0]["elements"], 3);
  EXPECT_NEAR(ok.verdict["cases"][0]["max_abs_err"].get<double>(), 1.9e-3, 1e-6);

  out(f32({1.0f, 2.0f, -3.0041f}));  // allowed: 1e-3 + 1e-3 * 3 = 4e-3
  CheckResult bad = check();
  EXPECT_EQ(bad.exitCode, 1);
  EXPECT_FALSE(bad.verdict["ok"]);
  EXPECT_FALSE(bad.verdict["cases"][0]["ok"]);
  EXPECT_EQ(bad.verdict["cases"][0]["mismatches"], 1);
  EXPECT_NE(bad.reason().find("element 2"), std::string::npos) << bad.reason();
}

TEST_F(AkacheckTest, NanMustMatchTheReferenceBothWays) {
  ref(f32({NAN, 1.0f, 2.0f}));
  out(f32({NAN, 1.0f, 2.0f}));
  EXPECT_EQ(check().exitCode, 0);
  out(f32({0.0f, 1.0f, 2.0f}));
  EXPECT_EQ(check().exitCode, 1);

  ref(f32({0.5f, 1.0f, 2.0f}));
  out(f32({NAN, 1.0f, 2.0f}));
  EXPECT_EQ(check().exitCode, 1);
}

TEST_F(AkacheckTest, InfinitiesMustMatchExactly) {
  ref(f32({INFINITY, -INFINITY, 1.0f}));
  out(f32({INFINITY, -INFINITY, 1.0f}));
  EXPECT_EQ(check().exitCode, 0);
  out(f32({-INFINITY, -INFINITY, 1.0f}));
  EXPECT_EQ(check().exitCode, 1);
  out(f32({3.0e38f, -INFINITY, 1.0f}));
  EXPECT_EQ(check().exitCode, 1);
  ref(f32({3.0e38f, 0.0f, 1.0f}));
  out(f32({INFINITY, 0.0f, 1.0f}));  // inf - 3e38 must not pass through a huge rtol
  writeText("tol.json", R"({"f32": {"atol": 1e30, "rtol": 1e30}})");
  EXPECT_EQ(check().exitCode, 1);
}

TEST_F(AkacheckTest, ConstantOrZeroOutputRejectedEvenUnderLooseTolerance) {
  writeText("tol.json", R"({"f32": {"atol": 1.0, "rtol": 0}})");
  ref(f32({1.0f, 1.1f, 0.9f, 1.05f}));
  out(f32({1.0f, 1.0f, 1.0f, 1.0f}));
  CheckResult constant = check();
  EXPECT_EQ(constant.exitCode, 1);
  EXPECT_NE(constant.reason().find("constant"), std::string::npos) << constant.reason();

  ref(f32({0.1f, 0.2f, 0.0f, 0.3f}));
  out(f32({0.0f, 0.0f, -0.0f, 0.0f}));
  CheckResult zeros = check();
  EXPECT_EQ(zeros.exitCode, 1);
  EXPECT_NE(zeros.reason().find("all zeros"), std::string::npos) << zeros.reason();

  ref(f32({2.0f, 2.0f, 2.0f}));  // a constant reference allows a constant output
  out(f32({2.0f, 2.0f, 2.0f}));
  EXPECT_EQ(check().exitCode, 0);
}

TEST_F(AkacheckTest, ShapeDtypeNameAndCountMustMatch) {
  ref(f32({1, 2, 3, 4}, {2, 2}));
  out(f32({1, 2, 3, 4}, {4}));
  CheckResult shape = check();
  EXPECT_EQ(shape.exitCode, 1);
  EXPECT_NE(shape.reason().find("shape"), std::string::npos) << shape.reason();

  akt::TensorSet f64;
  f64.add(akt::Tensor("out", akt::DType::F64, {2, 2}));
  out(f64);
  EXPECT_NE(check().reason().find("dtype"), std::string::npos);

  akt::TensorSet renamed = f32({1, 2, 3, 4}, {2, 2});
  renamed.tensors[0].name = "y";
  out(renamed);
  EXPECT_EQ(check().exitCode, 1);

  akt::TensorSet extra = f32({1, 2, 3, 4}, {2, 2});
  extra.add(akt::Tensor("more", akt::DType::F32, {1}));
  out(extra);
  EXPECT_NE(check().reason().find("tensors"), std::string::npos);
}

TEST_F(AkacheckTest, IntegersAreExactWhateverTheTolerance) {
  writeText("tol.json", R"({"f32": {"atol": 100, "rtol": 100}, "i32": {"atol": 100, "rtol": 100}})");
  akt::TensorSet r;
  int32_t* p = r.add(akt::Tensor("out", akt::DType::I32, {3})).data<int32_t>();
  p[0] = 1, p[1] = 2, p[2] = 3;
  ref(r);
  out(r);
  EXPECT_EQ(check().exitCode, 0);
  r.tensors[0].data<int32_t>()[2] = 4;
  out(r);
  EXPECT_EQ(check().exitCode, 1);
}

TEST_F(AkacheckTest, HalfPrecisionIsComparedAsFloat) {
  akt::TensorSet r;
  uint16_t* p = r.add(akt::Tensor("out", akt::DType::F16, {3})).data<uint16_t>();
  p[0] = akt::floatToHalf(1.0f), p[1] = akt::floatToHalf(2.0f), p[2] = akt::floatToHalf(-4.0f);
  ref(r);
  p[1] = akt::floatToHalf(2.0078125f);  // one half ulp away at 2: inside atol 1e-2
  out(r);
  EXPECT_EQ(check().exitCode, 0);
  p[1] = akt::floatToHalf(2.03125f);
  out(r);
  EXPECT_EQ(check().exitCode, 1);
}

TEST_F(AkacheckTest, MissingTruncatedAndHostileOutputsFailCleanly) {
  ref(f32({1, 2, 3, 4}));
  CheckResult missing = check();
  EXPECT_EQ(missing.exitCode, 1);
  EXPECT_NE(missing.reason().find("unreadable output"), std::string::npos) << missing.reason();

  out(f32({1, 2, 3, 4}));
  fs::resize_file(outPath(), fs::file_size(outPath()) - 3);
  CheckResult truncated = check();
  EXPECT_EQ(truncated.exitCode, 1);
  EXPECT_NE(truncated.reason().find("truncated"), std::string::npos) << truncated.reason();

  // A header claiming 2^40 elements: must be refused before any allocation happens.
  std::string hostile = "AKT1";
  hostile += std::string("\x01\x00\x00\x00", 4) + std::string("\x03\x00", 2) + "out";
  hostile += std::string("\x00\x01", 2) + std::string("\x00\x00\x00\x00\x00\x01\x00\x00", 8);
  std::ofstream(outPath(), std::ios::binary | std::ios::trunc) << hostile;
  CheckResult huge = check();
  EXPECT_EQ(huge.exitCode, 1);
  EXPECT_NE(huge.reason().find("truncated"), std::string::npos) << huge.reason();

  std::ofstream(outPath(), std::ios::binary | std::ios::trunc) << "not an akt file at all";
  EXPECT_NE(check().reason().find("bad magic"), std::string::npos);
}

// The candidate's output is a link to the reference itself (or to another case's output): it is
// refused, not compared with itself.
TEST_F(AkacheckTest, AnOutputThatIsALinkToTheReferenceIsRefused) {
  ref(f32({1, 2, 3, 4}));
  fs::create_symlink(dir_ / "data/c.s0.ref.akt", outPath());
  CheckResult linked = check();
  EXPECT_EQ(linked.exitCode, 1);
  EXPECT_NE(linked.reason().find("not a regular file"), std::string::npos) << linked.reason();
  // The same bytes as a file of its own pass.
  fs::remove(outPath());
  out(f32({1, 2, 3, 4}));
  EXPECT_EQ(check().exitCode, 0);
}

TEST_F(AkacheckTest, TrustedInputProblemsAreExitTwo) {
  out(f32({1, 2, 3}));
  EXPECT_EQ(check().exitCode, 2);  // no reference file
  ref(f32({1, 2, 3}));
  writeText("tol.json", R"({"f64": {"atol": 0, "rtol": 0}})");
  EXPECT_EQ(check().exitCode, 2);  // no tolerance for f32
  writeText("tol.json", R"({"f32": {"atol": -1, "rtol": 0}})");
  EXPECT_EQ(check().exitCode, 2);
  writeText("tol.json", R"({"tolerances": {"f32": {"atol": 0, "rtol": 0}}})");  // configs.json form
  EXPECT_EQ(check().exitCode, 0);
  writeText("plan.json", "{not json");
  EXPECT_EQ(check().exitCode, 2);
  EXPECT_EQ(check(" --bogus").exitCode, 2);
}

}  // namespace
