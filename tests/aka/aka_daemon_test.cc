// `akactl tasks import aka DIR` and `akactl tasks list` against the real akad on a temporary
// socket and state dir, with the fixture checkout (tests/aka/fixtures/checkout).

#include <gtest/gtest.h>

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <set>

#include <nlohmann/json.hpp>

#include "daemon/pipeline/files.h"
#include "tests/aka/aka_test_files.h"
#include "tests/daemon/harness.h"

namespace akad::test {
using namespace akad::akafixture;

namespace {

using nlohmann::json;

class AkaDaemonTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(copyTree(kFixture, checkout_).ok());
    // A commit for the record, written as git would.
    fs::create_directories(checkout_ / ".git/refs/heads");
    std::ofstream(checkout_ / ".git/HEAD") << "ref: refs/heads/main\n";
    std::ofstream(checkout_ / ".git/refs/heads/main") << kCommit << "\n";
    paths_ = {dir_ / "run/akad.sock", dir_ / "state", writeFakeTasks(dir_.path())};
    startDaemon({});
  }
  // Its sandboxes under a cgroup parent of the test's own.
  void startDaemon(const std::vector<std::string>& extra) {
    std::vector<std::string> args = {"--socket-group", "nogroup", "--cgroup-parent", parent_};
    args.insert(args.end(), extra.begin(), extra.end());
    auto d = DaemonProcess::start(paths_, args);
    ASSERT_TRUE(d) << d.error().message;
    daemon_ = std::move(*d);
  }
  // A daemon that stops takes its mount templates and its sandboxes' cgroups with it.
  void TearDown() override {
    if (daemon_) {
      pid_t pid = daemon_->pid();
      EXPECT_EQ(daemon_->stop(SIGTERM), 0) << daemon_->log();
      daemon_.reset();
      EXPECT_FALSE(processExists(pid)) << "akad " << pid << " outlived its test";
    }
    for (const std::string& m : mountsUnder(paths_.stateDir)) ADD_FAILURE() << "left mounted: " << m;
    for (const fs::path& c : cgroupsUnder(parent_)) ADD_FAILURE() << "cgroup left behind: " << c;
    for (const fs::path& p : cgroupParentDirs(parent_)) ::rmdir(p.c_str());
  }
  CommandResult ctl(const std::vector<std::string>& args) { return akactl(paths_.socket, args); }
  json ctlJson(const std::vector<std::string>& args) {
    std::vector<std::string> a{"--json"};
    a.insert(a.end(), args.begin(), args.end());
    auto r = ctl(a);
    EXPECT_EQ(r.exitCode, 0) << r.err;
    json j = json::parse(r.out, nullptr, false);
    EXPECT_FALSE(j.is_discarded()) << r.out;
    return j;
  }
  bool daemonAnswers() { return ctl({"status"}).exitCode == 0; }

  static constexpr const char* kCommit = "d6f7c8a4e1e2e3e4e5e6e7e8e9eaebecedeeef00";
  TempDir dir_;
  fs::path checkout_ = dir_ / "AgentKernelArena";
  DaemonProcess::Paths paths_;
  std::string parent_ = "akad-test-aka-" + std::to_string(::getpid());
  std::unique_ptr<DaemonProcess> daemon_;
};

