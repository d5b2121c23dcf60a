// The attempt pipeline end to end: the real akad (with its executor), akabox, the snapshot
// store and the CPU suite, driven with the real akactl. Every test checks that no sandbox
// process or cgroup of its daemon is left behind.
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <fstream>
#include <mutex>
#include <regex>
#include <set>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "tests/pipeline/loopback.h"
#include "tests/pipeline/pipeline_daemon.h"

namespace akad::test {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;


// One daemon for the suite: trusted builds are cached per task version in its state dir. Its
// tasks time 10 x 2 calls per configuration (shortTimedTasks). Two workers, so that the suite's
// run scores two attempts at once, as a host with two workers would (each scoring leaves about
// 40% of two CPUs idle: its driver and worker take turns); its speedups are several times over
// what the test asks, and the ABBA rounds see both sides under the same load.
class PipelineTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    // Its own trusted builds: the suite test counts them.
    daemon_ = new PipelineDaemon("suite", PipelineDaemon::Timing::Quick, PipelineDaemon::Cache::Own);
    // One performance gate at a time (as a two-CPU host has by default): the suite's test
    // checks that none overlapped.
    daemon_->start({"--workers", "2", "--timing-slots", "1"});
  }
  static void TearDownTestSuite() {
    // A daemon that stops takes its mount templates with it.
    daemon_->stop();
    const auto left = daemon_->templateMounts();
    EXPECT_TRUE(left.empty()) << "a mount template outlived the daemon: " << (left.empty() ? "" : left.front());
    daemon_->expectNothingLeft();
    delete daemon_;
  }
  void TearDown() override { daemon_->expectNothingLeft(); }
  static PipelineDaemon* daemon_;
};
PipelineDaemon* PipelineTest::daemon_ = nullptr;

// The scorer's verdicts through the daemon that need quick timing but no quiet machine: a kernel
// that caches across the timed calls, a re-score of a snapshot (within a factor of 2 of the
// original, which a loaded machine keeps: both scorings pair baseline and candidate in ABBA
// rounds, and the reference kernels are single-threaded) and `tasks validate`. A daemon of their
// own, with the shared trusted cache, so that they run beside other end-to-end tests instead of
// in the CPU suite's turn.
class PipelineScorerTest : public SuiteDaemon<PipelineScorerTest> {
 public:
  static constexpr const char* kTag = "scorer";
  static constexpr PipelineDaemon::Timing kTiming = PipelineDaemon::Timing::Quick;
};

// What happens around an attempt that looks at no figure of it (what the agent can see, its
// time limit, a kernel that fails to compile or is wrong, edits outside the allow-list): a
// daemon of their own with minimal timing, so that they run beside another end-to-end test
// instead of in the suite's turn.
class PipelineAroundTest : public SuiteDaemon<PipelineAroundTest> {
 public:
  static constexpr const char* kTag = "around";
  static constexpr PipelineDaemon::Timing kTiming = PipelineDaemon::Timing::Minimal;
};

const json& result(const json& attempt) { return attempt.at("result"); }

// Each performance gate's [from, until) of the run's attempts, as the gate recorded it while it
// held its timing slot (ISO times of one form, so they compare as strings), in order.
std::vector<std::pair<std::string, std::string>> timedGates(const json& attempts) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const json& a : attempts)
    for (const auto& [name, g] : a.at("result").at("gates").items())
      if (g.contains("timed")) out.emplace_back(g["timed"]["from"], g["timed"]["until"]);
  std::sort(out.begin(), out.end());
  return out;
}

TEST_F(PipelineTest, ReferenceAgentBeatsTheBaselineOnEveryCpuTask) {
  json attempts = daemon_->waitRun(daemon_->submit({"cpu", "--agent", "reference"}), 1200s);
  ASSERT_GE(attempts.size(), 8u);
  for (const json& a : attempts) {
    SCOPED_TRACE(a.at("task_id").get<std::string>());
    ASSERT_EQ(a.at("state"), "scored") << a.dump();
    EXPECT_TRUE(result(a).at("correct").get<bool>()) << result(a).value("failure", "");
    EXPECT_GT(result(a).at("speedup").get<double>(), 1.0) << result(a).at("gates").at("performance").at("configs").dump();
    // The speedup's interval from its rounds, around it (stats.h, SpeedupInterval).
    const json& i = result(a).at("speedup_interval");
    EXPECT_LE(i.at("low").get<double>(), result(a).at("speedup").get<double>());
    EXPECT_GE(i.at("high").get<double>(), result(a).at("speedup").get<double>());
    EXPECT_GE(i.at("rounds").size(), 2u);
    EXPECT_TRUE(result(a).at("held_out_correct").get<bool>());
    EXPECT_EQ(result(a).at("held_out_available"), true);
    EXPECT_GT(result(a).at("score").get<double>(), 220.0);
    EXPECT_EQ(result(a).at("snapshot").get<std::string>().size(), 64u);
  }
  // The harness's own objects were built once (make common) and linked by every task's build.
  int harnessBuilds = 0, trustedBuilds = 0;
  for (const auto& e : fs::directory_iterator(daemon_->paths().stateDir / "tasks")) {
    const std::string name = e.path().filename().string();
    if (name.rfind("harness-", 0) == 0) {
      ++harnessBuilds;
      EXPECT_TRUE(fs::exists(e.path() / "common" / "build" / "obj" / "driver_main.o"));
    } else if (fs::exists(e.path() / "trusted" / ".built")) {
      ++trustedBuilds;
      EXPECT_FALSE(fs::exists(e.path() / "trusted" / "build" / "obj" / "driver_main.o")) << name << " compiled its own";
      EXPECT_TRUE(fs::exists(e.path() / "trusted" / "build" / "obj" / "reference.o")) << name;
    }
  }
  EXPECT_EQ(harnessBuilds, 1);
  EXPECT_GE(trustedBuilds, 8);
  // The report agrees with the attempts.
  json report = daemon_->ctlJson({"report", attempts.at(0).at("run_id")}).at("report");
  EXPECT_DOUBLE_EQ(report.at("correctness_rate").get<double>(), 1.0);
  EXPECT_GT(report.at("geomean_speedup").get<double>(), 1.0);
  EXPECT_GT(report.at("faster_beyond_noise").get<double>(), 0.5) << "the reference solutions are several times faster";
  // Two workers, one timing slot: no two performance gates were timed at once.
  const auto timed = timedGates(attempts);
  EXPECT_GE(timed.size(), 2 * attempts.size()) << "a visible and a held-out performance gate per attempt";
  for (std::size_t i = 1; i < timed.size(); ++i)
    EXPECT_GE(timed[i].first, timed[i - 1].second) << "a performance gate began at " << timed[i].first
                                                   << " while another ran until " << timed[i - 1].second;
}

