// akad --executor slurm against a real Slurm cluster of one machine (scripts/slurm-test-cluster:
// munged, slurmctld, two slurmd in UTS namespaces of their own, each with a stand-in GPU gres,
// from Debian's packages): every attempt is scored once through a Slurm job, the job id and node
// are recorded, cancel empties the queue, a node that fails mid-attempt leads to a requeue and
// one score, a front end that dies leaves its jobs to the next one, a GPU task asks Slurm for
// the gres, and nothing is left in the queue, the shared area or the nodes' cgroups.
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <sys/wait.h>

#include <csignal>
#include <cstdlib>
#include <fstream>
#include <map>
#include <thread>
#include <regex>
#include <set>

#include "tests/pipeline/pipeline_daemon.h"

namespace akad::test {
namespace {

using namespace std::chrono_literals;

const fs::path kClusterScript = fs::path(AKAD_SOURCE_DIR) / "scripts" / "slurm-test-cluster";

// The test's own cluster: started in its folder, stopped (by the pids it wrote) at the end.
class TestCluster {
 public:
  TestCluster() {
    auto r = runCommand({kClusterScript.string(), "start", dir_.path().string() + "/cluster"}, {}, 120s);
    ok_ = r.exitCode == 0;
    why_ = r.err + r.out;
    if (ok_) {
      ::setenv("SLURM_CONF", (dir_.path() / "cluster" / "slurm.conf").c_str(), 1);
      std::smatch m;
      const std::string conf = readFile(dir_.path() / "cluster" / "slurm.conf");
      if (std::regex_search(conf, m, std::regex("ClusterName=([a-z0-9]+)"))) name_ = m[1].str();
    }
  }
  ~TestCluster() {
    (void)runCommand({kClusterScript.string(), "stop", (dir_.path() / "cluster").string()}, {}, 60s);
    ::unsetenv("SLURM_CONF");
  }
  bool ok() const { return ok_; }
  const std::string& name() const { return name_; }
  const std::string& why() const { return why_; }
  void nodeDown(const std::string& node) {
    runCommand({kClusterScript.string(), "node-down", (dir_.path() / "cluster").string(), node}, {}, 30s);
  }
  void nodeUp(const std::string& node) {
    runCommand({kClusterScript.string(), "node-up", (dir_.path() / "cluster").string(), node}, {}, 30s);
  }