TEST_F(AkaDaemonTest, ImportClassifiesEveryTaskAndListShowsThemWithReasons) {
  auto r = ctl({"tasks", "import", "aka", checkout_.string(), "--platform", "nvidia"});
  ASSERT_EQ(r.exitCode, 0) << r.err << r.out;
  EXPECT_NE(r.out.find(kCommit), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("triton2triton/vllm/triton_fp8_cast"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("float8_e4m3fnuz"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("compile_command: missing"), std::string::npos) << r.out;

  json list = ctlJson({"tasks", "list"});
  std::set<std::string> ids;
  for (const json& t : list.at("tasks")) ids.insert(t.at("id").get<std::string>());
  for (const char* id : {"aka-triton2triton-vllm/triton_plain_copy", "aka-triton2triton-vllm/triton_scale_rows",
                         "aka-hip2hip-gpumode/scaledrelu", "aka-torch2hip-gpumode/addbias",
                         "aka-triton2triton-rocmbench/easy-test_vec_add", "aka-triton2triton-rocmbench/hard-test_tuned_matmul"})
    EXPECT_TRUE(ids.count(id)) << id << " not listed: " << list.dump();
  EXPECT_FALSE(ids.count("aka-triton2triton-vllm/triton_fp8_cast"));
  EXPECT_TRUE(ids.count("cpu/softmax"));  // the daemon's own tasks are still there
  EXPECT_TRUE(list.at("errors").empty()) << list.dump();
  ASSERT_TRUE(list.at("aka").is_array());
  EXPECT_EQ(list.at("aka").size(), 10u);
  std::map<std::string, std::string> cls;
  for (const json& t : list.at("aka")) cls[t.at("name")] = t.at("class");
  EXPECT_EQ(cls["triton2triton/vllm/triton_plain_copy"], "unchanged");
  EXPECT_EQ(cls["hip2hip/gpumode/ScaledRelu"], "compat");
  EXPECT_EQ(cls["torch2hip/gpumode/ApplyUtilsNeg"], "needs-edit");
  EXPECT_EQ(cls["triton2triton/vllm/triton_fp8_cast"], "impossible");
  EXPECT_EQ(cls["triton2triton/vllm/triton_broken"], "invalid");

  auto human = ctl({"tasks", "list"});
  EXPECT_EQ(human.exitCode, 0) << human.err;
  EXPECT_NE(human.out.find("AgentKernelArena tasks"), std::string::npos) << human.out;
  EXPECT_NE(human.out.find("needs-edit"), std::string::npos) << human.out;
  EXPECT_NE(human.out.find("HIPApplyUtils.cuh"), std::string::npos) << human.out;
}

TEST_F(AkaDaemonTest, ImportJsonRecordsCommitAndFileHashesAndImportedTasksCanBeSubmitted) {
  json r = ctlJson({"tasks", "import", "aka", checkout_.string(), "--platform", "nvidia", "--select", "triton2triton/vllm"});
  EXPECT_EQ(r.at("commit"), kCommit);
  EXPECT_EQ(r.at("platform"), "nvidia");
  ASSERT_EQ(r.at("tasks").size(), 4u);
  for (const json& t : r.at("tasks")) EXPECT_GT(t.at("files_read").get<int>(), 0) << t.dump();
  // With AKA's held-out folder: the shapes are taken for the task that has a set that applies.
  json held = ctlJson({"tasks", "import", "aka", checkout_.string(), "--platform", "nvidia", "--select",
                       "triton2triton/vllm/triton_scale_rows", "--held-out", AKA_FIXTURE_HELD_OUT});
  ASSERT_EQ(held.at("tasks").size(), 1u);
  EXPECT_EQ(held.at("tasks")[0].at("held_out_injections"), 1);
  // The imported task goes through run.submit like any other: resolved by the catalog and loaded
  // (then queued where the daemon has an NVIDIA GPU, which its image drives; refused for want of
  // one where it has none, naming the vendor: daemon/gpu_eligibility.h).
  auto submitted = ctl({"--json", "submit", "aka-triton2triton-vllm/triton_plain_copy"});
  if (submitted.exitCode == 0)
    EXPECT_NE(submitted.out.find("aka-triton2triton-vllm/triton_plain_copy"), std::string::npos) << submitted.out;
  else
    EXPECT_NE(submitted.err.find("task aka-triton2triton-vllm/triton_plain_copy needs a GPU by nvidia and this daemon has none"),
              std::string::npos) << submitted.err;
  auto unknown = ctl({"submit", "aka-triton2triton-vllm/triton_fp8_cast"});
  EXPECT_EQ(unknown.exitCode, 1);
  EXPECT_NE(unknown.err.find("no tasks match"), std::string::npos) << unknown.err;
}

TEST_F(AkaDaemonTest, OnlyAnAdminMayImport) {
  // The test's directory must be passable for the other user to reach the socket.
  ASSERT_EQ(::chmod(dir_.path().c_str(), 0711), 0);
  auto r = runCommand({"/usr/bin/setpriv", "--reuid", "65534", "--regid", "65534", "--clear-groups", "--",
                       akactlBinary().string(), "--socket", paths_.socket.string(), "tasks", "import", "aka",
                       checkout_.string(), "--platform", "nvidia"});
  if (r.err.find("Permission denied") != std::string::npos && r.err.find("admin") == std::string::npos)
    GTEST_SKIP() << "uid 65534 cannot reach the socket here: " << r.err;
  EXPECT_EQ(r.exitCode, 1) << r.out << r.err;
  EXPECT_NE(r.err.find("only an admin may import tasks"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(paths_.stateDir / "aka" / "index.json"));
}

TEST_F(AkaDaemonTest, ValidationSideBySideAnswersEveryTaskOnceInTheUsualOrder) {
  ASSERT_EQ(daemon_->stop(SIGTERM), 0);  // validation needs an executor
  daemon_.reset();
  startDaemon({"--workers", "1"});
  ctlJson({"tasks", "import", "aka", checkout_.string(), "--platform", "nvidia", "--select", "triton2triton/vllm"});
  // Two imported tasks (validated side by side, on one GPU where there is one) and a native
  // task (alone, after them), asked in an order that mixes them.
  const std::vector<std::string> asked = {"aka-triton2triton-vllm/triton_scale_rows", "cpu/vecadd",
                                          "aka-triton2triton-vllm/triton_plain_copy"};
  std::vector<std::string> args = {"tasks", "validate", "--parallel", "3"};
  args.insert(args.end(), asked.begin(), asked.end());
  auto r = ctl([&] { std::vector<std::string> a{"--json"}; a.insert(a.end(), args.begin(), args.end()); return a; }());
  json j = json::parse(r.out, nullptr, false);
  ASSERT_TRUE(j.is_object() && j.contains("tasks")) << r.out << r.err;
  ASSERT_EQ(j.at("tasks").size(), asked.size()) << j.dump(2);
  // The order of a validation one task at a time: the selectors' resolution, by id.
  std::vector<std::string> usual = asked;
  std::sort(usual.begin(), usual.end());
  for (std::size_t i = 0; i < usual.size(); ++i) EXPECT_EQ(j["tasks"][i]["task"], usual[i]) << j.dump(2);
  EXPECT_NE(j["tasks"][2].dump().find("cpu/vecadd"), std::string::npos);
  // This host has no GPU: each imported task says so, in its own row; the daemon goes on.
  for (std::size_t i : {0u, 1u}) {
    EXPECT_FALSE(j["tasks"][i]["ok"].get<bool>());
    EXPECT_NE(j["tasks"][i]["problems"][0].get<std::string>().find("needs a GPU by nvidia"), std::string::npos) << j.dump(2);
  }
  auto zero = ctl({"tasks", "validate", "--parallel", "0", asked[0]});
  EXPECT_EQ(zero.exitCode, 2) << zero.err;
  EXPECT_TRUE(daemonAnswers());
}

TEST_F(AkaDaemonTest, BadRequestsAreRefusedAtTheBorderAndTheDaemonGoesOn) {
  auto source = ctl({"tasks", "import", "kernelbench", checkout_.string()});
  EXPECT_EQ(source.exitCode, 2) << source.err;
  auto missing = ctl({"tasks", "import", "aka", (dir_ / "nowhere").string()});
  EXPECT_EQ(missing.exitCode, 1);
  EXPECT_NE(missing.err.find("is not a directory"), std::string::npos) << missing.err;
  auto notAka = ctl({"tasks", "import", "aka", paths_.tasksDir.string()});
  EXPECT_EQ(notAka.exitCode, 1);
  EXPECT_NE(notAka.err.find("has no tasks/ folder"), std::string::npos) << notAka.err;
  auto selector = ctl({"tasks", "import", "aka", checkout_.string(), "--select", "triton2triton/nothing"});
  EXPECT_EQ(selector.exitCode, 1);
  EXPECT_NE(selector.err.find("'triton2triton/nothing' matches no task"), std::string::npos) << selector.err;
  auto climbing = ctl({"tasks", "import", "aka", checkout_.string(), "--select", "../etc"});
  EXPECT_EQ(climbing.exitCode, 1);
  EXPECT_NE(climbing.err.find("select"), std::string::npos) << climbing.err;
  auto heldOut = ctl({"tasks", "import", "aka", checkout_.string(), "--held-out", (dir_ / "no-held-out").string()});
  EXPECT_EQ(heldOut.exitCode, 1);
  EXPECT_NE(heldOut.err.find("is not a directory"), std::string::npos) << heldOut.err;
  auto platform = ctl({"tasks", "import", "aka", checkout_.string(), "--platform", "tpu"});
  EXPECT_EQ(platform.exitCode, 2);
  // This daemon's tasks have no convert harness (tasks/common/aka-convert): a --convert import
  // says so and imports nothing, not even the wrapped tasks.
  auto convert = ctl({"tasks", "import", "aka", checkout_.string(), "--platform", "nvidia", "--convert"});
  EXPECT_EQ(convert.exitCode, 1);
  EXPECT_NE(convert.err.find("no common harness layer"), std::string::npos) << convert.err;
  EXPECT_FALSE(fs::exists(paths_.stateDir / "aka/tasks/aka-hip2hip-gpumode"));
  EXPECT_TRUE(daemonAnswers());
}

}  // namespace
}  // namespace akad::test
