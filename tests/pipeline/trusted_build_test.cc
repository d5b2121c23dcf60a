// Trusted builds through the real akabox: one build per task version, however many scorings of
// the task start together, and builds of different tasks at the same time.
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <future>
#include <thread>

#include "daemon/pipeline/score.h"
#include "daemon/pipeline/task.h"
#include "tests/daemon/harness.h"

namespace fs = std::filesystem;

namespace akad {
namespace {

constexpr double kBuildSeconds = 1.5;
constexpr uid_t kSandboxUid = 101000;

class TrustedBuildTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() / ("akad-trusted-build-test-" + std::to_string(::getpid()));
    parent_ = "akad-test-trusted-" + std::to_string(::getpid());
    setDefaultCgroupParent(parent_);
    fs::remove_all(root_);
    fs::create_directories(root_ / "count");
    EXPECT_EQ(::chown((root_ / "count").c_str(), kSandboxUid, kSandboxUid), 0);
    fs::create_directories(root_ / "tasks" / "common");
    fs::copy(fs::path(AKAD_SOURCE_TASKS) / "common" / "cpp", root_ / "tasks" / "common" / "cpp",
             fs::copy_options::recursive);
    // A stand-in for the harness's `common` target (the real one compiles for 15 s): it leaves
    // one file in /count for every build that ran, and its object.
    setCommonTarget("\tmkdir -p build/obj && mktemp /count/common.XXXXXX && echo shared > build/obj/common.o\n");
    ::setenv("AKABOX", AKABOX_BIN, 1);
  }
  void TearDown() override {
    // Every sandbox's cgroup is gone; only the parent, made for them, is left to remove.
    for (const fs::path& c : test::cgroupsUnder(parent_)) ADD_FAILURE() << "cgroup left behind: " << c;
    for (const fs::path& p : test::cgroupParentDirs(parent_)) ::rmdir(p.c_str());
    fs::remove_all(root_);
  }

  void setCommonTarget(const std::string& recipe) {
    std::ofstream(root_ / "tasks" / "common" / "cpp" / "Makefile") << "common:\n" << recipe;
  }

  // A task whose build sleeps, then leaves one file in /count for every build that ran.
  Task makeTask(const std::string& id, const std::string& check = "true", bool shadow = false) {
    const fs::path dir = root_ / "tasks" / "cpu" / id;
    for (const char* sub : {"workspace", "harness", "solution"}) fs::create_directories(dir / sub);
    std::ofstream(dir / "workspace" / "kernel.cpp") << "// baseline\n";
    std::ofstream(dir / "solution" / "kernel.cpp") << "// faster\n";
    std::ofstream(dir / "task.yaml")
        << "schema: 1\nid: " << id << "\nsuite: cpu\ntitle: T\nprompt: p\nharness: cpp\neditable: [kernel.cpp]\n"
        << "build: {reference: ['" << check << " && sleep " << kBuildSeconds << " && mktemp /count/" << id
        << ".XXXXXX && touch reference driver'], candidate: ['touch runner']}\n"
        << "configs:\n  visible: [{name: v-8, n: 8}]\n  held_out: [{name: h-7, n: 7}]\n"
        << "tolerances: {f32: {atol: 1.0e-5, rtol: 1.0e-4}}\n";
    if (shadow) std::ofstream(dir / "harness" / "akt.h") << "// the task's own\n";
    auto t = loadTask(dir);
    EXPECT_TRUE(t) << t.error().message;
    return t ? *t : Task{};
  }
  ScoringEnvironment environment() const {
    ScoringEnvironment env;
    env.tasks_root = root_ / "tasks";
    env.trusted_cache = root_ / "state-tasks";
    env.image.binds.push_back({root_ / "count", "/count", true});
    env.sandbox_uid = env.sandbox_gid = kSandboxUid;  // akad's default: the build tree is chowned to it
    return env;
  }
  int buildsOf(const std::string& id) const {
    int n = 0;
    if (!fs::exists(root_ / "count")) return 0;
    for (const auto& e : fs::directory_iterator(root_ / "count"))
      if (e.path().filename().string().rfind(id + ".", 0) == 0) ++n;
    return n;
  }

  fs::path root_;
  std::string parent_;
};