TEST_F(PipelineTest, NoopAgentScoresAboutOne) {
  json a = daemon_->runOne({"cpu/reduction", "--agent", "noop"});
  ASSERT_EQ(a.at("state"), "scored");
  EXPECT_TRUE(result(a).at("correct").get<bool>());
  EXPECT_NEAR(result(a).at("speedup").get<double>(), 1.0, 0.25);
  EXPECT_NEAR(result(a).at("held_out_speedup").get<double>(), 1.0, 0.35);
  // akactl results shows each performance gate's speedup with its interval.
  const std::string results = daemon_->ctl({"results", a.at("run_id").get<std::string>()}).out;
  EXPECT_TRUE(std::regex_search(results, std::regex(R"(\n  performance: pass  speedup [0-9.]+x \[[0-9.]+, [0-9.]+\])")))
      << results;
  // The agent's and the scorer's sandboxes copied kept mount templates (akad's default).
  EXPECT_FALSE(daemon_->templateMounts().empty()) << "no mount template was kept while the daemon ran";
}

TEST_F(PipelineAroundTest, BrokenAgentScoresZeroWithACompileReason) {
  json a = daemon_->runOne({"cpu/reduction", "--agent", "broken"});
  ASSERT_EQ(a.at("state"), "scored");
  EXPECT_FALSE(result(a).at("compiled").get<bool>());
  EXPECT_EQ(result(a).at("score").get<double>(), 0.0);
  EXPECT_NE(result(a).at("failure").get<std::string>().find("compile"), std::string::npos);
  EXPECT_NE(result(a).at("failure").get<std::string>().find("broken on purpose"), std::string::npos)
      << "the compiler's own message should reach the user";
  EXPECT_FALSE(result(a).at("gates").contains("correctness"));
}

TEST_F(PipelineAroundTest, EditsOutsideTheAllowListAreIgnoredAndReported) {
  // Make the kernel 1% wrong, loosen the tolerances so the copy would accept it, tamper with the
  // harness copy, add a file: none of the non-editable edits may count.
  json a = daemon_->runOne({"cpu/reduction", "--agent-command",
                            "sed -i 's/out\\[r\\] = static_cast<float>(sum);/out[r] = static_cast<float>(sum * 1.01);/' kernel.cpp && "
                            "grep -q 1.01 kernel.cpp && "
                            "python3 -c \"import json; c = json.load(open('configs.json')); "
                            "c['tolerances']['f32'] = {'atol': 1e9, 'rtol': 1e9}; json.dump(c, open('configs.json', 'w'))\" && "
                            "echo '#error tampered' >> harness/akacheck.cpp && echo x > notes.txt"});
  ASSERT_EQ(a.at("state"), "scored") << a.dump();
  const json& ignored = result(a).at("ignored_changes");
  std::set<std::string> set(ignored.begin(), ignored.end());
  EXPECT_TRUE(set.count("configs.json (changed)")) << ignored.dump();
  EXPECT_TRUE(set.count("harness/akacheck.cpp (changed)")) << ignored.dump();
  EXPECT_TRUE(set.count("notes.txt (added)")) << ignored.dump();
  EXPECT_EQ(result(a).at("agent").at("exit_code"), 0) << "the edits themselves failed";
  // The harness copy's #error did not break the build (the trusted harness was used), and the
  // loosened tolerances did not accept the 1% error.
  EXPECT_TRUE(result(a).at("compiled").get<bool>());
  EXPECT_FALSE(result(a).at("correct").get<bool>());
  EXPECT_NE(result(a).at("failure").get<std::string>().find("wrong output"), std::string::npos)
      << result(a).at("failure");
}

TEST_F(PipelineAroundTest, AgentFindsNoTrustedHarnessHeldOutConfigurationsOrSolution) {
  const std::string tasks = daemon_->paths().tasksDir.string();
  // Positive control first (it must see its own visible configurations), then the probes.
  const std::string probe =
      "grep -q v-1024x4096 configs.json || exit 2; "
      "if grep -rqs 'h-1x4000037' / --include='*' -l 2>/dev/null | head -1 | grep -q .; then exit 3; fi; "
      "test -e " + tasks + "/cpu/reduction/task.yaml && exit 4; "
      "test -e /solution && exit 5; "
      "test -e " + daemon_->paths().stateDir.string() + " && exit 6; "
      "exit 0";
  json a = daemon_->runOne({"cpu/reduction", "--agent-command", probe});
  ASSERT_EQ(a.at("state"), "scored") << a.dump();
  EXPECT_EQ(result(a).at("agent").at("exit_code"), 0) << "exit 2: probe broken; 3: held-out config visible; "
                                                         "4: task folder visible; 5: solution; 6: state dir";
}