 private:
  TempDir dir_;
  bool ok_ = false;
  std::string why_, name_;
};

// A Slurm command, found on PATH (the harness's runCommand takes a path).
CommandResult slurmCommand(const std::vector<std::string>& argv) {
  std::vector<std::string> sh = {"/bin/sh", "-c", "exec \"$0\" \"$@\""};
  sh.insert(sh.end(), argv.begin(), argv.end());
  auto r = runCommand(sh, {}, 30s);
  EXPECT_EQ(r.exitCode, 0) << argv[0] << ": " << r.err;
  return r;
}

// Our jobs in Slurm's queue (name akad-a<attempt>), with their states.
std::vector<std::string> queueOf() {
  auto r = slurmCommand({"squeue", "-h", "-o", "%j %T"});
  std::vector<std::string> out;
  std::istringstream in(r.out);
  for (std::string line; std::getline(in, line);)
    if (line.rfind("akad-a", 0) == 0) out.push_back(line);
  return out;
}

std::string jobField(const std::string& job, const std::string& key) {
  auto r = slurmCommand({"scontrol", "show", "job", "-o", job});
  std::smatch m;
  // Whole keys only: "NodeList" must not match "ReqNodeList".
  const std::regex re("(^| )" + key + "=([^ ]*)");
  return std::regex_search(r.out, m, re) ? m[2].str() : "";
}

// The node programs' cgroup parents and work folders of this cluster's jobs.
std::vector<fs::path> nodeLeftovers(const std::string& cluster) {
  std::vector<fs::path> out;
  std::error_code ec;
  const std::string prefix = "akad-node-" + cluster + "-";
  auto scan = [&](const fs::path& dir) {
    for (const auto& c : fs::directory_iterator(dir, ec))
      if (c.path().filename().string().rfind(prefix, 0) == 0) out.push_back(c.path());
  };
  scan("/sys/fs/cgroup");
  for (const auto& h : fs::directory_iterator("/sys/fs/cgroup", ec))
    if (h.is_directory(ec)) scan(h.path());
  scan(fs::temp_directory_path());
  return out;
}

bool slurmInstalled() {
  return runCommand({"/bin/sh", "-c", "command -v slurmctld && command -v munged"}, {}, 10s).exitCode == 0;
}

class SlurmExecutorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!slurmInstalled()) GTEST_SKIP() << "slurm-wlm and munge are not installed (scripts/install-deps installs them)";
    cluster_ = std::make_unique<TestCluster>();
    ASSERT_TRUE(cluster_->ok()) << cluster_->why();
    // The suite's run looks at speedups; the others at what Slurm and the front end do around
    // an attempt, which needs it scored but no figure of its.
    const std::string name = ::testing::UnitTest::GetInstance()->current_test_info()->name();
    const bool speedups = name == "EveryAttemptIsScoredOnceOnTheClusterAndCancelEmptiesTheQueue";
    daemon_ = std::make_unique<PipelineDaemon>(
        "slurm", speedups ? PipelineDaemon::Timing::Quick : PipelineDaemon::Timing::Minimal);
    shared_ = daemon_->scratch("shared");
    nodeCache_ = daemon_->scratch("node-cache");
    daemon_->start(daemonArgs());
  }
  // Three attempts in Slurm at once: the node runs two (2 CPUs), so a third waits in its queue.
  // The two nodes share this machine, so they share one node cache too (locked across jobs).
  std::vector<std::string> daemonArgs() const {
    return {"--executor", "slurm", "--slurm-shared", shared_.string(), "--workers", "3",
            "--slurm-node-cache", nodeCache_.string()};
  }
  void TearDown() override {
    if (!daemon_) return;
    daemon_->stop();
    daemon_->expectNothingLeft();
    EXPECT_TRUE(queueOf().empty()) << "jobs left in Slurm's queue";
    std::error_code ec;
    EXPECT_TRUE(fs::is_empty(shared_ / "jobs", ec) || !fs::exists(shared_ / "jobs")) << "job folders left in the shared area";
    ASSERT_FALSE(cluster_->name().empty());
    for (const fs::path& p : nodeLeftovers(cluster_->name())) ADD_FAILURE() << "a node program left " << p;
    daemon_.reset();
    cluster_.reset();
  }

  std::unique_ptr<TestCluster> cluster_;
  std::unique_ptr<PipelineDaemon> daemon_;
  fs::path shared_, nodeCache_;
};

// An agent command that works (sleeps) until `fromNow` after this call, however often Slurm
// starts it: a requeued or resubmitted attempt waits only for what is left, not the whole time
// again.
std::string agentWorkingUntil(std::chrono::seconds fromNow) {
  const auto until = std::chrono::duration_cast<std::chrono::seconds>(
                         (std::chrono::system_clock::now() + fromNow).time_since_epoch()).count();
  return "left=$((" + std::to_string(until) + " - $(date +%s))); if [ $left -gt 0 ]; then sleep $left; fi";
}

// Until the attempt's stages run on the node (at most two minutes: a loaded CI machine takes
// over one to start a job); its job id.
std::string waitOnNode(PipelineDaemon& d, const std::string& run) {
  for (int i = 0; i < 480; ++i) {
    json a = d.ctlJson({"status", run}).at("attempts").at(0);
    const json stage = a.value("stage", json());
    const std::string name = stage.is_string() ? stage.get<std::string>() : "";
    if (a.at("executor_job").is_string() && !name.empty() && name.rfind("slurm:", 0) != 0) return a.at("executor_job");
    std::this_thread::sleep_for(250ms);
  }
  return "";
}

// The events of one attempt, oldest first.
json eventsOf(PipelineDaemon& d, const std::string& run, std::int64_t attempt) {
  auto r = d.ctl({"--json", "watch", run}, 60s);
  json out = json::array();
  std::istringstream in(r.out);
  for (std::string line; std::getline(in, line);) {
    json e = json::parse(line, nullptr, false);
    if (e.is_object() && e.value("attempt_id", json()) == json(attempt)) out.push_back(e);
  }
  return out;
}

