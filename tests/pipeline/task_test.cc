// Task files are refused at the border with the file, the field and what is wrong.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "daemon/pipeline/agent.h"
#include "daemon/pipeline/image.h"
#include "daemon/pipeline/prepare.h"
#include "daemon/pipeline/task.h"

#include <sys/wait.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <thread>

namespace fs = std::filesystem;

namespace akad {
namespace {

class TaskFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() / ("akad-task-test-" + std::to_string(::getpid()) + "-" +
                                         ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(root_);
    dir_ = root_ / "cpu" / "demo";
    for (const char* sub : {"workspace", "harness", "solution"}) fs::create_directories(dir_ / sub);
    std::ofstream(dir_ / "workspace" / "kernel.cpp") << "// baseline\n";
    std::ofstream(dir_ / "solution" / "kernel.cpp") << "// faster\n";
  }
  void TearDown() override { fs::remove_all(root_); }

  std::string valid() const {
    return "schema: 1\nid: demo\nsuite: cpu\ntitle: Demo\nprompt: make it fast\nharness: cpp\n"
           "editable: [kernel.cpp]\nbuild: {reference: [make reference], candidate: [make runner]}\n"
           "configs:\n  visible: [{name: v-8, n: 8}]\n  held_out: [{name: h-7, n: 7}]\n"
           "tolerances: {f32: {atol: 1.0e-5, rtol: 1.0e-4}}\n";
  }
  Result<Task> load(const std::string& yaml) {
    std::ofstream(dir_ / "task.yaml") << yaml;
    return loadTask(dir_);
  }
  // The error must name the file and the field.
  void expectRefused(const std::string& yaml, const std::string& field) {
    auto t = load(yaml);
    ASSERT_FALSE(t) << "accepted:\n" << yaml;
    EXPECT_NE(t.error().message.find((dir_ / "task.yaml").string()), std::string::npos) << t.error().message;
    EXPECT_NE(t.error().message.find(field), std::string::npos) << t.error().message;
  }