TEST_F(PipelineAroundTest, HardCodedVisibleOutputsFailFreshSeedsAndHeldOut) {
  // The agent runs the visible harness with a seed of its own and bakes the reference's answers
  // for the visible shapes into the kernel.
  const std::string script = R"PY(
import json, os, struct, subprocess
os.chdir('/workspace')
subprocess.run(['make', '-s', '-f', 'harness/Makefile', 'reference'], check=True, capture_output=True)
cfg = json.load(open('configs.json'))['configs']
json.dump({'cases': [{'name': c['name'] + '.s0', 'config': c, 'seed': 12345} for c in cfg]}, open('/tmp/plan.json', 'w'))
os.makedirs('/tmp/d', exist_ok=True)
subprocess.run(['./reference', 'generate', '--plan', '/tmp/plan.json', '--data', '/tmp/d'], check=True)
def first_tensor(path):
    b = open(path, 'rb').read()
    off = 8
    n = struct.unpack_from('<H', b, off)[0]; off += 2 + n
    rank = b[off + 1]; off += 2
    dims = struct.unpack_from('<%dQ' % rank, b, off); off += 8 * rank
    count = 1
    for d in dims: count *= d
    return struct.unpack_from('<%df' % count, b, off)
src = ['#include <cstddef>', '#include <cstring>']
body = []
for i, c in enumerate(cfg):
    vals = first_tensor('/tmp/d/%s.s0.ref.akt' % c['name'])
    src.append('static const float t%d[] = {%s};' % (i, ','.join(repr(v) + 'f' for v in vals)))
    body.append('  if (rows == %d && cols == %d) { std::memcpy(out, t%d, sizeof t%d); return; }' % (c['rows'], c['cols'], i, i))
src.append('extern "C" void row_sum(const float* x, float* out, size_t rows, size_t cols) {')
src += body
src.append('  (void)x; std::memset(out, 0, rows * sizeof(float));\n}')
open('kernel.cpp', 'w').write('\n'.join(src) + '\n')
)PY";
  json a = daemon_->runOne({"cpu/reduction", "--agent-command", "python3 - <<'EOF'\n" + script + "EOF\n"});
  ASSERT_EQ(a.at("state"), "scored") << a.dump();
  EXPECT_EQ(result(a).at("agent").at("exit_code"), 0) << "the cheating agent itself failed";
  EXPECT_TRUE(result(a).at("compiled").get<bool>());
  EXPECT_FALSE(result(a).at("correct").get<bool>()) << "answers for the agent's seed passed the scorer's seeds";
  EXPECT_FALSE(result(a).at("held_out_correct").get<bool>());
  EXPECT_EQ(result(a).at("score").get<double>(), 20.0);
}

TEST_F(PipelineScorerTest, CachingResultsAcrossCallsFailsTheTimedCallCheck) {
  // Correct on the few calls per shape of a correctness run, but once the same shape comes five
  // times in a row (a benchmark loop) it returns the remembered answer. (Keyed on the shape, not
  // the input's address: every call's inputs are a fresh mapping, which the kernel often places
  // where the last one was, so an address says nothing about the data.)
  const std::string kernel = R"CPP(
#include <cstddef>
#include <vector>
static size_t lastRows = 0, lastCols = 0;
static int streak = 0;
static std::vector<float> memo;
extern "C" void row_sum(const float* x, float* out, size_t rows, size_t cols) {
  streak = (rows == lastRows && cols == lastCols) ? streak + 1 : 0;
  lastRows = rows;
  lastCols = cols;
  if (streak >= 5 && memo.size() == rows) { for (size_t r = 0; r < rows; ++r) out[r] = memo[r]; return; }
  memo.assign(rows, 0.0f);
  for (size_t r = 0; r < rows; ++r) {
    double s = 0;
    for (size_t c = 0; c < cols; ++c) s += x[r * cols + c];
    out[r] = memo[r] = static_cast<float>(s);
  }
}
)CPP";
  json a = daemon_->runOne({"cpu/reduction", "--agent-command", "cat > kernel.cpp <<'EOF'\n" + kernel + "EOF\n"});
  ASSERT_EQ(a.at("state"), "scored") << a.dump();
  const json& gates = result(a).at("gates");
  EXPECT_TRUE(gates.at("correctness").at("pass").get<bool>()) << "single calls are correct";
  EXPECT_FALSE(gates.at("performance").at("pass").get<bool>());
  EXPECT_NE(gates.at("performance").at("reason").get<std::string>().find("timed calls"), std::string::npos)
      << gates.at("performance").dump();
  EXPECT_FALSE(result(a).at("correct").get<bool>());
}

TEST_F(PipelineAroundTest, AgentPastItsTimeLimitIsKilledAndItsPartialWorkspaceScored) {
  json a = daemon_->runOne({"cpu/reduction", "--agent-time-limit", "2", "--agent-command",
                            "printf '\\n// partial work\\n' >> kernel.cpp; sleep 600"});
  ASSERT_EQ(a.at("state"), "scored") << a.dump();
  const json& agent = result(a).at("agent");
  EXPECT_TRUE(agent.at("timed_out").get<bool>()) << agent.dump();
  EXPECT_EQ(agent.at("status"), "wall-timeout");
  EXPECT_LT(agent.at("wall_s").get<double>(), 10.0);
  EXPECT_TRUE(result(a).at("compiled").get<bool>()) << "the partial workspace is still scored";
  EXPECT_TRUE(result(a).at("correct").get<bool>());
}

// A process's parent pid as the host sees it (0 once it is gone).
pid_t parentOf(pid_t pid) {
  const std::string stat = readFile(fs::path("/proc") / std::to_string(pid) / "stat");
  const auto close = stat.rfind(')');
  if (close == std::string::npos) return 0;
  std::istringstream rest(stat.substr(close + 2));
  char state = 0;
  pid_t ppid = 0;
  rest >> state >> ppid;
  return ppid;
}