TEST_F(SlurmExecutorTest, EveryAttemptIsScoredOnceOnTheClusterAndCancelEmptiesTheQueue) {
  PipelineDaemon& d = *daemon_;
  // Four CPU tasks with the reference agent: more attempts than the two nodes run at once, so
  // one waits in Slurm's queue. (PipelineTest scores every CPU task through the local
  // executor; the node program runs the same scorer, so the Slurm path needs no more of them.)
  const std::vector<std::string> tasks = {"cpu/matmul", "cpu/prefix_sum", "cpu/reduction", "cpu/softmax"};
  std::vector<std::string> args = tasks;
  args.insert(args.end(), {"--agent", "reference"});
  const std::string run = d.submit(args);
  json attempts = d.waitRun(run, 1200s);
  ASSERT_EQ(attempts.size(), tasks.size());
  std::set<std::string> nodes;
  for (const json& a : attempts) {
    ASSERT_EQ(a.at("state"), "scored") << a.dump();
    const json& r = a.at("result");
    EXPECT_TRUE(r.at("correct").get<bool>()) << a.dump();
    EXPECT_GT(r.at("speedup").get<double>(), 1.0) << a.at("task_id");
    EXPECT_TRUE(a.at("executor_job").is_string()) << a.dump();
    ASSERT_TRUE(a.at("executor_node").is_string()) << a.dump();
    nodes.insert(a.at("executor_node").get<std::string>());
    EXPECT_EQ(r.at("executor").at("kind"), "slurm");
    EXPECT_EQ(r.at("executor").at("job"), a.at("executor_job"));
    EXPECT_TRUE(a.at("snapshot_sha256").is_string()) << "the snapshot did not come back to the front end";
    // Where the Slurm path's time went: from the attempt's claim to the node's first stage
    // (sbatch, Slurm's scheduling, the job's start: queue time included when the node was
    // busy), and from the node program's end to the front end's record of the score.
    json ev = eventsOf(d, run, a.at("id").get<std::int64_t>());
    double start = -1, firstNode = -1, end = -1;
    for (const json& e : ev) {
      const double t = isoSeconds(e.value("at", std::string()));
      const std::string kind = e.value("kind", std::string());
      const json data = e.value("data", json::object());
      if (kind == "attempt.state" && data.value("state", std::string()) == "running" && start < 0) start = t;
      if (kind == "attempt.stage" && firstNode < 0 && data.value("stage", std::string()).rfind("slurm:", 0) != 0)
        firstNode = t;
      if (kind == "attempt.state" && data.value("state", std::string()) == "scored") end = t;
    }
    const double nodeEnd = isoSeconds(r.at("executor").value("node_finished_at", std::string()));
    EXPECT_GT(nodeEnd, 0);
    std::cout << "[ figure ] " << a.at("task_id").get<std::string>() << ": claimed to first stage on the node "
              << firstNode - start << " s; node program's end to scored " << end - nodeEnd << " s\n";
    // Scored once: one "scored" event for the attempt.
    int scored = 0;
    for (const json& e : ev)
      if (e.value("kind", std::string()) == "attempt.state" && e.value("data", json::object()).value("state", std::string()) == "scored")
        ++scored;
    EXPECT_EQ(scored, 1);
  }

  // One job per node at a time (one CPU each): Slurm used both nodes.
  EXPECT_EQ(nodes, (std::set<std::string>{"akadnode1", "akadnode2"}));
  // The jobs kept their trusted builds in the node cache: one per task version, and one build
  // of the harness's shared objects for them all.
  int harnessBuilds = 0, trustedBuilds = 0;
  for (const auto& e : fs::directory_iterator(nodeCache_)) {
    if (e.path().filename().string().rfind("harness-", 0) == 0) harnessBuilds += fs::exists(e.path() / "common" / ".built");
    else trustedBuilds += fs::exists(e.path() / "trusted" / ".built");
  }
  EXPECT_EQ(harnessBuilds, 1);
  EXPECT_EQ(trustedBuilds, static_cast<int>(tasks.size()));
  // The run's report is the local executor's in kind: everything compiled and correct, faster.
  const json report = d.ctlJson({"report", run}).at("report");
  EXPECT_EQ(report.at("compile_rate"), 1.0) << report.dump();
  EXPECT_EQ(report.at("correctness_rate"), 1.0) << report.dump();
  EXPECT_GT(report.at("geomean_speedup").get<double>(), 1.0) << report.dump();

  // Cancel: a run whose jobs are running and queued (the nodes run two at a time).
  const std::string second = d.submit({"cpu/softmax", "cpu/reduction", "cpu/matmul", "--agent", "reference"});
  bool queued = false;
  for (int i = 0; i < 120 && !queued; ++i) {
    for (const std::string& j : queueOf())
      if (j.find("PENDING") != std::string::npos) queued = true;
    if (!queued) std::this_thread::sleep_for(500ms);
  }
  ASSERT_TRUE(queued) << "no job of the second run waited in Slurm's queue";
  auto c = d.ctl({"cancel", second});
  ASSERT_EQ(c.exitCode, 0) << c.err;
  json cancelled = d.waitRun(second, 120s);
  for (const json& a : cancelled) EXPECT_EQ(a.at("state"), "cancelled") << a.dump();
  for (int i = 0; i < 60 && !queueOf().empty(); ++i) std::this_thread::sleep_for(500ms);
  EXPECT_TRUE(queueOf().empty()) << "cancelled jobs are still in Slurm's queue";
}

