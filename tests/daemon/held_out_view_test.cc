// HeldOutView on a stored copy of the repository's cpu/reduction task and results shaped as the
// scorer writes them: names become ids in keys and strings, held-out seeds go, held-out gates
// keep pass, speedup and a failure class only, and nothing else is touched.
#include <gtest/gtest.h>

#include <filesystem>

#include "daemon/held_out_view.h"
#include "tests/daemon/harness.h"

namespace akad::test {
namespace {

using nlohmann::json;

class HeldOutViewTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const fs::path def = tmp_ / "tasks" / "v1hash" / "def" / "cpu" / "reduction";
    fs::create_directories(def.parent_path());
    fs::copy(fs::path(AKAD_SOURCE_TASKS) / "cpu" / "reduction", def, fs::copy_options::recursive);
    attempt_.id = 7;
    attempt_.runId = "r-1";
    attempt_.taskId = "cpu/reduction";
    attempt_.taskHash = "v1hash";
    attempt_.state = "scored";
  }
  HeldOutView view() const { return HeldOutView::forAttempts(tmp_.path(), {attempt_}); }

  TempDir tmp_;
  AttemptRecord attempt_;
};

json scoredResult() {
  return json{
      {"seeds", {{"v-1024x4096.s0", "11"}, {"h-1x4000037.s0", "12345678901234567890"}, {"h-7x1.perf", "99"}}},
      {"failure", "held_out_correctness: h-7x1.s0: wrong output (3 of 7 elements)"},
      {"gates",
       {{"correctness", {{"pass", true}, {"cases", {{{"name", "v-1024x4096.s0"}, {"ok", true}, {"elements", 1024}}}}}},
        {"held_out_correctness",
         {{"pass", false},
          {"reason", "h-7x1.s0: wrong output"},
          {"run", {{"wall_s", 1.5}}},
          {"cases",
           {{{"name", "h-1x4000037.s0"}, {"ok", true}, {"elements", 4000037}},
            {{"name", "h-7x1.s0"}, {"ok", false}, {"reason", "3 mismatches beyond tolerance"}, {"elements", 7}}}}}},
        {"held_out_performance",
         {{"pass", true},
          {"speedup", 1.5},
          {"configs", {{{"name", "h-3001x1331"}, {"speedup", 1.5}, {"baseline", {{"median_ns", 3001}}}}}}}}}},
      {"held_out_correct", false},
      {"stage_wall_s", {{"performance", 3.0}, {"held_out_performance", 9.5}, {"held_out_correctness", 1.25}}},
      {"speedup", 2.0}};
}

TEST_F(HeldOutViewTest, NamesBecomeIdsByTheirPlaceInTheTask) {
  // cpu/reduction's held_out list: h-1x4000037, h-3001x1331, h-65537x31, h-7x1.
  const json a = view().attempt(json{{"id", 7}, {"result", scoredResult()}});
  const std::string text = a.dump();
  for (const char* name : {"h-1x4000037", "h-3001x1331", "h-7x1", "4000037", "12345678901234567890", "3001"})
    EXPECT_EQ(text.find(name), std::string::npos) << name << " in " << text;
  const json& r = a.at("result");
  EXPECT_EQ(r.at("seeds"), (json{{"v-1024x4096.s0", "11"}}));
  const json& hc = r.at("gates").at("held_out_correctness");
  EXPECT_EQ(hc, (json{{"pass", false},
                      {"failure", "wrong output"},
                      {"cases", {{{"name", "held_out#1.s0"}, {"ok", true}}, {{"name", "held_out#4.s0"}, {"ok", false}, {"failure", "wrong output"}}}}}));
  EXPECT_EQ(r.at("gates").at("held_out_performance"),
            (json{{"pass", true}, {"speedup", 1.5}, {"configs", {{{"name", "held_out#2"}, {"speedup", 1.5}}}}}));
  EXPECT_EQ(r.at("failure"), "a held-out configuration failed: wrong output");
  EXPECT_EQ(r.at("stage_wall_s"), (json{{"performance", 3.0}}));
  // The visible side and the figures are as they were.
  EXPECT_EQ(r.at("gates").at("correctness"), scoredResult().at("gates").at("correctness"));
  EXPECT_EQ(r.at("speedup"), 2.0);
  EXPECT_EQ(r.at("held_out_correct"), false);
}

TEST_F(HeldOutViewTest, OnlyWholeNamesAreReplaced) {
  const HeldOutView v = view();
  EXPECT_EQ(v.text("h-7x1 h-7x11 xh-7x1 h-7x1.s2 /h-65537x31/"), "held_out#4 h-7x11 xh-7x1 held_out#4.s2 /held_out#3/");
  EXPECT_EQ(v.names(json{{"h-7x1", {"h-1x4000037"}}}), (json{{"held_out#4", {"held_out#1"}}}));
}

TEST_F(HeldOutViewTest, AnUnknownTaskVersionStillHidesItsHeldOutCases) {
  attempt_.taskHash = "gone";
  const json r = view().attempt(json{{"result", scoredResult()}}).at("result");
  for (const json& c : r.at("gates").at("held_out_correctness").at("cases")) EXPECT_EQ(c.at("name"), "held_out#?");
  EXPECT_EQ(r.at("gates").at("held_out_performance").at("configs").at(0).at("name"), "held_out#?");
}

TEST(HeldOutViewClasses, ReasonsFallIntoFewClasses) {
  EXPECT_EQ(HeldOutView::failureClass("the command timed out after 120 s"), "timeout");
  EXPECT_EQ(HeldOutView::failureClass("outputs of timed calls are wrong"), "wrong output");
  EXPECT_EQ(HeldOutView::failureClass("killed by signal 11"), "crash");
  EXPECT_EQ(HeldOutView::failureClass("something else"), "failed");
}

TEST(HeldOutViewClasses, TheLogSummaryListsIdsAndSpeedups) {
  const std::string s = HeldOutView::logSummary(
      json{{"gates", {{"held_out_performance", {{"pass", true}, {"speedup", 1.25}, {"configs", {{{"name", "held_out#2"}, {"speedup", 1.25}}}}}}}}});
  EXPECT_EQ(s, "held_out_performance: pass, speedup 1.250x\n  held_out#2: speedup 1.250x\n");
}

}  // namespace
}  // namespace akad::test