// The trusted driver of one of the candidate's timed runs: a `/trusted/driver perf` process
// under the akabox whose arguments name a "-perf-candidate-" driver log of this daemon's; 0 if
// none runs now.
pid_t candidateTimedDriver(const std::string& stateDir) {
  std::set<pid_t> boxes;
  for (pid_t p : processesMentioning(stateDir)) {
    const std::string cmd = commandLineOf(std::to_string(p));
    if (cmd.find("-perf-candidate-") != std::string::npos && cmd.find("-driver.err") != std::string::npos) boxes.insert(p);
  }
  if (boxes.empty()) return 0;
  for (const auto& e : fs::directory_iterator("/proc")) {
    char* end = nullptr;
    const long pid = std::strtol(e.path().filename().c_str(), &end, 10);
    if (*end != '\0' || pid <= 0 || commandLineOf(e.path().filename()).rfind("/trusted/driver perf ", 0) != 0) continue;
    for (pid_t up = parentOf(static_cast<pid_t>(pid)); up > 1; up = parentOf(up))
      if (boxes.count(up)) return static_cast<pid_t>(pid);
  }
  return 0;
}

// The trusted driver of a timed run crashes (the test sends it SIGSEGV, by pid, as a bug of
// its own would): the gate fails in the driver's name, with its signal, not the candidate's.
// The cpp worker ends cleanly when its channel hangs up; the python worker exits with 1 then,
// which made such a crash read as the candidate's "peer hung up" until the scorer told a crash
// from its own stop (DrivenRunFailure in score_result_test.cc; no python task runs here).
TEST_F(PipelineAroundTest, ADriverThatCrashesFailsTheGateInItsOwnName) {
  const std::string run = daemon_->submit({"cpu/reduction", "--agent", "noop"});
  std::atomic<bool> ended = false;
  std::atomic<pid_t> crashed = 0;
  std::thread hunter([&] {
    while (!ended && crashed == 0) {
      const pid_t driver = candidateTimedDriver(daemon_->paths().stateDir.string());
      if (driver != 0 && ::kill(driver, SIGSEGV) == 0) crashed = driver;
      std::this_thread::sleep_for(5ms);
    }
  });
  json attempts = daemon_->waitRun(run);
  ended = true;
  hunter.join();
  ASSERT_NE(crashed.load(), 0) << "no timed driver of the candidate was seen running";
  ASSERT_EQ(attempts.size(), 1u);
  const json& r = result(attempts.at(0));
  std::string reasons;
  bool driverNamed = false;
  for (const auto& [name, g] : r.at("gates").items()) {
    const std::string why = g.value("reason", std::string());
    reasons += name + ": " + why.substr(0, 300) + "\n";
    if (why.rfind("the driver killed by signal 11", 0) == 0) driverNamed = true;
    EXPECT_EQ(why.find("the candidate"), std::string::npos) << name << ": " << why;
  }
  EXPECT_TRUE(driverNamed) << reasons;
  EXPECT_FALSE(r.value("correct", true)) << "a gate that could not time the candidate gives it no score";
}

TEST_F(PipelineScorerTest, ReproduceReScoresASnapshotNextToTheOriginal) {
  json a = daemon_->runOne({"cpu/reduction", "--agent", "reference"});
  ASSERT_EQ(a.at("state"), "scored");
  const std::string sha = result(a).at("snapshot");
  json r = daemon_->ctlJson({"reproduce", sha}, 600s);
  // The original is the first attempt that recorded these files: the suite's daemon may have
  // stored the same snapshot for an earlier reference attempt on this task.
  const json original = r.at("original");
  EXPECT_LE(original.at("id").get<long>(), a.at("id").get<long>());
  EXPECT_EQ(original.at("result").at("snapshot"), sha);
  const json& again = r.at("reproduced");
  ASSERT_EQ(again.at("state"), "scored") << again.dump();
  EXPECT_TRUE(again.at("result").at("correct").get<bool>());
  EXPECT_EQ(again.at("result").at("snapshot"), sha);
  EXPECT_NE(again.at("result").at("seeds"), result(a).at("seeds")) << "a re-score draws fresh seeds";
  const double s1 = result(a).at("speedup"), s2 = again.at("result").at("speedup");
  EXPECT_GT(s2, 1.0);
  // Within a factor of 2 either way: with this suite's quick timing (10 x 2 calls), 26 scorings
  // of this attempt on a 2-CPU VM read 2.97x to 5.06x (a ratio of 1.70). A re-score that lost
  // the kernel reads about 1x against about 4x, and fails here and above.
  EXPECT_LT(std::max(s1, s2) / std::min(s1, s2), 2.0) << s1 << " vs " << s2;

  // The store lists it with its attempt, shows its entries, and hands it out for checking.
  json listed = daemon_->ctlJson({"snapshot", "list"});
  bool found = false;
  for (const json& e : listed.at("snapshots"))
    if (e.at("sha256") == sha) found = e.at("metadata").at("attempt") == original.at("id");
  EXPECT_TRUE(found) << listed.dump();
  EXPECT_FALSE(daemon_->ctlJson({"snapshot", "show", sha}).at("entries").empty());
  TempDir out;
  auto exported = daemon_->ctl({"snapshot", "export", sha, "-o", (out / "a.tar.zst").string()});
  ASSERT_EQ(exported.exitCode, 0) << exported.err;
  auto verified = daemon_->ctl({"snapshot", "verify", (out / "a.tar.zst").string()});
  EXPECT_EQ(verified.exitCode, 0) << verified.err << verified.out;
}