TEST_F(SlurmExecutorTest, ANodeThatFailsDuringAnAttemptLeadsToARequeueAndOneScore) {
  PipelineDaemon& d = *daemon_;
  // An agent that outlives the time Slurm takes to see the node gone (about 30 s here): a
  // quick attempt could finish before the node is marked down, and nothing would be requeued.
  const std::string run = d.submit({"cpu/softmax", "--agent-command", agentWorkingUntil(90s)});
  const std::string job = waitOnNode(d, run);
  ASSERT_FALSE(job.empty()) << "the attempt never started on the node";
  const std::string node = jobField(job, "NodeList");
  ASSERT_FALSE(node.empty());
  cluster_->nodeDown(node);
  bool requeued = false;
  for (int i = 0; i < 120 && !requeued; ++i) {
    requeued = jobField(job, "Restarts") == "1";
    if (!requeued) std::this_thread::sleep_for(1s);
  }
  cluster_->nodeUp(node);
  ASSERT_TRUE(requeued) << "Slurm did not requeue the job of the failed node: " << jobField(job, "JobState");
  json attempts = d.waitRun(run, 900s);
  ASSERT_EQ(attempts.size(), 1u);
  const json& a = attempts.at(0);
  ASSERT_EQ(a.at("state"), "scored") << a.dump();
  EXPECT_EQ(a.at("result").at("executor").at("restarts"), 1) << a.at("result").at("executor").dump();
  EXPECT_EQ(a.at("executor_job"), job);
  EXPECT_TRUE(a.at("result").at("correct").get<bool>());
  int scored = 0;
  for (const json& e : eventsOf(d, run, a.at("id").get<std::int64_t>()))
    if (e.value("kind", std::string()) == "attempt.state" && e.value("data", json::object()).value("state", std::string()) == "scored")
      ++scored;
  EXPECT_EQ(scored, 1);
}

// A front end that dies (kill -9, no stop) leaves its Slurm jobs running; the next daemon on the
// same state follows them again instead of running the attempts twice.
TEST_F(SlurmExecutorTest, ADaemonThatDiesLeavesItsJobRunningAndTheNextOneFollowsIt) {
  PipelineDaemon& d = *daemon_;
  const std::string run = d.submit({"cpu/softmax", "--agent-command", "sleep 15"});
  const std::string job = waitOnNode(d, run);
  ASSERT_FALSE(job.empty()) << "the attempt never started on the node";
  d.kill9();
  EXPECT_EQ(jobField(job, "JobState"), "RUNNING") << "the job did not outlive the front end";
  d.start(daemonArgs());
  json attempts = d.waitRun(run, 600s);
  ASSERT_EQ(attempts.size(), 1u);
  const json& a = attempts.at(0);
  ASSERT_EQ(a.at("state"), "scored") << a.dump();
  EXPECT_EQ(a.at("executor_job"), job) << "the attempt was submitted again";
  EXPECT_EQ(a.at("result").at("executor").at("restarts"), 0);
  EXPECT_TRUE(a.at("result").at("correct").get<bool>());
  int scored = 0, interrupted = 0;
  for (const json& e : eventsOf(d, run, a.at("id").get<std::int64_t>())) {
    if (e.value("kind", std::string()) != "attempt.state") continue;
    const std::string state = e.value("data", json::object()).value("state", std::string());
    scored += state == "scored";
    interrupted += state == "interrupted";
  }
  EXPECT_EQ(scored, 1);
  EXPECT_EQ(interrupted, 0) << "the followed attempt was marked interrupted";
}

