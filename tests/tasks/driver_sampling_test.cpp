// The C++ drivers' sampled verification (tasks/common/cpp/driver_main.cpp, which the hip driver
// includes): a timed call's large output is verified at positions drawn after the call, the same
// positions in the candidate's output and the reference's. The driver is compiled here as the
// hip driver compiles it (its main renamed) and linked with a real task's reference
// (tasks/cpu/transpose), so these are its own functions, not copies.
#define main akaCpuDriverMain
#include "driver_main.cpp"
#undef main

#include <gtest/gtest.h>

#include <numeric>
#include <set>

namespace {

// A float32 tensor whose every element holds its own position (exact up to 2^24).
Tensor positions(const std::string& name, uint64_t n) {
  Tensor t(name, akt::DType::F32, {n});
  float* p = t.data<float>();
  for (uint64_t i = 0; i < n; ++i) p[i] = static_cast<float>(i);
  return t;
}

// What writeVerified writes for `set` and `pick`, read back from a file of the test's own.
TensorSet writtenBack(const TensorSet& set, uint64_t pick) {
  char dir[] = "/tmp/driver-sampling-XXXXXX";
  if (::mkdtemp(dir) == nullptr) throw std::runtime_error("mkdtemp failed");
  const std::string file = std::string(dir) + "/out.akt";
  writeVerified(file, set, pick);
  TensorSet back = akt::readAkt(file);
  ::unlink(file.c_str());
  ::rmdir(dir);
  return back;
}

TEST(DriverSampling, SmallOutputsAndTheCorrectnessRunAreKeptWhole) {
  TensorSet full;
  full.add(positions("small", kSampleAbove));
  full.add(positions("large", kSampleAbove + 1));
  // Pick 0 is the correctness run: what is written is the whole output.
  const TensorSet whole = writtenBack(full, 0);
  EXPECT_EQ(whole.at("large").elements(), kSampleAbove + 1);
  EXPECT_EQ(std::memcmp(whole.at("large").bytes.data(), full.at("large").bytes.data(), (kSampleAbove + 1) * 4), 0);
  const uint64_t pick = drawPick();
  const TensorSet timed = sampledOutputs(full, pick);
  EXPECT_EQ(timed.at("small").elements(), kSampleAbove);
  EXPECT_EQ(std::memcmp(timed.at("small").bytes.data(), full.at("small").bytes.data(), kSampleAbove * 4), 0);
  EXPECT_EQ(timed.at("large").elements(), kSampledElements);
  const TensorSet written = writtenBack(full, pick);
  EXPECT_EQ(std::memcmp(written.at("large").bytes.data(), timed.at("large").bytes.data(), kSampledElements * 4), 0);
}

TEST(DriverSampling, PositionsComeFromThePickAndSpreadOverTheWholeOutput) {
  const uint64_t n = uint64_t(1) << 22;
  TensorSet full;
  full.add(positions("y", n));
  const uint64_t pick = drawPick();
  const TensorSet a = sampledOutputs(full, pick), b = sampledOutputs(full, pick), c = sampledOutputs(full, drawPick());
  EXPECT_EQ(std::memcmp(a.at("y").bytes.data(), b.at("y").bytes.data(), kSampledElements * 4), 0) << "same pick, same positions";
  EXPECT_NE(std::memcmp(a.at("y").bytes.data(), c.at("y").bytes.data(), kSampledElements * 4), 0) << "another pick, other positions";
  const float* p = a.at("y").data<float>();
  std::set<uint64_t> seen;
  uint64_t quarters[4] = {};
  for (uint64_t i = 0; i < kSampledElements; ++i) {
    const auto at = static_cast<uint64_t>(p[i]);
    ASSERT_LT(at, n);
    seen.insert(at);
    ++quarters[at * 4 / n];
  }
  EXPECT_GT(seen.size(), kSampledElements * 99 / 100);  // few repeats among 65536 of 4M
  for (uint64_t q : quarters) EXPECT_NEAR(static_cast<double>(q), kSampledElements / 4.0, kSampledElements / 40.0);
}

// What akacheck then sees: a call whose output is the reference's except for 0.1% of its elements
// (say a tile left undone) differs at some sampled position; an honest one matches everywhere.
TEST(DriverSampling, AFewWrongElementsAreAmongTheSampledOnes) {
  const Config config(nlohmann::json{{"name", "t"}, {"rows", 1024}, {"cols", 2048}});
  const TensorSet ref = akaReference(config, akaGenerate(config, 7));
  const Tensor& y = ref.tensors.at(0);
  ASSERT_GT(y.elements(), kSampleAbove);
  TensorSet honest = ref, faked = ref;
  float* f = faked.tensors.at(0).data<float>();
  const uint64_t tile = y.elements() / 1000;
  for (uint64_t i = 0; i < tile; ++i) f[y.elements() / 2 + i] = 0.0f;  // one contiguous tile
  for (int trial = 0; trial < 20; ++trial) {
    const uint64_t pick = drawPick();
    const TensorSet r = sampledOutputs(ref, pick), h = sampledOutputs(honest, pick), x = sampledOutputs(faked, pick);
    EXPECT_EQ(std::memcmp(r.tensors[0].bytes.data(), h.tensors[0].bytes.data(), kSampledElements * 4), 0);
    EXPECT_NE(std::memcmp(r.tensors[0].bytes.data(), x.tensors[0].bytes.data(), kSampledElements * 4), 0)
        << "a tile of " << tile << " wrong elements went unseen";
  }
}

// The baseline's plan says verify: false: its driver keeps copies at the candidate's rate (the
// same work between calls) but writes none of them for the checker.
TEST(DriverPlan, AGroupThatIsNotVerifiedKeepsCopiesButWritesNone) {
  char dir[] = "/tmp/driver-plan-XXXXXX";
  ASSERT_NE(::mkdtemp(dir), nullptr);
  const std::string d = dir;
  auto plan = [&](const std::string& verify) {
    std::ofstream(d + "/plan.json") << R"({"cases": [{"name": "a", "config": {"name": "a", "rows": 4, "cols": 4}}],
      "perf": {"warmup": 0, "samples": 3, "groups": [{"name": "a", "cases": ["a"], "keep": 1, "empty": 1)"
                                    << verify << "}]}}";
    return d + "/plan.json";
  };
  EXPECT_TRUE(akaplan::readPlan(plan("")).perf.groups.at(0).verify) << "verify defaults to true";
  EXPECT_FALSE(akaplan::readPlan(plan(R"(, "verify": false)")).perf.groups.at(0).verify);
  EXPECT_THROW(akaplan::readPlan(plan(R"(, "verify": "no")")), akaplan::Error);

  const nlohmann::json config = {{"name", "t"}, {"rows", 8}, {"cols", 8}};
  const TensorSet out = akaReference(Config(config), akaGenerate(Config(config), 3));
  std::vector<KeptCall> kept;
  kept.push_back({"base.c0", config, 3, out, 0, false});
  kept.push_back({"cand.c0", config, 3, out, 0, true});
  writeVerification(d, kept);
  EXPECT_FALSE(std::filesystem::exists(d + "/base.c0.out.akt"));
  EXPECT_FALSE(std::filesystem::exists(d + "/base.c0.ref.akt"));
  EXPECT_TRUE(std::filesystem::exists(d + "/cand.c0.out.akt"));
  EXPECT_TRUE(std::filesystem::exists(d + "/cand.c0.ref.akt"));
  const nlohmann::json verify = akaplan::readJsonFile(d + "/verify.json");
  ASSERT_EQ(verify.at("cases").size(), 1u);
  EXPECT_EQ(verify["cases"][0]["name"], "cand.c0");
  std::filesystem::remove_all(d);
}

}  // namespace