TEST_F(PipelineScorerTest, TasksValidateScoresBaselineSolutionAndBrokenThroughTheScorer) {
  // An impossible bar makes the command fail while every other verdict is still visible.
  auto r = daemon_->ctl({"--json", "tasks", "validate", "cpu/reduction", "--min-speedup", "1000"}, 600s);
  EXPECT_EQ(r.exitCode, 1) << r.err;
  json j = json::parse(r.out, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << r.out;
  EXPECT_FALSE(j.at("ok").get<bool>());
  const json& t = j.at("tasks").at(0);
  EXPECT_TRUE(t.at("baseline").at("correct").get<bool>());
  // The baseline is judged by correctness alone (timing it against itself is the noop test's job).
  EXPECT_TRUE(t.at("baseline").at("held_out_correct").get<bool>());
  EXPECT_FALSE(t.at("baseline").at("performance_measured").get<bool>());
  EXPECT_TRUE(t.at("baseline").at("speedup").is_null());
  EXPECT_TRUE(t.at("solution").at("performance_measured").get<bool>());
  EXPECT_TRUE(t.at("solution").at("correct").get<bool>());
  EXPECT_GT(t.at("solution").at("speedup").get<double>(), 1.5);
  EXPECT_TRUE(t.at("solution").at("held_out_correct").get<bool>());
  EXPECT_FALSE(t.at("broken").at("compiled").get<bool>());
  ASSERT_EQ(t.at("problems").size(), 1u) << t.dump();
  EXPECT_NE(t.at("problems").at(0).get<std::string>().find("not above 1000"), std::string::npos);
}

TEST_F(PipelineScorerTest, InvalidSubmissionsAreRefusedAndTheDaemonCarriesOn) {
  EXPECT_EQ(daemon_->ctl({"submit", "cpu/reduction", "--agent", "nosuchagent"}).exitCode, 1);
  EXPECT_EQ(daemon_->ctl({"submit", "nosuchsuite"}).exitCode, 1);
  EXPECT_EQ(daemon_->ctl({"reproduce", std::string(64, 'a')}).exitCode, 1);
  EXPECT_EQ(daemon_->ctl({"ping"}).exitCode, 0);
}

// kill -9 in the middle of a run: no attempt is lost or scored twice, nothing of the old
// daemon's sandboxes is left, and the restart finishes the run.
// Polls until an attempt of the run is in a stage whose name contains `stage`.
bool waitForStage(PipelineDaemon& d, const std::string& run, const std::string& stage) {
  for (int i = 0; i < 600; ++i) {
    std::this_thread::sleep_for(100ms);
    auto st = d.ctl({"--json", "status", run});
    json j = json::parse(st.out, nullptr, false);
    if (j.is_discarded()) continue;
    for (const json& a : j.at("attempts"))
      if (a.at("stage").is_string() && a.at("stage").get<std::string>().find(stage) != std::string::npos) return true;
  }
  return false;
}

// Every "scored" event of the run's log, counted per attempt.
std::map<long, int> scoredEvents(PipelineDaemon& d, const std::string& run, bool* sawRecovery = nullptr) {
  auto events = d.ctl({"--json", "watch", run}, 60s);
  std::map<long, int> scoredCount;
  std::istringstream lines(events.out);
  std::string line;
  while (std::getline(lines, line)) {
    json ev = json::parse(line, nullptr, false);
    if (ev.is_discarded() || !ev.contains("kind")) continue;
    if (ev["kind"] == "attempt.state" && ev["data"].value("state", "") == "scored") ++scoredCount[ev["attempt_id"].get<long>()];
    if (sawRecovery && ev["kind"] == "attempt.state" && ev["data"].contains("reason")) *sawRecovery = true;
  }
  return scoredCount;
}

// SIGTERM while a gate runs: the gate's sandbox is cancelled, and that is no verdict on the
// candidate. The attempt must go back to the queue, not be recorded with the cancelled gate
// as a failure, and the next daemon must score it in full.
TEST(PipelineRestartTest, TermMidScoringRequeuesTheAttemptInsteadOfRecordingCancelledGates) {
  PipelineDaemon d("term", PipelineDaemon::Timing::Minimal);
  d.start();
  const std::string id = d.submit({"cpu/reduction", "--agent", "reference"});
  ASSERT_TRUE(waitForStage(d, id, "performance")) << "the run never reached a performance gate";
  d.stop();
  d.start();
  json attempts = d.waitRun(id);
  ASSERT_EQ(attempts.size(), 1u);
  const json& a = attempts.at(0);
  EXPECT_EQ(a.at("state"), "scored") << a.dump();
  const json& r = a.at("result");
  EXPECT_TRUE(r.at("correct").get<bool>()) << r.dump();
  EXPECT_TRUE(r.at("held_out_correct").get<bool>()) << r.dump();
  EXPECT_GT(r.at("speedup").get<double>(), 1.0);
  auto scored = scoredEvents(d, id);
  ASSERT_EQ(scored.size(), 1u);
  EXPECT_EQ(scored.begin()->second, 1) << "the cancelled scoring was recorded as a result";
  d.stop();
  d.expectNothingLeft();
}

// akad --no-agent-network: an agent whose definition asks for the host network gets a network
// namespace of its own with loopback only. The probe counts the interfaces besides lo; on the
// host (the positive control) it must find some.
TEST(PipelineNetworkTest, NoAgentNetworkKeepsAHostNetworkAgentOffTheNetwork) {
  const std::string probe = "n=$(tail -n +3 /proc/net/dev | grep -vc '^ *lo:'); echo interfaces=$n; test \"$n\" -eq 0";
  auto host = runCommand({"/bin/sh", "-c", probe}, {}, 10s);
  if (host.exitCode == 0) GTEST_SKIP() << "this machine has no interface besides lo: nothing to keep an agent from";
  PipelineDaemon d("nonet", PipelineDaemon::Timing::Minimal);
  const fs::path agents = d.scratch("agents");
  std::ofstream(agents / "nethost.yaml") << "name: nethost\n"
                                            "description: asks for the host network and counts the interfaces it got\n"
                                            "command: [\"/bin/sh\", \"-c\", " << json(probe).dump() << "]\n"
                                            "network: host\n"
                                            "time_limit_s: 30\n";
  d.start({"--no-agent-network", "--agents-dir", agents.string()});
  json a = d.runOne({"cpu/reduction", "--agent", "nethost"});
  ASSERT_EQ(a.at("state"), "scored") << a.dump();
  EXPECT_EQ(result(a).at("agent").at("exit_code"), 0) << "the agent saw interfaces besides lo: " << result(a).at("agent").dump();
  d.stop();
  d.expectNothingLeft();
}

// An HTTP server on the host's loopback for the network tests: answers "hello" to every
// request and keeps the request lines it saw.
class LoopbackHttpServer {
 public:
  LoopbackHttpServer() {
    fd_ = listenOnLoopback(port_);
    EXPECT_GE(fd_, 0);
    thread_ = std::thread([this] {
      while (!stop_) {
        pollfd p{fd_, POLLIN, 0};
        if (::poll(&p, 1, 100) <= 0) continue;
        const int c = ::accept(fd_, nullptr, nullptr);
        if (c < 0) continue;
        char buf[4096];
        const ssize_t n = ::recv(c, buf, sizeof buf, 0);
        if (n > 0) {
          std::lock_guard lock(mutex_);
          const std::string req(buf, static_cast<std::size_t>(n));
          lines_.push_back(req.substr(0, req.find("\r\n")));
        }
        static const char kReply[] = "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello";
        ::send(c, kReply, sizeof kReply - 1, MSG_NOSIGNAL);
        ::close(c);
      }
    });
  }
  ~LoopbackHttpServer() {
    stop_ = true;
    thread_.join();
    ::close(fd_);
  }
  int port() const { return port_; }
  std::vector<std::string> lines() {
    std::lock_guard lock(mutex_);
    return lines_;
  }

 private:
  int fd_ = -1, port_ = 0;
  std::atomic<bool> stop_{false};
  std::mutex mutex_;
  std::vector<std::string> lines_;
  std::thread thread_;
};

// An agent whose network is `allow` reaches the listed host:port through the egress proxy and
// nothing else: not a host:port off its list, not the host's loopback directly; both the
// connection and the refusal are in the attempt's network log and in its result.
TEST(PipelineNetworkTest, AnAllowListedAgentReachesItsHostThroughTheProxyAndNothingElse) {
  LoopbackHttpServer listed, unlisted;
  const std::string a = std::to_string(listed.port()), b = std::to_string(unlisted.port());
  PipelineDaemon d("allow", PipelineDaemon::Timing::Minimal);
  const fs::path agents = d.scratch("agents");
  const std::string script =
      "import os, socket, urllib.request, urllib.error\n"
      "for k in ('no_proxy', 'NO_PROXY'): os.environ.pop(k, None)\n"
      "def get(url):\n"
      "    try:\n"
      "        return 'ok ' + urllib.request.urlopen(url, timeout=10).read().decode()\n"
      "    except urllib.error.HTTPError as e:\n"
      "        return 'http %d' % e.code\n"
      "    except Exception as e:\n"
      "        return 'error ' + type(e).__name__\n"
      "print('listed:', get('http://127.0.0.1:" + a + "/ok'), flush=True)\n"
      "print('unlisted:', get('http://127.0.0.1:" + b + "/no'), flush=True)\n"
      "s = socket.socket(); s.settimeout(3)\n"
      "try:\n"
      "    s.connect(('127.0.0.1', " + a + ")); print('direct: connected')\n"
      "except Exception as e:\n"
      "    print('direct:', type(e).__name__)\n";
  std::ofstream(agents / "fetcher.yaml") << "name: fetcher\n"
                                            "description: fetches one listed and one unlisted URL\n"
                                            "command: [\"python3\", \"-c\", " << json(script).dump() << "]\n"
                                            "network: allow\n"
                                            "allow: [\"127.0.0.1:" << a << " private\"]\n"
                                            "time_limit_s: 60\n";
  d.start({"--agents-dir", agents.string()});
  json at = d.runOne({"cpu/reduction", "--agent", "fetcher"});
  ASSERT_EQ(at.at("state"), "scored") << at.dump();
  const std::string id = std::to_string(at.at("id").get<long>());
  const std::string out = d.ctl({"logs", id, "--stage", "agent"}).out;
  EXPECT_NE(out.find("listed: ok hello"), std::string::npos) << out;
  EXPECT_NE(out.find("unlisted: http 403"), std::string::npos) << out;
  EXPECT_NE(out.find("direct: ConnectionRefusedError"), std::string::npos) << out;
  EXPECT_EQ(listed.lines(), std::vector<std::string>{"GET /ok HTTP/1.1"});
  EXPECT_TRUE(unlisted.lines().empty()) << "a host:port off the list was reached";
  const json network = result(at).at("agent").at("network");
  EXPECT_EQ(network.at("connections"), 1) << network.dump();
  EXPECT_EQ(network.at("denied"), 1) << network.dump();
  const std::string log = d.ctl({"logs", id, "--stage", "network"}).out;
  EXPECT_NE(log.find("\"allowed\":true"), std::string::npos) << log;
  EXPECT_NE(log.find("\"port\":" + b), std::string::npos) << log;
  EXPECT_NE(log.find("is not on the agent's allow list"), std::string::npos) << log;
  EXPECT_FALSE(fs::exists(d.paths().stateDir / "attempts" / id / "net")) << "the proxy's socket folder was left";
  const std::string results = d.ctl({"results", at.at("run_id").get<std::string>()}).out;
  EXPECT_NE(results.find("network  1 connection(s), 1 refused"), std::string::npos) << results;
  d.stop();
  d.expectNothingLeft();
}

// A credential passed with --pass-env reaches the agent's environment and no process's command
// line (/proc/PID/cmdline is readable by every local user): the test watches every process's
// command line for the whole run, the agent's stage included.
TEST(PipelineSecretTest, ASecretPassedWithPassEnvIsInNoCommandLine) {
  std::string secret = "akad-secret-";
  for (int i = 0; i < 28; ++i) secret += "abcdefghijklmnopqrstuvwxyz0123456789"[::random() % 36];
  ASSERT_EQ(secret.size(), 40u);
  PipelineDaemon d("secret", PipelineDaemon::Timing::Minimal);
  const fs::path agents = d.scratch("agents");
  std::ofstream(agents / "secretive.yaml")
      << "name: secretive\n"
         "description: needs a 40-character key, and takes its time with it\n"
         "command: [\"/bin/sh\", \"-c\", \"sleep 3; test ${#AKAD_TEST_SECRET} -eq 40\"]\n"
         "credentials: [AKAD_TEST_SECRET]\n"
         "time_limit_s: 30\n";
  d.start({"--agents-dir", agents.string()});
  auto submitted = runCommand({akactlBinary().string(), "--socket", d.paths().socket.string(), "--json", "submit",
                               "cpu/reduction", "--agent", "secretive", "--pass-env", "AKAD_TEST_SECRET"},
                              {"AKAD_TEST_SECRET=" + secret}, 60s);
  ASSERT_EQ(submitted.exitCode, 0) << submitted.err;
  const std::string id = json::parse(submitted.out).at("run").at("id");
  int scans = 0;
  for (;;) {
    ++scans;
    for (const auto& e : fs::directory_iterator("/proc")) {
      const std::string name = e.path().filename();
      if (name.find_first_not_of("0123456789") != std::string::npos) continue;
      EXPECT_EQ(readFile(e.path() / "cmdline").find(secret), std::string::npos)
          << "the secret is on the command line of pid " << name << ": " << readFile(e.path() / "cmdline");
    }
    const std::string state = d.ctlJson({"status", id}).at("run").at("state");
    if (state != "running" && state != "queued") break;
    std::this_thread::sleep_for(50ms);
  }
  EXPECT_GT(scans, 20) << "the run ended before the command lines were watched for long";
  json a = d.ctlJson({"status", id}).at("attempts").at(0);
  ASSERT_EQ(a.at("state"), "scored") << a.dump();
  EXPECT_EQ(result(a).at("agent").at("exit_code"), 0) << "the agent did not get the secret: " << result(a).at("agent").dump();
  d.stop();
  d.expectNothingLeft();
}

// Two attempts that run at once run as two host uids of the attempt range, neither of them
// the trusted sandboxes' uid: one agent that takes every inotify instance its uid may have
// (fs.inotify.max_user_instances, a per-uid kernel limit) leaves the other's allowance whole.
// Each agent takes all it can, holds them while the other does the same, and reports.
TEST(PipelineUidTest, ConcurrentAttemptsRunAsTheirOwnHostUidsAndShareNoPerUidLimit) {
  PipelineDaemon d("uids", PipelineDaemon::Timing::Minimal);
  d.start({"--workers", "2", "--sandbox-uid", "700100000", "--attempt-uids", "700100001-700100004"});
  const std::string agent =
      "head -n1 /proc/self/uid_map; python3 -c '\n"
      "import ctypes, time\n"
      "libc = ctypes.CDLL(None); fds = []\n"
      "while len(fds) < 100000:\n"
      "    fd = libc.inotify_init()\n"
      "    if fd < 0: break\n"
      "    fds.append(fd)\n"
      "print(\"inotify\", len(fds), open(\"/proc/sys/fs/inotify/max_user_instances\").read().strip(), flush=True)\n"
      "time.sleep(12)\n"
      "'";
  const std::string id = d.submit({"cpu/reduction", "--agent-command", agent, "--attempts", "2"});
  ASSERT_EQ(d.ctl({"watch", id}, 600s).exitCode, 0);
  const json attempts = d.ctlJson({"status", id}).at("attempts");
  ASSERT_EQ(attempts.size(), 2u);
  std::set<long> uids;
  for (const json& a : attempts) {
    ASSERT_EQ(a.at("state"), "scored") << a.dump();
    const std::string out = d.ctl({"logs", std::to_string(a.at("id").get<long>()), "--stage", "agent"}).out;
    // The uid map's line "1000 700100001 1": the sandbox's uid 1000 is host uid 700100001.
    std::smatch m;
    ASSERT_TRUE(std::regex_search(out, m, std::regex(R"(\n\s*1000\s+([0-9]+)\s+1\n)"))) << out;
    const long outside = std::stol(m[1]);
    EXPECT_GE(outside, 700100001) << out;
    EXPECT_LE(outside, 700100004) << out;
    uids.insert(outside);
    const auto at = out.find("inotify ");
    ASSERT_NE(at, std::string::npos) << out;
    long got = 0, limit = 0;
    std::istringstream(out.substr(at + 8)) >> got >> limit;
    EXPECT_GT(limit, 0) << out;
    EXPECT_EQ(got, limit) << "an agent got fewer inotify instances than its uid may have: " << out;
  }
  EXPECT_EQ(uids.size(), 2u) << "the two attempts ran as one host uid";
  // They overlapped (each agent holds its instances for 12 s): otherwise the test proves nothing.
  const double apart = std::abs(isoSeconds(attempts.at(0).at("started_at")) - isoSeconds(attempts.at(1).at("started_at")));
  EXPECT_LT(apart, 6.0) << "the two attempts did not run at once";
  d.stop();
  d.expectNothingLeft();
}

// An agent that writes more than its workspace may hold gets ENOSPC from the kernel (the
// workspace is a tmpfs of --workspace-size bytes and --workspace-inodes inodes), and the
// workspace is gone after the attempt: after it is scored, and after the daemon was killed in
// the middle of the agent and started again.
TEST(PipelineDiskTest, AnAgentCannotPassItsWorkspaceSizeOrInodesAndItsWorkspaceIsGoneAfterwards) {
  PipelineDaemon d("disk", PipelineDaemon::Timing::Minimal);
  d.start({"--workspace-size", "16M", "--workspace-inodes", "3000"});
  const std::string hog =
      "head -c 64M /dev/zero > big; echo \"big:$? $(wc -c < big)\"; rm -f big; mkdir many; i=0; "
      "while [ $i -lt 10000 ] && true > many/f$i 2>/dev/null; do i=$((i+1)); done; echo \"files:$i\"; rm -rf many; "
      "stat -f -c 'fs:%T' /workspace";
  const std::string id = d.submit({"cpu/reduction", "--agent-command", hog});
  ASSERT_EQ(d.ctl({"watch", id}, 600s).exitCode, 0);
  const json a = d.ctlJson({"status", id}).at("attempts").at(0);
  ASSERT_EQ(a.at("state"), "scored") << a.dump();
  const std::string out = d.ctl({"logs", std::to_string(a.at("id").get<long>()), "--stage", "agent"}).out;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(out, m, std::regex(R"(big:([0-9]+) ([0-9]+))"))) << out;
  EXPECT_NE(m[1], "0") << "writing 64 MiB into a 16 MiB workspace succeeded";
  EXPECT_LE(std::stol(m[2]), 16l << 20) << out;
  ASSERT_TRUE(std::regex_search(out, m, std::regex(R"(files:([0-9]+))"))) << out;
  EXPECT_LT(std::stol(m[1]), 3000) << "the agent made more files than its workspace's inodes";
  EXPECT_GT(std::stol(m[1]), 1000) << out;
  EXPECT_NE(out.find("fs:tmpfs"), std::string::npos) << out;
  const fs::path attemptDir = d.paths().stateDir / "attempts" / std::to_string(a.at("id").get<long>());
  EXPECT_FALSE(fs::exists(attemptDir / "workspace"));
  EXPECT_TRUE(d.workspaceMounts().empty());

  // Killed mid-agent: the next daemon unmounts and removes the workspace before anything else.
  const std::string slow = d.submit({"cpu/reduction", "--agent-command", "touch here; sleep 120"});
  ASSERT_TRUE(waitForStage(d, slow, "agent"));
  std::vector<std::string> mounted;
  for (int i = 0; i < 100 && mounted.empty(); ++i) {
    std::this_thread::sleep_for(100ms);
    mounted = d.workspaceMounts();
  }
  ASSERT_EQ(mounted.size(), 1u) << "the agent's workspace is not a file system of its own";
  d.kill9();
  EXPECT_EQ(d.workspaceMounts().size(), 1u);  // a daemon killed with -9 leaves it
  d.start({"--no-requeue"});
  EXPECT_TRUE(d.workspaceMounts().empty());
  const json interrupted = d.ctlJson({"status", slow}).at("attempts").at(0);
  EXPECT_EQ(interrupted.at("state"), "interrupted") << interrupted.dump();
  EXPECT_FALSE(fs::exists(d.paths().stateDir / "attempts" / std::to_string(interrupted.at("id").get<long>()) / "workspace"));
  d.stop();
  d.expectNothingLeft();
}