// A job folder in the shared area whose attempt no daemon follows (here: a front end with a
// fresh state over the same shared area) has its job cancelled and is removed at start-up.
TEST_F(SlurmExecutorTest, AJobThatNoAttemptOwnsIsCancelledAtStartUp) {
  PipelineDaemon& d = *daemon_;
  // Its job must still run while the other front end starts (seconds), however late it started
  // on a loaded machine; the attempt that the first front end submits again afterwards waits
  // only for what is left.
  const std::string run = d.submit({"cpu/softmax", "--agent-command", agentWorkingUntil(90s)});
  const std::string job = waitOnNode(d, run);
  ASSERT_FALSE(job.empty()) << "the attempt never started on the node";
  d.kill9();
  ASSERT_FALSE(fs::is_empty(shared_ / "jobs"));
  {
    PipelineDaemon other("slurm-other", PipelineDaemon::Timing::Minimal);
    other.start({"--executor", "slurm", "--slurm-shared", shared_.string()});
    const std::string state = jobField(job, "JobState");
    EXPECT_TRUE(state == "CANCELLED" || state.empty()) << "the orphaned job is " << state;
    std::error_code ec;
    EXPECT_TRUE(fs::is_empty(shared_ / "jobs", ec)) << "the orphaned job's folder is still there";
    other.stop();
    other.expectNothingLeft();
  }
  // The first daemon's attempt was never followed again: start it so TearDown checks its state.
  d.start(daemonArgs());
  json attempts = d.waitRun(run, 600s);
  ASSERT_EQ(attempts.size(), 1u);
  EXPECT_NE(attempts.at(0).value("executor_job", json()), json(job)) << "a cancelled job was followed";
}

// A GPU task's job asks Slurm for one GPU through gres; the stand-in device is no GPU, so the
// node program says the job got none and the attempt fails with that reason, cleanly.
TEST_F(SlurmExecutorTest, AGpuTaskAsksSlurmForOneGpuThroughGres) {
  PipelineDaemon& d = *daemon_;
  const std::string run = d.submit({"hip2hip/softmax", "--agent", "noop"});
  json attempts = d.waitRun(run, 300s);
  ASSERT_EQ(attempts.size(), 1u);
  const json& a = attempts.at(0);
  ASSERT_TRUE(a.at("executor_job").is_string()) << a.dump();
  const std::string job = a.at("executor_job");
  EXPECT_EQ(jobField(job, "TresPerNode"), "gres:gpu:1");
  EXPECT_EQ(a.at("state"), "failed") << a.dump();
  EXPECT_NE(a.value("error", std::string()).find("gave the job no GPU"), std::string::npos) << a.dump();
}