  fs::path root_, dir_;
};

TEST_F(TaskFileTest, ATaskYamlThatIsADirectoryIsRefusedNotACrash) {
  fs::create_directories(dir_ / "task.yaml");
  auto t = loadTask(dir_);
  ASSERT_FALSE(t);
  EXPECT_NE(t.error().message.find("not a regular file"), std::string::npos) << t.error().message;
}

// tasks.list and run.submit load every task they name: an unchanged task folder is hashed once,
// and any change to it, however soon, gives the new hash.
TEST_F(TaskFileTest, AnUnchangedTaskIsHashedOnceAndAnyChangeIsSeen) {
  std::ofstream(dir_ / "task.yaml") << valid();
  std::this_thread::sleep_for(std::chrono::milliseconds(2100));  // older than the cache's one-second guard
  auto first = loadTask(dir_);
  ASSERT_TRUE(first) << first.error().message;
  const std::uint64_t hashed = taskTreesHashed();
  auto again = loadTask(dir_);
  ASSERT_TRUE(again);
  EXPECT_EQ(again->content_hash, first->content_hash);
  EXPECT_EQ(taskTreesHashed(), hashed) << "an unchanged task was read again";
  // Same size, written at once: the change is seen.
  std::ofstream(dir_ / "workspace" / "kernel.cpp", std::ios::trunc) << "// BASELINE\n";
  auto changed = loadTask(dir_);
  ASSERT_TRUE(changed);
  EXPECT_NE(changed->content_hash, first->content_hash);
  std::ofstream(dir_ / "workspace" / "kernel.cpp", std::ios::trunc) << "// baseline\n";
  auto back = loadTask(dir_);
  ASSERT_TRUE(back);
  EXPECT_EQ(back->content_hash, first->content_hash);
}

TEST_F(TaskFileTest, ValidTaskLoadsWithTypedConfigsAndAContentHash) {
  auto t = load(valid());
  ASSERT_TRUE(t) << t.error().message;
  EXPECT_EQ(t->id, "cpu/demo");
  EXPECT_EQ(t->visible.at(0).at("n"), 8);  // numbers stay numbers for the harness
  EXPECT_EQ(t->held_out.at(0).at("name"), "h-7");
  EXPECT_DOUBLE_EQ(t->tolerances.at("f32").rtol, 1e-4);
  EXPECT_EQ(t->content_hash.size(), 64u);
}

TEST_F(TaskFileTest, ContentHashChangesWithAnyFileOfTheTask) {
  auto a = load(valid());
  ASSERT_TRUE(a);
  std::ofstream(dir_ / "harness" / "reference.cpp") << "// changed\n";
  auto b = loadTask(dir_);
  ASSERT_TRUE(b);
  EXPECT_NE(a->content_hash, b->content_hash);
  auto c = loadTask(dir_);
  EXPECT_EQ(b->content_hash, c->content_hash);
}

TEST_F(TaskFileTest, MalformedFilesAreRefusedNamingTheField) {
  expectRefused("id: [unclosed", "not valid YAML");
  expectRefused("- a list\n", "top level");
  std::string v = valid();
  auto without = [&](const std::string& key) {
    std::string out;
    std::istringstream in(v);
    std::string line;
    while (std::getline(in, line))
      if (line.rfind(key + ":", 0) != 0) out += line + "\n";
    return out;
  };
  expectRefused(without("title"), "title");
  expectRefused(without("editable"), "editable");
  expectRefused(without("tolerances"), "tolerances");
  expectRefused(without("build"), "build");
  expectRefused(v + "gpu: sometimes\n", "gpu");
  expectRefused(v + "timing: {samples: 2}\n", "timing.samples");
  expectRefused(v + "limits: {memory: lots}\n", "limits.memory");
  expectRefused(v + "limits: {compile_s: fast}\n", "limits.compile_s");
}

// timing.window picks how a GPU driver runs a timed window: a mode it does not know, or graph
// windows for a harness whose worker captures no graphs, is refused at load; what is accepted
// reaches the harness's configs.json.
TEST_F(TaskFileTest, AWindowModeMustBeOneTheHarnessCanTime) {
  expectRefused(valid() + "timing: {window: sideways}\n", "'timing.window' 'sideways' must be queued, synced or graph");
  expectRefused(valid() + "timing: {window: graph}\n", "graph windows need a harness whose driver captures CUDA graphs");
  auto synced = load(valid() + "timing: {window: synced}\n");
  ASSERT_TRUE(synced) << synced.error().message;
  EXPECT_EQ(synced->timing.window, "synced");
  EXPECT_EQ(synced->configsJson(false)["timing"]["window"], "synced");
  auto plain = load(valid());
  ASSERT_TRUE(plain);
  EXPECT_EQ(plain->timing.window, "queued");
  std::string python = valid() + "timing: {window: graph}\n";
  python.replace(python.find("harness: cpp"), 12, "harness: python");
  auto graph = load(python);
  ASSERT_TRUE(graph) << graph.error().message;
  EXPECT_EQ(graph->timing.window, "graph");
}

TEST_F(TaskFileTest, ConfigurationsNeedUniqueSafeNames) {
  std::string dup = valid();
  dup.replace(dup.find("h-7"), 3, "v-8");
  expectRefused(dup, "used twice");
  std::string unnamed = valid();
  unnamed.replace(unnamed.find("{name: h-7, n: 7}"), 17, "{n: 7}");
  expectRefused(unnamed, "configs.held_out[0].name");
  std::string nested = valid();
  nested.replace(nested.find("n: 8"), 4, "n: {a: 1}");
  expectRefused(nested, "configs.visible[0].n");
  std::string slash = valid();
  slash.replace(slash.find("v-8"), 3, "../x");
  expectRefused(slash, "configs.visible[0].name");
}

TEST_F(TaskFileTest, EditableFilesMustBeInsideTheWorkspaceAndExist) {
  std::string v = valid();
  std::string outside = v;
  outside.replace(outside.find("[kernel.cpp]"), 12, "[../harness/reference.cpp]");
  expectRefused(outside, "editable");
  std::string absent = v;
  absent.replace(absent.find("[kernel.cpp]"), 12, "[missing.cpp]");
  expectRefused(absent, "does not exist");
}

TEST_F(TaskFileTest, IdAndSuiteMustMatchTheFolders) {
  std::string v = valid();
  std::string id = v;
  id.replace(id.find("id: demo"), 8, "id: other");
  expectRefused(id, "folder name");
  std::string suite = v;
  suite.replace(suite.find("suite: cpu"), 10, "suite: gpu");
  expectRefused(suite, "suite folder");
}

TEST_F(TaskFileTest, MissingFoldersAreNamed) {
  fs::remove_all(dir_ / "solution");
  expectRefused(valid(), "solution");
}

TEST_F(TaskFileTest, MemoryLimitIsASize) {
  auto t = load(valid() + "limits: {memory: 512M}\n");
  ASSERT_TRUE(t) << t.error().message;
  EXPECT_EQ(t->limits.memory_bytes, 512ull << 20);
  t = load(valid() + "limits: {memory: 4G}\n");
  ASSERT_TRUE(t) << t.error().message;
  EXPECT_EQ(t->limits.memory_bytes, 4ull << 30);
  t = load(valid() + "limits: {memory: 1048576}\n");
  ASSERT_TRUE(t) << t.error().message;
  EXPECT_EQ(t->limits.memory_bytes, 1ull << 20);
  expectRefused(valid() + "limits: {memory: 4X}\n", "limits.memory");
  expectRefused(valid() + "limits: {memory: 99999999999T}\n", "too large");
}

// Task files used to take any key and ignore the misspelt ones; now every unknown key is named
// with its path, and all problems come at once.
TEST_F(TaskFileTest, UnknownKeysAreRefusedWithTheirPath) {
  expectRefused(valid() + "gpus: true\n", "unknown field 'gpus'");
  expectRefused(valid() + "timing: {sampels: 40}\n", "'timing' has an unknown field 'sampels'");
  expectRefused(valid() + "limits: {agent: 60}\n", "'limits' has an unknown field 'agent'");
  std::string build = valid();
  build.replace(build.find("candidate:"), 10, "candidat:");
  expectRefused(build, "'build' has an unknown field 'candidat'");
}

TEST_F(TaskFileTest, AkataskRefusesWhatTheDaemonRefuses) {
  (void)load(valid() + "gpu: yes\ncolour: red\n");  // writes the file; the daemon's refusal is tested above
  const std::string cmd = std::string(AKATASK_BIN) + " configs " + dir_.string() + " 2>&1";
  FILE* p = ::popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::string out;
  char buf[4096];
  for (size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
  EXPECT_EQ(WEXITSTATUS(::pclose(p)), 1) << out;
  EXPECT_NE(out.find("'gpu' must be true or false, not 'yes'"), std::string::npos) << out;
  EXPECT_NE(out.find("unknown field 'colour'"), std::string::npos) << out;
}

TEST_F(TaskFileTest, EveryProblemOfAFileIsReportedAtOnce) {
  auto t = load(valid() + "gpu: yes\ntiming: {samples: 2, rounds: many}\nlimits: {memory: lots}\ncolour: red\n");
  ASSERT_FALSE(t);
  const std::string& m = t.error().message;
  for (const char* needle : {"'gpu' must be true or false, not 'yes'", "'timing.samples' must be between 5 and 100000",
                             "'timing.rounds' must be a number", "'limits.memory' must be a size", "unknown field 'colour'"})
    EXPECT_NE(m.find(needle), std::string::npos) << needle << " not in:\n" << m;
  EXPECT_EQ(std::count(m.begin(), m.end(), '\n'), 4) << m;
}

// akatask (tasks/tools, for the validate-local scripts) reads a task with the daemon's own
// reader (task_file.cc on yamlToJson): every scalar comes out the same, and what it prints for
// --visible is the configs.json the agent gets (Task::configsJson, written by prepare.cc).
TEST_F(TaskFileTest, AkataskAndTheDaemonReadEveryScalarAlike) {
  std::string v = valid() + "timing: {rounds: 2}\n";
  v.replace(v.find("{name: v-8, n: 8}"), 17,
            "{name: v-8, n: 8, neg: -3, plus: +5, f: 1.5, half: .5, e: 1e-5, q: \"7\", t: true, cap: True, "
            "y: yes, hex: 0x10, inf: .inf, big: 99999999999999999999, s: 512M}");
  auto t = load(v);
  ASSERT_TRUE(t) << t.error().message;
  const std::string cmd = std::string(AKATASK_BIN) + " configs " + dir_.string() + " --visible";
  FILE* p = ::popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::string out;
  char buf[4096];
  for (size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
  ASSERT_EQ(::pclose(p), 0) << out;
  const nlohmann::json printed = nlohmann::json::parse(out);
  ASSERT_EQ(printed["configs"].size(), 1u) << out;
  EXPECT_EQ(printed["configs"][0], t->visible.at(0));
  EXPECT_EQ(printed, t->configsJson(/*withHeldOut=*/false));
  EXPECT_EQ(printed["timing"]["rounds"], 2);
  // And what that reading is (common/yaml_json.h).
  const nlohmann::json& c = t->visible.at(0);
  EXPECT_EQ(c["plus"], 5);
  EXPECT_EQ(c["q"], "7");
  EXPECT_EQ(c["t"], true);
  EXPECT_EQ(c["cap"], "True");
  EXPECT_EQ(c["y"], "yes");
  EXPECT_EQ(c["hex"], "0x10");
  EXPECT_EQ(c["inf"], ".inf");
  EXPECT_EQ(c["big"], 1e20);
  EXPECT_EQ(c["s"], "512M");
}

// Agent files are refused at the border too; every shipped one loads, and the network field's
// rules hold.
TEST(RepositoryAgents, EveryShippedAgentLoadsAndTheCliTemplatesReachOnlyTheirApis) {
  const fs::path dir = fs::path(AKAD_SOURCE_TASKS).parent_path() / "images" / "agents";
  int n = 0;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.path().extension() != ".yaml") continue;
    auto a = loadAgent(e.path());
    EXPECT_TRUE(a) << e.path() << ": " << (a ? "" : a.error().message);
    ++n;
  }
  EXPECT_GE(n, 6);
  auto claude = loadAgent(dir / "claude-code.yaml");
  ASSERT_TRUE(claude);
  EXPECT_TRUE(claude->network_allow);
  EXPECT_EQ(claude->allow, std::vector<std::string>{"api.anthropic.com:443"});
  // Both real CLIs come from the agent-cli image and take their key and endpoint by --pass-env.
  auto codex = loadAgent(dir / "codex.yaml");
  ASSERT_TRUE(codex);
  EXPECT_EQ(codex->allow, std::vector<std::string>{"api.openai.com:443"});
  EXPECT_EQ(claude->image, "agent-cli");
  EXPECT_EQ(codex->image, "agent-cli");
  EXPECT_EQ(claude->credentials, (std::vector<std::string>{"ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL"}));
  EXPECT_EQ(codex->credentials, (std::vector<std::string>{"OPENAI_API_KEY", "OPENAI_BASE_URL"}));
}

TEST_F(TaskFileTest, AnAgentsImageIsLaidOverTheTasksForItsSandboxOnly) {
  std::ofstream(root_ / "bad.yaml") << "name: bad\ncommand: [\"true\"]\nimage: \"../host\"\n";
  auto bad = loadAgent(root_ / "bad.yaml");
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message.find("image"), std::string::npos) << bad.error().message;