TEST_F(TrustedBuildTest, DifferentTasksBuildAtOnceAndEachTaskBuildsOnce) {
  const Task a = makeTask("alpha"), b = makeTask("beta");
  const ScoringEnvironment env = environment();
  const auto t0 = std::chrono::steady_clock::now();
  // Two scorings of alpha and one of beta start together.
  std::vector<std::future<Result<TrustedBuild>>> builds;
  for (const Task* t : {&a, &a, &b})
    builds.push_back(std::async(std::launch::async, [t, &env] { return ensureTrustedBuild(*t, env); }));
  std::vector<fs::path> dirs;
  for (auto& f : builds) {
    auto r = f.get();
    ASSERT_TRUE(r) << r.error().message;
    dirs.push_back(r->dir);
  }
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(dirs[0], dirs[1]);
  EXPECT_NE(dirs[0], dirs[2]);
  for (const fs::path& d : dirs) EXPECT_TRUE(fs::exists(d / "reference")) << d;
  EXPECT_EQ(buildsOf("alpha"), 1) << "two scorings of one task version built it twice";
  EXPECT_EQ(buildsOf("beta"), 1);
  // One after the other would take two build times at least.
  EXPECT_LT(wall, 2 * kBuildSeconds - 0.2) << "the builds of alpha and beta did not overlap";
  EXPECT_GE(wall, kBuildSeconds);

  // A later scoring finds the build made.
  auto again = ensureTrustedBuild(a, env);
  ASSERT_TRUE(again) << again.error().message;
  EXPECT_EQ(again->dir, dirs[0]);
  EXPECT_EQ(buildsOf("alpha"), 1);
}

// Daemons that share a cache (akad --trusted-cache) are other processes: the build is locked
// across them too.
TEST_F(TrustedBuildTest, TwoProcessesSharingTheCacheBuildATaskOnce) {
  const Task a = makeTask("alpha");
  const ScoringEnvironment env = environment();
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    auto r = ensureTrustedBuild(a, env);
    ::_exit(r ? 0 : 1);
  }
  auto r = ensureTrustedBuild(a, env);
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "the other process's build failed";
  EXPECT_EQ(buildsOf("alpha"), 1) << "two processes built one task version twice";
  EXPECT_EQ(buildsOf("common"), 1);
}

// The harness's own objects are built once per harness version and reach every task's trusted
// build read-only as $AKA_COMMON; a new version of the harness builds them again.
TEST_F(TrustedBuildTest, TheHarnessesCommonObjectsAreBuiltOncePerHarnessVersionAndSharedReadOnly) {
  const std::string uses = R"(test "$AKA_COMMON" = /common && grep -q shared /common/build/obj/common.o && )"
                           R"(! touch /common/build/obj/written 2>/dev/null)";
  const Task a = makeTask("alpha", uses), b = makeTask("beta", uses);
  const ScoringEnvironment env = environment();
  auto fa = std::async(std::launch::async, [&] { return ensureTrustedBuild(a, env); });
  auto fb = std::async(std::launch::async, [&] { return ensureTrustedBuild(b, env); });
  auto ra = fa.get(), rb = fb.get();
  ASSERT_TRUE(ra) << ra.error().message;
  ASSERT_TRUE(rb) << rb.error().message;
  EXPECT_EQ(buildsOf("common"), 1) << "two tasks of one harness version built its objects twice";
  EXPECT_EQ(buildsOf("alpha"), 1);
  EXPECT_EQ(buildsOf("beta"), 1);
  auto common = ensureCommonHarnessBuild(a, env);
  ASSERT_TRUE(common) << common.error().message;
  EXPECT_EQ(ra->common, *common) << "the trusted build handed back other shared objects than it linked";
  EXPECT_EQ(rb->common, *common);
  EXPECT_TRUE(fs::exists(*common / "build" / "obj" / "common.o"));
  EXPECT_FALSE(fs::exists(*common / "build" / "obj" / "written"));

  // The harness changes: a new version of it, and of every task built with it.
  setCommonTarget("\tmkdir -p build/obj && mktemp /count/common.XXXXXX && echo shared v2 > build/obj/common.o\n");
  const Task c = makeTask("gamma", uses);
  auto rc = ensureTrustedBuild(c, env);
  ASSERT_TRUE(rc) << rc.error().message;
  EXPECT_EQ(buildsOf("common"), 2);
  auto common2 = ensureCommonHarnessBuild(c, env);
  ASSERT_TRUE(common2) << common2.error().message;
  EXPECT_NE(*common2, *common);
  EXPECT_EQ(rc->common, *common2);
}