// What a node program leaves when Slurm kills it before it has cleaned up (SIGKILL after
// KillWait; slurmd gone): its cgroup parent, with sandbox cgroups and what still runs in them,
// and its work folder. The next job's node program on that node removes them once Slurm says
// that job has ended, and leaves those of a job Slurm may still run. The leftovers here are the
// test's own: cgroups and folders under the names a node program gives them, for a job id
// Slurm never had and for a job the test holds in the queue, a process of its own, and what a
// local user could put in the shared TMPDIR under such names (a folder of theirs, a link).
// What the sweep test (and the planted work folder's) made, removed however the test ends: its
// process (by pid), its held job, its cgroups (rmdir: empty ones only, deepest first) and its
// folders and link.
struct MadeBySweepTest {
  std::string heldJob;
  pid_t sleeper = -1;
  std::vector<fs::path> cgroups, folders;
  // A job held in the queue (it never runs; cancelled here): its id, empty if sbatch failed.
  std::string holdJob(const std::string& name) {
    auto held = slurmCommand({"sbatch", "--hold", "--parsable", "--job-name=" + name, "--wrap", "true"});
    heldJob = held.out.substr(0, held.out.find_first_of(";\n"));
    return heldJob;
  }
  ~MadeBySweepTest() {
    if (sleeper > 0 && ::waitpid(sleeper, nullptr, WNOHANG) == 0) {
      ::kill(sleeper, SIGKILL);
      ::waitpid(sleeper, nullptr, 0);
    }
    if (!heldJob.empty()) (void)runCommand({"/bin/sh", "-c", "exec scancel \"$0\"", heldJob}, {}, 30s);
    for (const fs::path& c : cgroups) {
      ::rmdir((c / "box-left").c_str());
      ::rmdir(c.c_str());
    }
    std::error_code ec;
    for (const fs::path& f : folders) fs::remove_all(f, ec);  // a link itself, not what it names
  }
};

TEST_F(SlurmExecutorTest, WhatAKilledJobLeftOnTheNodeIsRemovedByTheNextJobThere) {
  PipelineDaemon& d = *daemon_;
  MadeBySweepTest made;
  const std::string live = made.holdJob("akadtest-held");
  ASSERT_FALSE(live.empty());
  const std::string dead = "akad-node-" + cluster_->name() + "-999999-0";
  const std::string kept = "akad-node-" + cluster_->name() + "-" + live + "-0";
  std::vector<fs::path> hierarchies;
  std::error_code ec;
  for (const auto& h : fs::directory_iterator("/sys/fs/cgroup", ec))
    if (h.is_directory(ec) && !h.is_symlink(ec) && fs::exists(h.path() / "cgroup.procs")) hierarchies.push_back(h.path());
  if (fs::exists("/sys/fs/cgroup/cgroup.procs")) hierarchies.push_back("/sys/fs/cgroup");
  ASSERT_FALSE(hierarchies.empty());
  const fs::path tmp = fs::temp_directory_path();
  for (const std::string& name : {dead, kept}) {
    for (const fs::path& h : hierarchies) {
      made.cgroups.push_back(h / name);
      fs::create_directories(h / name / "box-left", ec);
    }
    made.folders.push_back(tmp / name);
    fs::create_directories(tmp / name / "attempts" / "a-left");
    std::ofstream(tmp / name / "attempts" / "a-left" / "file") << "left\n";
  }
  // A local user's decoys under the same kind of name, for job ids Slurm never had either: a
  // folder of theirs (uid 65534) and a link to a folder of files. Neither may be touched.
  const fs::path decoy = tmp / ("akad-node-" + cluster_->name() + "-999998-0");
  const fs::path link = tmp / ("akad-node-" + cluster_->name() + "-999997-0");
  const fs::path target = tmp / ("akadtest-link-target-" + std::to_string(::getpid()));
  made.folders.insert(made.folders.end(), {decoy, link, target});
  fs::create_directories(decoy / "attempts");
  std::ofstream(decoy / "attempts" / "theirs") << "theirs\n";
  ASSERT_EQ(::chown(decoy.c_str(), 65534, 65534), 0);
  fs::create_directories(target / "attempts");
  std::ofstream(target / "attempts" / "precious") << "precious\n";
  fs::create_directory_symlink(target, link);
  ASSERT_EQ(::lchown(link.c_str(), 65534, 65534), 0);  // theirs too
  // A process still in the dead job's sandbox cgroup, in every hierarchy that takes it.
  made.sleeper = ::fork();
  if (made.sleeper == 0) {
    ::execl("/bin/sleep", "sleep", "600", static_cast<char*>(nullptr));
    ::_exit(127);
  }
  ASSERT_GT(made.sleeper, 0);
  int placed = 0;
  for (const fs::path& h : hierarchies)
    placed += static_cast<bool>(std::ofstream(h / dead / "box-left" / "cgroup.procs") << made.sleeper << std::flush);
  EXPECT_GT(placed, 0);

  // The next job on a node: any attempt's (this one fails fast on the stand-in GPU).
  json attempts = d.waitRun(d.submit({"hip2hip/softmax", "--agent", "noop"}), 300s);
  ASSERT_EQ(attempts.size(), 1u);

  pid_t reaped = 0;
  for (int i = 0; i < 100 && reaped == 0; ++i) {
    reaped = ::waitpid(made.sleeper, nullptr, WNOHANG);
    if (reaped == 0) std::this_thread::sleep_for(100ms);
  }
  EXPECT_EQ(reaped, made.sleeper) << "the process left in the ended job's sandbox cgroup still runs";
  for (const fs::path& h : hierarchies) {
    EXPECT_FALSE(fs::exists(h / dead)) << "the ended job's cgroup parent is still in " << h;
    EXPECT_TRUE(fs::exists(h / kept / "box-left")) << "a job Slurm may still run lost its cgroups in " << h;
  }
  EXPECT_FALSE(fs::exists(tmp / dead)) << "the ended job's work folder is still there";
  EXPECT_TRUE(fs::exists(tmp / kept / "attempts" / "a-left" / "file")) << "a job Slurm may still run lost its work folder";
  EXPECT_TRUE(fs::exists(decoy / "attempts" / "theirs")) << "a folder another user made was removed";
  EXPECT_TRUE(fs::is_symlink(link)) << "a link another user made was removed";
  EXPECT_TRUE(fs::exists(target / "attempts" / "precious")) << "what a link pointed to was removed";
}