  const fs::path images = root_ / "images";
  fs::create_directories(images / "base");
  fs::create_directories(images / "tools" / "prefix");
  std::ofstream(images / "base" / "image.yaml") << "name: base\ndescription: a task's toolchain\nrequires_gpu_vendor: nvidia\n"
                                                   "path_prepend: [/b/bin]\nlibrary_path_prepend: [/b/lib]\n"
                                                   "env: {SHARED: base, BASE_ONLY: \"1\"}\n";
  std::ofstream(images / "tools" / "image.yaml") << "name: tools\ndescription: an agent's own program\n"
                                                    "binds: [{src: \"${image_dir}/prefix\", dst: /akad/images/tools}]\n"
                                                    "path_prepend: [/akad/images/tools/bin]\nenv: {SHARED: tools}\n";
  auto base = loadImageProfile(images, "base");
  ASSERT_TRUE(base) << base.error().message;
  ImageProfile agent = *base;
  ASSERT_TRUE(layerImageProfile(agent, images, "tools"));
  EXPECT_EQ(agent.name, "base");
  EXPECT_EQ(agent.requires_gpu_vendor, "nvidia") << "the task's toolchain still picks the GPU";
  EXPECT_EQ(agent.env.at("PATH"), "/akad/images/tools/bin:/b/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin");
  EXPECT_EQ(agent.env.at("LD_LIBRARY_PATH"), "/b/lib");
  EXPECT_EQ(agent.env.at("SHARED"), "tools");
  EXPECT_EQ(agent.env.at("BASE_ONLY"), "1");
  ASSERT_EQ(agent.binds.size(), base->binds.size() + 1);
  EXPECT_EQ(agent.binds.back().target, "/akad/images/tools");
  EXPECT_EQ(base->env.at("PATH"), "/b/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin");

