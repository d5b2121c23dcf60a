// The Slurm executor's pieces that need no cluster: the sbatch command line a job gets, the
// job spec's round trip and its refusal of malformed specs, the shared area's durable writes.
#include <gtest/gtest.h>

#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "daemon/pipeline/agent.h"
#include "common/durable_file.h"
#include "daemon/slurm/job_tracker.h"
#include "daemon/slurm/shared_area.h"
#include "daemon/slurm/slurm_executor.h"

namespace fs = std::filesystem;
using namespace akad;
using namespace akad::slurm;

namespace {

bool hasPair(const std::vector<std::string>& cmd, const std::string& flag, const std::string& value) {
  for (size_t i = 0; i + 1 < cmd.size(); ++i)
    if (cmd[i] == flag && cmd[i + 1] == value) return true;
  return false;
}

TEST(SlurmCommand, AGpuTaskAsksForOneGresAndTheTenantsAccountWins) {
  SlurmConfig c;
  c.node_program = "/opt/akad/bin/akad-node";
  c.partition = "mi300";
  c.account = "bench";
  c.qos = "normal";
  c.gres = "gpu:h200";
  c.time_limit_min = 90;
  SlurmJobInput in;
  in.spec.attempt_id = 42;
  in.needs_gpu = true;
  in.account = "alice-lab";
  const auto cmd = sbatchCommand(c, in, "/shared/jobs/a42-x");
  EXPECT_EQ(cmd.front(), "sbatch");
  EXPECT_NE(std::find(cmd.begin(), cmd.end(), "--requeue"), cmd.end());
  EXPECT_TRUE(hasPair(cmd, "--gres", "gpu:h200:1"));
  EXPECT_TRUE(hasPair(cmd, "--partition", "mi300"));
  EXPECT_TRUE(hasPair(cmd, "--account", "alice-lab"));
  EXPECT_TRUE(hasPair(cmd, "--qos", "normal"));
  EXPECT_TRUE(hasPair(cmd, "--time", "90"));
  // Unique per submission (the folder's nonce), so a restarted front end can find the job by name.
  EXPECT_TRUE(hasPair(cmd, "--job-name", "akad-a42-x"));
  EXPECT_EQ(cmd.back(), "exec '/opt/akad/bin/akad-node' run --job '/shared/jobs/a42-x'");

  in.needs_gpu = false;
  in.account.clear();
  const auto cpu = sbatchCommand(c, in, "/shared/jobs/a42-x");
  EXPECT_EQ(std::find(cpu.begin(), cpu.end(), "--gres"), cpu.end()) << "a CPU task asked for a GPU";
  EXPECT_TRUE(hasPair(cpu, "--account", "bench"));
}

TEST(SlurmCommand, AJobAsksForTheMemoryOfTwoSandboxesAndTheWorkspace) {
  SlurmConfig c;
  SlurmJobInput in;
  in.spec.attempt_id = 7;
  in.memory_bytes = 2ull << 30;
  in.spec.workspace_bytes = 1ull << 30;
  const auto cmd = sbatchCommand(c, in, "/shared/jobs/a7-ab");
  // 2 x 2048 MiB (driver and worker at once) + 1024 MiB workspace tmpfs + 512 MiB for akad-node.
  EXPECT_TRUE(hasPair(cmd, "--mem", "5632M"));
}

// squeue's --Format output as Slurm 22.05 prints it (captured from the test cluster).
TEST(SlurmQueue, ParsesSqueueLinesAndRefusesGarbage) {
  auto q = parseQueue("2|PENDING||Priority|0|\n3|RUNNING|akadnode1|None|1|\n4|CANCELLED||None|0|\n");
  ASSERT_TRUE(q) << q.error().message;
  ASSERT_EQ(q->size(), 3u);
  EXPECT_EQ(q->at("2").state, "PENDING");
  EXPECT_EQ(q->at("2").reason, "Priority");
  EXPECT_EQ(q->at("3").node, "akadnode1");
  EXPECT_EQ(q->at("3").restarts, 1);
  EXPECT_TRUE(terminalState(q->at("4").state));
  EXPECT_FALSE(terminalState(q->at("3").state));
  EXPECT_TRUE(terminalState("")) << "a job Slurm no longer knows is over";
  EXPECT_FALSE(parseQueue("x|RUNNING|n|None|0|\n")) << "a job id that is not a number";
  EXPECT_FALSE(parseQueue("5|RUNNING|n\n")) << "too few fields";
  EXPECT_FALSE(parseQueue("5|RUNNING|n|None|many|\n")) << "a restart count that is not a number";
  auto empty = parseQueue("");
  ASSERT_TRUE(empty);
  EXPECT_TRUE(empty->empty());
  const auto cmd = squeueCommand({"5", "6"});
  EXPECT_NE(std::find(cmd.begin(), cmd.end(), "--jobs=5,6"), cmd.end());
  EXPECT_NE(std::find(cmd.begin(), cmd.end(), "--states=all"), cmd.end());
}

TEST(SlurmCommand, AQuoteInAPathCannotBreakOutOfTheWrappedCommand) {
  SlurmConfig c;
  c.node_program = "/opt/it's/akad-node";
  SlurmJobInput in;
  const auto cmd = sbatchCommand(c, in, "/shared/jobs/a1'; touch /tmp/x; '");
  EXPECT_EQ(cmd.back(), "exec '/opt/it'\\''s/akad-node' run --job '/shared/jobs/a1'\\''; touch /tmp/x; '\\'''");
}

TEST(SlurmSpec, RoundTripsAndRefusesMalformedSpecs) {
  AttemptJobSpec s;
  s.attempt_id = 7;
  s.run_id = "r-1";
  s.task_id = "cpu/softmax";
  s.task_hash = "abc123";
  s.agent = agentToJson(adHocAgent("true", 5));
  s.snapshot = std::string(64, 'a');
  s.candidate_uid = 700000001;
  auto back = specFromJson(toJson(s));
  ASSERT_TRUE(back) << back.error().message;
  EXPECT_EQ(back->attempt_id, 7);
  EXPECT_EQ(back->task_id, "cpu/softmax");
  EXPECT_EQ(*back->snapshot, std::string(64, 'a'));
  EXPECT_EQ(back->candidate_uid, 700000001u);
  auto agent = agentFromJson(back->agent);
  ASSERT_TRUE(agent) << agent.error().message;
  EXPECT_EQ(agent->command, adHocAgent("true", 5).command);

  nlohmann::json bad = toJson(s);
  bad["task_hash"] = "../../etc";
  EXPECT_FALSE(specFromJson(bad)) << "a task hash with a slash would leave the shared area's tasks folder";
  bad = toJson(s);
  bad.erase("agent");
  EXPECT_FALSE(specFromJson(bad));
  EXPECT_FALSE(specFromJson(nlohmann::json::array()));
  // The node cache: carried, absent in an older front end's spec (per job), never relative.
  s.node_cache = "/var/cache/akad-node";
  back = specFromJson(toJson(s));
  ASSERT_TRUE(back) << back.error().message;
  EXPECT_EQ(back->node_cache, "/var/cache/akad-node");
  bad = toJson(s);
  bad.erase("node_cache");
  ASSERT_TRUE(specFromJson(bad));
  EXPECT_TRUE(specFromJson(bad)->node_cache.empty());
  bad["node_cache"] = "cache";
  EXPECT_FALSE(specFromJson(bad)) << "a relative node cache would be relative to wherever the job runs";
  nlohmann::json noCommand = agentToJson(adHocAgent("true", 5));
  noCommand["command"] = nlohmann::json::array();
  EXPECT_FALSE(agentFromJson(noCommand));
}

TEST(SharedArea, DurableWritesReplaceWholeAndKeepTheirMode) {
  const fs::path dir = fs::temp_directory_path() / ("akad-shared-test-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  ASSERT_TRUE(writeFileDurably(dir / "result.json", "first\n"));
  ASSERT_TRUE(writeFileDurably(dir / "result.json", "second\n"));
  ASSERT_TRUE(writeFileDurably(dir / "credentials.json", "{}", 0600));
  std::ifstream in(dir / "result.json");
  std::string text((std::istreambuf_iterator<char>(in)), {});
  EXPECT_EQ(text, "second\n");
  struct stat st {};
  ASSERT_EQ(::stat((dir / "credentials.json").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  int entries = 0;
  for (const auto& e : fs::directory_iterator(dir)) {
    (void)e;
    ++entries;
  }
  EXPECT_EQ(entries, 2) << "a temporary file was left beside the written ones";
  // A tree is published whole, once.
  fs::create_directories(dir / "src" / "cpu" / "t");
  std::ofstream(dir / "src" / "cpu" / "t" / "task.yaml") << "id: t\n";
  ASSERT_TRUE(publishTree(dir / "src", dir / "tasks" / "h" / "def"));
  ASSERT_TRUE(publishTree(dir / "src", dir / "tasks" / "h" / "def"));  // already there: kept
  EXPECT_TRUE(fs::exists(dir / "tasks" / "h" / "def" / "cpu" / "t" / "task.yaml"));
  fs::remove_all(dir);
}

}  // namespace