TEST(PipelineRestartTest, Kill9MidRunThenRestartScoresEveryAttemptExactlyOnce) {
  PipelineDaemon d("restart", PipelineDaemon::Timing::Minimal);
  d.start();
  const std::string id = d.submit({"cpu/reduction", "--agent", "noop", "--attempts", "2"});
  ASSERT_TRUE(waitForStage(d, id, "performance")) << "the run never reached a performance gate";
  d.kill9();
  // The sandboxes die with the daemon (PR_SET_PDEATHSIG); their cgroups are cleaned at restart.
  const auto left = processesLeftMentioning(d.paths().stateDir.string());
  EXPECT_TRUE(left.empty()) << "outlived the daemon:" << describeProcesses(left);
  // Its mount templates stay (nobody removed them); the next daemon removes them first.
  const auto kept = d.templateMounts();
  EXPECT_FALSE(kept.empty());

  d.start();
  for (const auto& m : d.templateMounts())
    EXPECT_EQ(std::find(kept.begin(), kept.end(), m), kept.end()) << "the killed daemon's template " << m << " is still there";
  json attempts = d.waitRun(id);
  ASSERT_EQ(attempts.size(), 2u);
  for (const json& a : attempts) EXPECT_EQ(a.at("state"), "scored") << a.dump();
  // Exactly one "scored" per attempt in the event log.
  bool sawRecovery = false;
  auto scoredCount = scoredEvents(d, id, &sawRecovery);
  EXPECT_EQ(scoredCount.size(), 2u);
  for (const auto& [attempt, n] : scoredCount) EXPECT_EQ(n, 1) << "attempt " << attempt << " scored " << n << " times";
  EXPECT_TRUE(sawRecovery) << "the restart should have recorded why the attempt ran again";
  d.stop();
  EXPECT_TRUE(d.templateMounts().empty());
  d.expectNothingLeft();
}

}  // namespace
}  // namespace akad::test