  // Not installed: the attempt is refused with the image and the missing path named.
  fs::remove(images / "tools" / "prefix");
  ImageProfile again = *base;
  auto st = layerImageProfile(again, images, "tools");
  ASSERT_FALSE(st);
  EXPECT_NE(st.error().message.find("image tools: " + (images / "tools" / "prefix").string() + " does not exist"),
            std::string::npos)
      << st.error().message;
}

TEST_F(TaskFileTest, AgentFilesRefuseUnknownKeysAndBadBooleansAllAtOnce) {
  std::ofstream(root_ / "x.yaml") << "name: x\ncommand: [\"true\"]\nmount_solutions: true\ntemplate: yes\ntime_limit_s: soon\n";
  auto a = loadAgent(root_ / "x.yaml");
  ASSERT_FALSE(a);
  const std::string& m = a.error().message;
  for (const char* needle : {"x.yaml: unknown field 'mount_solutions'", "x.yaml: 'template' must be true or false, not 'yes'",
                             "x.yaml: 'time_limit_s' must be a number"})
    EXPECT_NE(m.find(needle), std::string::npos) << needle << " not in:\n" << m;
}

TEST_F(TaskFileTest, AgentNetworkEntriesAreCheckedAtTheBorder) {
  auto write = [&](const std::string& body) {
    std::ofstream(root_ / "x.yaml") << "name: x\ncommand: [\"true\"]\n" << body;
    return loadAgent(root_ / "x.yaml");
  };
  EXPECT_TRUE(write("network: allow\nallow: [\"example.com:443\", \"10.0.0.5:8080 private\"]\n"));
  for (const char* bad : {"network: allow\n", "network: allow\nallow: [\"example.com\"]\n",
                          "network: none\nallow: [\"example.com:443\"]\n", "network: wide\n",
                          "network: allow\nallow: \"example.com:443\"\n"}) {
    auto a = write(bad);
    EXPECT_FALSE(a) << bad;
    if (!a) {
      EXPECT_NE(a.error().message.find("x.yaml"), std::string::npos) << a.error().message;
    }
  }
}

