// The run report's figures, computed on known outcomes; failures count in every denominator.
#include <gtest/gtest.h>

#include "cli/report_text.h"
#include "daemon/pipeline/gates.h"
#include "daemon/pipeline/report.h"
#include "daemon/pipeline/score.h"
#include "daemon/pipeline/stats.h"

using nlohmann::json;

namespace akad {
namespace {

AttemptOutcome scored(const std::string& id, bool compiled, bool correct, double speedup, bool held, double heldSpeedup) {
  json r = {{"compiled", compiled}, {"correct", correct}, {"held_out_correct", held},
            {"speedup", correct ? json(speedup) : json(nullptr)},
            {"held_out_speedup", held ? json(heldSpeedup) : json(nullptr)},
            {"score", arenaScore(compiled, correct, speedup)}};
  return {id, "cpu/t" + id, "scored", r, ""};
}

TEST(Report, RatesSpeedupsFastPAndRetention) {
  std::vector<AttemptOutcome> a = {
      scored("1", true, true, 2.0, true, 1.0),   // correct, 2x; held-out 1x
      scored("2", true, true, 8.0, true, 8.0),   // correct, 8x; held-out 8x
      scored("3", true, false, 0, false, 0),     // compiled, wrong
      scored("4", false, false, 0, false, 0),    // did not compile
      {"5", "cpu/t5", "failed", json(), "sandbox set-up failed"},  // crashed: still counts
  };
  json r = runReport(a);
  EXPECT_EQ(r["attempts"], 5);
  EXPECT_DOUBLE_EQ(r["compile_rate"].get<double>(), 3.0 / 5);
  EXPECT_DOUBLE_EQ(r["correctness_rate"].get<double>(), 2.0 / 5);
  EXPECT_DOUBLE_EQ(r["geomean_speedup"].get<double>(), 4.0);  // sqrt(2*8)
  EXPECT_DOUBLE_EQ(r["fast_p"]["fast_0"].get<double>(), 2.0 / 5);
  EXPECT_DOUBLE_EQ(r["fast_p"]["fast_1.5"].get<double>(), 2.0 / 5);
  EXPECT_DOUBLE_EQ(r["fast_p"]["fast_2"].get<double>(), 1.0 / 5);  // 2.0 is not faster than 2x
  EXPECT_DOUBLE_EQ(r["held_out_correctness_retention"].get<double>(), 1.0);
  // geomean(held) / geomean(visible) = sqrt(1*8) / sqrt(2*8) = 1/sqrt(2)
  EXPECT_NEAR(r["held_out_speedup_retention"].get<double>(), 1 / std::sqrt(2.0), 1e-12);
  // scores: 320 + 920 + 20 + 0 + 0
  EXPECT_DOUBLE_EQ(r["mean_arena_score"].get<double>(), (320.0 + 920 + 20) / 5);
  EXPECT_EQ(r["per_attempt"][4]["failure"], "sandbox set-up failed");
  const std::string csv = runReportCsv(a);
  EXPECT_NE(csv.find("5,cpu/t5,failed,false,false"), std::string::npos) << csv;
}

// An attempt timed on a GPU its run shared (gpu_share) is marked and counted; the others not.
TEST(Report, AttemptsTimedOnASharedGpuAreMarkedAndCounted) {
  AttemptOutcome shared = scored("1", true, true, 1.5, true, 1.2);
  shared.result["gpu_shared"] = true;
  const json r = runReport({shared, scored("2", true, true, 2.0, true, 2.0)});
  EXPECT_EQ(r["per_attempt"][0]["gpu_shared"], true);
  EXPECT_FALSE(r["per_attempt"][1].contains("gpu_shared"));
  EXPECT_EQ(r["timed_on_shared_gpu"], 1);
  EXPECT_EQ(runReport({scored("3", true, true, 2.0, true, 2.0)})["timed_on_shared_gpu"], 0);
}

// akactl's text of a report: AKA's own figures in a column of their own where the run has any,
// and a speedup timed on a shared GPU marked, with the count under the figures.
TEST(Report, TheTextShowsAkasFiguresBesideAkadsAndMarksSharedGpuTimings) {
  AttemptOutcome wrapped = scored("1", true, true, 1.5, true, 1.2);
  wrapped.task_id = "aka-triton2triton-vllm/x";
  wrapped.result["aka"] = {{"speedup", 2.0}, {"score", 320.0}};
  wrapped.result["gpu_shared"] = true;
  const json run = {{"id", "r-0000abcd"}, {"state", "done"}, {"label", "l"}};
  const std::string text = cli::reportText({{"run", run}, {"report", runReport({wrapped, scored("2", true, true, 3.0, true, 3.0)})}});
  EXPECT_NE(text.find("AKA(SPEEDUP/SCORE)"), std::string::npos) << text;
  EXPECT_NE(text.find("1.50x*"), std::string::npos) << text;
  EXPECT_NE(text.find("2.00x/320"), std::string::npos) << text;
  EXPECT_EQ(text.find("3.00x*"), std::string::npos) << text;
  EXPECT_NE(text.find("3.00x"), std::string::npos) << text;
  EXPECT_NE(text.find("timed on a shared GPU    1 attempts"), std::string::npos) << text;
  // A run of akad's own tasks, on GPUs of its own: neither.
  const std::string plain = cli::reportText({{"run", run}, {"report", runReport({scored("3", true, true, 2.0, true, 2.0)})}});
  EXPECT_EQ(plain.find("AKA("), std::string::npos) << plain;
  EXPECT_EQ(plain.find("shared GPU"), std::string::npos) << plain;
  EXPECT_EQ(plain.find('*'), std::string::npos) << plain;
}

// The interval: each round's speedup is the geometric mean over configurations of that round's
// ratio; its half-width is Student's t (n - 1 degrees of freedom) times the logs' standard error.
TEST(Stats, TheSpeedupIntervalComesFromTheRoundsSpeedups) {
  // Two configurations, three rounds. Round speedups: sqrt(2*2)=2, sqrt(2*8)=4, sqrt(4*4)=4.
  const std::vector<std::vector<double>> base = {{2, 2, 4}, {2, 8, 4}}, cand = {{1, 1, 1}, {1, 1, 1}};
  const auto i = speedupInterval(3.0, base, cand);
  ASSERT_TRUE(i);
  ASSERT_EQ(i->rounds.size(), 3u);
  EXPECT_NEAR(i->rounds[0], 2, 1e-12);
  EXPECT_NEAR(i->rounds[1], 4, 1e-12);
  EXPECT_NEAR(i->rounds[2], 4, 1e-12);
  const double l2 = std::log(2.0), mean = (l2 + 2 * l2 + 2 * l2) / 3;
  const double sd = std::sqrt(((l2 - mean) * (l2 - mean) + 2 * (2 * l2 - mean) * (2 * l2 - mean)) / 2);
  const double half = 4.303 * sd / std::sqrt(3.0);
  EXPECT_NEAR(i->low, 3.0 * std::exp(-half), 1e-9) << "centred on the reported speedup";
  EXPECT_NEAR(i->high, 3.0 * std::exp(half), 1e-9);
  EXPECT_TRUE(i->excludesOne()) << i->low;
  EXPECT_FALSE(i->toJson()["within_noise"].get<bool>());
  // Rounds that disagree about the sign: within noise.
  const auto noisy = speedupInterval(1.05, {{100, 100, 100}}, {{80, 120, 90}});
  ASSERT_TRUE(noisy);
  EXPECT_LT(noisy->low, 1);
  EXPECT_GT(noisy->high, 1);
  EXPECT_TRUE(noisy->toJson()["within_noise"].get<bool>());
  // Identical rounds: no spread between them, but never less than the floor (2%).
  const auto steady = speedupInterval(0.5, {{50, 50}}, {{100, 100}});
  ASSERT_TRUE(steady);
  EXPECT_NEAR(steady->low, 0.5 / kSpeedupNoiseFloor, 1e-12);
  EXPECT_NEAR(steady->high, 0.5 * kSpeedupNoiseFloor, 1e-12);
  EXPECT_TRUE(steady->excludesOne());
  const auto close = speedupInterval(1.01, {{101, 101.5}}, {{100, 100.5}});
  ASSERT_TRUE(close);
  EXPECT_FALSE(close->excludesOne()) << "1% faster in two agreeing rounds is within the floor";
  // Nothing to say: one round, no configurations, a median that is not positive.
  EXPECT_FALSE(speedupInterval(2, {{2}}, {{1}}));
  EXPECT_FALSE(speedupInterval(2, {}, {}));
  EXPECT_FALSE(speedupInterval(2, {{2, 0}}, {{1, 1}}));
  EXPECT_FALSE(speedupInterval(2, {{2, 2}}, {{1, 1}, {1, 1}}));
}

// A correct attempt's speedup is counted as faster (or slower) than noise only when its whole
// interval lies above (below) 1; the text marks a speedup within noise with "~".
TEST(Report, SpeedupsWithinTheirRoundsNoiseAreToldApart) {
  auto withInterval = [](const std::string& id, double s, double low, double high) {
    AttemptOutcome a = scored(id, true, true, s, true, s);
    a.result["speedup_interval"] = {{"low", low}, {"high", high}, {"within_noise", low <= 1 && high >= 1}};
    return a;
  };
  AttemptOutcome wrongWithInterval = withInterval("5", 3.0, 2.0, 4.0);
  wrongWithInterval.result["correct"] = false;
  const json r = runReport({withInterval("1", 1.28, 0.9, 1.8), withInterval("2", 2.0, 1.6, 2.5),
                            withInterval("3", 0.5, 0.4, 0.6), scored("4", true, true, 1.5, true, 1.5), wrongWithInterval});
  EXPECT_DOUBLE_EQ(r["fast_p"]["fast_1"].get<double>(), 3.0 / 5) << "AKA's fast_1 is the speedup alone";
  EXPECT_DOUBLE_EQ(r["faster_beyond_noise"].get<double>(), 1.0 / 5);
  EXPECT_DOUBLE_EQ(r["slower_beyond_noise"].get<double>(), 1.0 / 5);
  EXPECT_EQ(r["per_attempt"][0]["within_noise"], true);
  EXPECT_EQ(r["per_attempt"][1]["within_noise"], false);
  EXPECT_EQ(r["per_attempt"][1]["speedup_interval"], json({1.6, 2.5}));
  EXPECT_FALSE(r["per_attempt"][3].contains("speedup_interval")) << "one round: no interval";
  EXPECT_FALSE(r["per_attempt"][4].contains("speedup_interval")) << "a wrong attempt has no speedup";
  const json run = {{"id", "r-0000abcd"}, {"state", "done"}};
  const std::string text = cli::reportText({{"run", run}, {"report", r}});
  EXPECT_NE(text.find("1.28x~"), std::string::npos) << text;
  EXPECT_EQ(text.find("2.00x~"), std::string::npos) << text;
  EXPECT_NE(text.find("faster / slower than noise 20.0% / 20.0%"), std::string::npos) << text;
}

// A task with no held-out configurations (an imported AKA task without held-out shapes) has no
// held-out correctness to keep: such an attempt is out of the retention's denominator, and the
// text says "none" where a failure says "fail".
TEST(Report, AttemptsWithoutHeldOutConfigurationsAreNotHeldOutFailures) {
  AttemptOutcome none = scored("1", true, true, 1.0, false, 0);
  none.result["held_out_available"] = false;
  AttemptOutcome failed = scored("2", true, true, 1.0, false, 0);
  failed.result["held_out_available"] = true;
  const json r = runReport({none, failed, scored("3", true, true, 1.0, true, 1.0)});
  EXPECT_DOUBLE_EQ(r["held_out_correctness_retention"].get<double>(), 1.0 / 2) << "one kept of two that had any";
  EXPECT_EQ(r["correct_without_held_out"], 1);
  EXPECT_EQ(r["per_attempt"][0]["held_out_available"], false);
  EXPECT_FALSE(r["per_attempt"][1].contains("held_out_available"));
  const json run = {{"id", "r-0000abcd"}, {"state", "done"}};
  const std::string text = cli::reportText({{"run", run}, {"report", r}});
  EXPECT_NE(text.find("none"), std::string::npos) << text;
  EXPECT_NE(text.find("fail"), std::string::npos) << text;
  EXPECT_NE(text.find("1 had none"), std::string::npos) << text;
  // A result from before the field says it through its gates: held-out gates, or the one
  // failed gate that says there are none.
  AttemptOutcome oldNone = scored("4", true, true, 1.0, false, 0), oldFailed = oldNone;
  oldNone.result["gates"] = {{"compile", {{"pass", true}}},
                             {"held_out_correctness", {{"pass", false}, {"reason", "the task has no held-out configurations"}}}};
  oldFailed.result["gates"] = {{"compile", {{"pass", true}}}, {"held_out_correctness", {{"pass", false}, {"reason", "wrong"}}}};
  AttemptOutcome oldWrapNone = scored("6", true, true, 1.0, false, 0);
  oldWrapNone.result["gates"] = {{"compile", {{"pass", true}}}, {"performance", {{"pass", true}}}};
  const json old = runReport({oldNone, oldFailed, oldWrapNone});
  EXPECT_EQ(old["correct_without_held_out"], 2);
  EXPECT_DOUBLE_EQ(old["held_out_correctness_retention"].get<double>(), 0.0);
  // Only attempts without any: no retention at all, rather than 0%.
  EXPECT_TRUE(runReport({none})["held_out_correctness_retention"].is_null());
}

TEST(Report, ArenaScoreFollowsThePaper) {
  EXPECT_EQ(arenaScore(false, false, 0), 0);
  EXPECT_EQ(arenaScore(true, false, 0), 20);
  EXPECT_DOUBLE_EQ(arenaScore(true, true, 1.5), 270);
}

TEST(Stats, MedianMinAndInterquartileRange) {
  SampleStats s = describeSamples({5, 1, 3, 2, 4});
  EXPECT_DOUBLE_EQ(s.median, 3);
  EXPECT_DOUBLE_EQ(s.min, 1);
  EXPECT_DOUBLE_EQ(s.iqr(), 2);  // q1 = 2, q3 = 4
  EXPECT_DOUBLE_EQ(geometricMean({1, 4, 16}), 4);
}

// Both sides run one plan, so that the driver's work between timed calls (empty calls, copies
// of kept outputs) is alike on both; only the candidate's kept outputs are verified.
TEST(DrivenPlan, BothSidesGetTheSamePlanAndOnlyTheCandidatesKeptCallsAreVerified) {
  Phase p;
  p.name = "visible";
  p.configs = {json{{"name", "a"}, {"n", 1}}, json{{"name", "b"}, {"n", 2}}};
  TaskTiming t;
  json base = drivenPerfPlan(p, t, true), cand = drivenPerfPlan(p, t, false);
  ASSERT_EQ(base["perf"]["groups"].size(), 2u);
  for (std::size_t i = 0; i < 2; ++i) {
    json& bg = base["perf"]["groups"][i];
    json& cg = cand["perf"]["groups"][i];
    EXPECT_FALSE(bg.at("verify").get<bool>());
    EXPECT_TRUE(cg.at("verify").get<bool>());
    EXPECT_GT(cg.at("keep").get<double>(), 0.3) << "30 x 3 timed calls need about 40% kept";
    EXPECT_GE(cg.at("empty").get<int>(), 5);
    bg.erase("verify");
    cg.erase("verify");
  }
  EXPECT_EQ(base, cand) << "the plans differ in more than verify";
  EXPECT_EQ(cand["perf"]["window"], "queued");
  t.window = "graph";
  EXPECT_EQ(drivenPerfPlan(p, t, false)["perf"]["window"], "graph") << "the task's window mode reaches the driver";
}

// The scorer times one more pair of rounds when a side's disturbed rounds are not a minority.
TEST(Stats, QuietRoundsHoldTheMedianOnlyWhenDisturbedOnesAreFewerThanHalf) {
  EXPECT_TRUE(quietRoundsHoldTheMedian({}, 1.2));
  EXPECT_TRUE(quietRoundsHoldTheMedian({100}, 1.2));
  EXPECT_TRUE(quietRoundsHoldTheMedian({120, 100}, 1.2)) << "within the limit";
  EXPECT_FALSE(quietRoundsHoldTheMedian({100, 121}, 1.2)) << "one disturbed round of two";
  EXPECT_TRUE(quietRoundsHoldTheMedian({150, 100, 101}, 1.2)) << "one disturbed round of three";
  EXPECT_FALSE(quietRoundsHoldTheMedian({150, 100, 160}, 1.2)) << "two of three";
  EXPECT_TRUE(quietRoundsHoldTheMedian({200, 100, 101, 99}, 1.2)) << "one of four, after the extra pair";
  EXPECT_FALSE(quietRoundsHoldTheMedian({0, 100}, 1.2));
}

}  // namespace
}  // namespace akad