// A node program's work folder has a predictable name in a shared TMPDIR
// (akad-node-<cluster>-<job>-<restart>), so a local user can create the next job's first and wait
// for root to unpack, build and mount in a folder they own. The node program refuses it: the
// attempt fails saying why, and the folder is left as its owner made it.
TEST_F(SlurmExecutorTest, AWorkFolderALocalUserMadeFirstIsRefusedAndLeftAsItIs) {
  PipelineDaemon& d = *daemon_;
  MadeBySweepTest made;
  // Slurm numbers jobs one after another: the attempt's is one of the next after a job held now.
  const std::string probeJob = made.holdJob("akadtest-probe");
  ASSERT_FALSE(probeJob.empty());
  std::map<std::string, fs::path> planted;
  for (int i = 1; i <= 3; ++i) {
    const std::string job = std::to_string(std::stoll(probeJob) + i);
    const fs::path f = fs::temp_directory_path() / ("akad-node-" + cluster_->name() + "-" + job + "-0");
    made.folders.push_back(f);
    ASSERT_EQ(::mkdir(f.c_str(), 0777), 0) << f;
    ASSERT_EQ(::chmod(f.c_str(), 0777), 0);
    std::ofstream(f / "theirs") << "theirs\n";
    ASSERT_EQ(::chown((f / "theirs").c_str(), 65534, 65534), 0);
    ASSERT_EQ(::chown(f.c_str(), 65534, 65534), 0);
    planted[job] = f;
  }

  json attempts = d.waitRun(d.submit({"cpu/softmax", "--agent", "noop"}), 300s);
  ASSERT_EQ(attempts.size(), 1u);
  const json& a = attempts.at(0);
  ASSERT_TRUE(a.at("executor_job").is_string()) << a.dump();
  const std::string job = a.at("executor_job");
  ASSERT_TRUE(planted.count(job)) << "the attempt ran as job " << job << ", not one of the three after " << probeJob;
  EXPECT_EQ(a.at("state"), "failed") << a.dump();
  EXPECT_NE(a.at("error").dump().find("refusing the work folder"), std::string::npos) << a.dump();
  for (const auto& [j, f] : planted) {
    struct stat st {};
    ASSERT_EQ(::lstat(f.c_str(), &st), 0) << "the folder planted for job " << j << " was removed";
    EXPECT_EQ(st.st_uid, 65534u) << f;
    EXPECT_EQ(st.st_mode & 07777, 0777u) << f;
    std::vector<std::string> entries;
    for (const auto& e : fs::directory_iterator(f)) entries.push_back(e.path().filename().string());
    EXPECT_EQ(entries, std::vector<std::string>{"theirs"}) << "root wrote into the folder planted for job " << j;
  }
}

}  // namespace
}  // namespace akad::test