TEST(AgentNetwork, ARunMayNarrowAnAgentsNetworkNeverWidenIt) {
  AgentDefinition a;
  a.name = "x";
  a.network_allow = true;
  a.allow = {"api.example.com:443", "mirror.example.com:443"};
  AgentDefinition narrowed = a;
  ASSERT_TRUE(applyRunNetwork(narrowed, {{"allow", {"api.example.com:443"}}}));
  EXPECT_EQ(narrowed.allow, std::vector<std::string>{"api.example.com:443"});
  EXPECT_FALSE(applyRunNetwork(narrowed = a, {{"allow", {"evil.example.com:443"}}}));
  EXPECT_FALSE(applyRunNetwork(narrowed = a, {{"network", "host"}}));
  ASSERT_TRUE(applyRunNetwork(narrowed = a, {{"network", "none"}}));
  EXPECT_EQ(networkLevel(narrowed), NetworkLevel::None);
  EXPECT_TRUE(narrowed.allow.empty());
  ASSERT_TRUE(applyRunNetwork(narrowed = a, nlohmann::json::object()));
  EXPECT_EQ(networkLevel(narrowed), NetworkLevel::Allow);
  // Caps: host over an allow cap has no list to fall back to, so it gets none.
  AgentDefinition host = a;
  host.network_allow = false;
  host.network_host = true;
  host.allow.clear();
  EXPECT_TRUE(capNetwork(host, NetworkLevel::Allow));
  EXPECT_EQ(networkLevel(host), NetworkLevel::None);
  EXPECT_FALSE(capNetwork(narrowed = a, NetworkLevel::Host));
  EXPECT_EQ(networkLevel(narrowed), NetworkLevel::Allow);
}