// A scoring of a version built earlier gets the shared objects' path as well (its compile gate
// binds them), and a cache that lost them makes them again rather than binding nothing.
TEST_F(TrustedBuildTest, AVersionBuiltEarlierStillHandsBackTheSharedObjects) {
  const Task a = makeTask("alpha");
  const ScoringEnvironment env = environment();
  auto first = ensureTrustedBuild(a, env);
  ASSERT_TRUE(first) << first.error().message;
  ASSERT_FALSE(first->common.empty());
  auto again = ensureTrustedBuild(a, env);
  ASSERT_TRUE(again) << again.error().message;
  EXPECT_EQ(again->common, first->common);
  EXPECT_EQ(buildsOf("common"), 1);

  fs::remove_all(first->common);
  auto afterLoss = ensureTrustedBuild(a, env);
  ASSERT_TRUE(afterLoss) << afterLoss.error().message;
  EXPECT_EQ(afterLoss->common, first->common);
  EXPECT_TRUE(fs::exists(afterLoss->common / "build" / "obj" / "common.o"));
  EXPECT_EQ(buildsOf("common"), 2);
  EXPECT_EQ(buildsOf("alpha"), 1) << "the task version was built again";
}

// A task with a harness file of its own by a layer's name builds everything itself: the shared
// objects were made from the layer's file, not the task's.
TEST_F(TrustedBuildTest, ATaskThatShadowsAHarnessFileGetsNoSharedObjects) {
  const Task t = makeTask("own", R"(test -z "$AKA_COMMON" && test ! -e /common)", /*shadow=*/true);
  const ScoringEnvironment env = environment();
  auto r = ensureTrustedBuild(t, env);
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_TRUE(r->common.empty());
  EXPECT_EQ(buildsOf("common"), 0);
  auto common = ensureCommonHarnessBuild(t, env);
  ASSERT_TRUE(common) << common.error().message;
  EXPECT_TRUE(common->empty());
}

// A common build that fails fails the trusted build with its log, and leaves no tree behind.
TEST_F(TrustedBuildTest, AFailedCommonBuildFailsTheTrustedBuildAndSaysWhy) {
  setCommonTarget("\techo the harness does not compile here >&2 && false\n");
  const Task t = makeTask("alpha");
  const ScoringEnvironment env = environment();
  auto r = ensureTrustedBuild(t, env);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("common objects failed"), std::string::npos) << r.error().message;
  EXPECT_NE(r.error().message.find("the harness does not compile here"), std::string::npos) << r.error().message;
  EXPECT_EQ(buildsOf("alpha"), 0);
  for (const auto& e : fs::recursive_directory_iterator(env.trusted_cache))
    EXPECT_EQ(e.path().filename().string().find(".tmp-"), std::string::npos) << "left behind: " << e.path();
}

// A build that fails before its sandbox runs (here: the task's workspace cannot be copied)
// leaves no temporary tree, and one that a builder killed midway left is removed by the next
// build of the same version, which then succeeds.
TEST_F(TrustedBuildTest, NoHalfBuiltTreeIsLeftWhateverStepFailsOrWhoeverDied) {
  const Task t = makeTask("alpha");
  const ScoringEnvironment env = environment();
  const fs::path killed = env.trusted_cache / t.content_hash / "trusted.tmp-0123ab";
  fs::create_directories(killed / "build");
  std::ofstream(killed / "build" / "half.o") << "half\n";
  const auto leftovers = [&] {
    std::vector<std::string> out;
    for (const auto& e : fs::recursive_directory_iterator(env.trusted_cache))
      if (e.path().filename().string().find(".tmp-") != std::string::npos) out.push_back(e.path().string());
    return out;
  };

  const fs::path workspace = root_ / "tasks" / "cpu" / "alpha" / "workspace";
  fs::rename(workspace, root_ / "workspace-away");
  auto failed = ensureTrustedBuild(t, env);
  ASSERT_FALSE(failed) << "a task without its workspace was built";
  EXPECT_NE(failed.error().message.find("workspace"), std::string::npos) << failed.error().message;
  EXPECT_EQ(leftovers(), std::vector<std::string>{}) << "a temporary build tree outlived the failed build";

  fs::rename(root_ / "workspace-away", workspace);
  fs::create_directories(killed);
  auto built = ensureTrustedBuild(t, env);
  ASSERT_TRUE(built) << built.error().message;
  EXPECT_TRUE(fs::exists(built->dir / ".built"));
  EXPECT_EQ(leftovers(), std::vector<std::string>{});
  EXPECT_EQ(buildsOf("alpha"), 1);
}

}  // namespace
}  // namespace akad