TEST(RepositoryTasks, EveryShippedTaskLoads) {
  auto scan = scanTasks(AKAD_SOURCE_TASKS);
  EXPECT_TRUE(scan.errors.empty()) << scan.errors.front();
  EXPECT_GE(scan.tasks.size(), 8u);
}

}  // namespace
}  // namespace akad

namespace akad {
namespace {

// `make bench` in a workspace times "like the scorer": the plan the harness's own reference
// writes from configs.json carries the task's timing.window, as the scorer's plan does, for
// the cpp harness (also the hip one's reference) and the python one.
TEST(RepositoryTasks, AWorkspacesOwnBenchPlanTimesInTheTasksWindow) {
  const fs::path dir = fs::temp_directory_path() / ("akad-bench-plan-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  struct Remove {
    fs::path p;
    ~Remove() { fs::remove_all(p); }
  } removeAtEnd{dir};  // also when an assertion ends the test early
  struct Case {
    const char* task;
    const char* window;
    const char* writer;  // the command that writes the plan, run in the workspace
  };
  const Case cases[] = {
      {"cpu/prefix_sum", "synced", "make -s -f harness/Makefile reference >build.log 2>&1 && ./reference"},
      {"triton2triton/softmax", "graph", "python3 harness/reference_main.py"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.task);
    auto task = loadTask(fs::path(AKAD_SOURCE_TASKS) / c.task);
    ASSERT_TRUE(task) << task.error().message;
    const fs::path ws = dir / fs::path(c.task).filename();
    ASSERT_TRUE(assemblePristineWorkspace(*task, AKAD_SOURCE_TASKS, ws));
    nlohmann::json configs = task->configsJson(/*withHeldOut=*/false);
    ASSERT_FALSE(configs["timing"].value("window", "").empty()) << "written for every task";
    for (const char* mode : {"queued", c.window}) {
      configs["timing"]["window"] = mode;
      std::ofstream(ws / "configs.json") << configs.dump(1);
      const std::string cmd = "cd " + ws.string() + " && " + c.writer + " plan --configs configs.json --out plan.json";
      ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
      std::ifstream in(ws / "plan.json");
      const nlohmann::json plan = nlohmann::json::parse(in);
      EXPECT_EQ(plan.at("perf").value("window", ""), mode);
    }
  }
}

// The hip harness builds on the cpp one (tasks/common/hip/BASE): the scorer's assembly of a
// hip2hip task must be complete, and with nvcc present (CUDA 13 here) it must compile with
// the cuda-hip image's hipcc as the scorer compiles it: the common objects shared, then the
// trusted build, then a candidate's kernel alone.
TEST(RepositoryTasks, HipTaskAssembledByTheScorerCompilesWithCudaHip) {
  auto task = loadTask(fs::path(AKAD_SOURCE_TASKS) / "hip2hip" / "gelu");
  ASSERT_TRUE(task) << task.error().message;
  const fs::path dir = fs::temp_directory_path() / ("akad-hip-assembly-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  ASSERT_TRUE(assemblePristineWorkspace(*task, AKAD_SOURCE_TASKS, dir));
  for (const char* f : {"akt.h", "akaplan.h", "reference_main.cpp", "akadevice.h", "runner_main.hip", "akacheck.cpp"})
    EXPECT_TRUE(fs::exists(dir / "harness" / f)) << f;
  EXPECT_FALSE(fs::exists(dir / "harness" / "BASE"));
  std::ifstream mk(dir / "harness" / "Makefile");
  std::string first;
  std::getline(mk, first);
  EXPECT_EQ(first.find("cpp harness"), std::string::npos) << "the hip Makefile must win over the cpp one";
  if (!fs::exists("/usr/local/cuda/bin/nvcc")) {
    fs::remove_all(dir);
    GTEST_SKIP() << "no nvcc at /usr/local/cuda/bin: the cuda-hip image cannot compile here";
  }
  // As the scorer builds it: the harness's common objects once (from the layers alone), then the
  // task's trusted build linking them, then a candidate's compile linking both.
  const fs::path common = dir.string() + "-common";
  fs::remove_all(common);
  ASSERT_TRUE(assembleHarnessLayers(AKAD_SOURCE_TASKS, task->harness, /*own=*/{}, common / "harness"));
  const std::string env = "PATH=" + std::string(AKAD_SOURCE_TASKS) + "/../images/cuda-hip/bin:/usr/local/cuda/bin:$PATH ";
  const auto build = [&](const fs::path& where, const std::string& vars, const std::string& targets) {
    const std::string cmd = "cd " + where.string() + " && " + env + vars + " make -s -f harness/Makefile " + targets + " > build.log 2>&1";
    const int rc = std::system(cmd.c_str());
    std::ifstream log(where / "build.log");
    std::stringstream ss;
    ss << log.rdbuf();
    EXPECT_EQ(rc, 0) << targets << ":\n" << ss.str();
  };
  build(common, "", "common");
  build(dir, "AKA_COMMON=" + common.string(), "reference runner");
  EXPECT_TRUE(fs::exists(dir / "runner"));
  EXPECT_TRUE(fs::exists(dir / "reference"));
  EXPECT_TRUE(fs::exists(dir / "driver"));
  for (const char* shared : {"driver_main.o", "runner_main.o", "reference_main.o"}) {
    EXPECT_TRUE(fs::exists(common / "build" / "obj" / shared)) << shared;
    EXPECT_FALSE(fs::exists(dir / "build" / "obj" / shared)) << shared << " must come from the common build";
  }
  const fs::path candidate = dir.string() + "-candidate";
  fs::remove_all(candidate);
  fs::create_directories(candidate);
  fs::copy(dir / "harness", candidate / "harness");
  fs::copy(dir / "kernel.hip", candidate / "kernel.hip");
  build(candidate, "AKA_COMMON=" + common.string() + " AKA_TRUSTED=" + dir.string(), "runner");
  EXPECT_TRUE(fs::exists(candidate / "runner"));
  EXPECT_FALSE(fs::exists(candidate / "build" / "obj" / "invoke.o")) << "invoke.o must come from the trusted build";
  fs::remove_all(common);
  fs::remove_all(candidate);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace akad
