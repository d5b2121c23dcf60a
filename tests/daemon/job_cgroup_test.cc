// akad-node's nesting of its sandboxes under the job's cgroup (daemon/slurm/job_cgroup.h), on the
// host's real cgroup v2 hierarchy. A cgroup the test makes stands in for the cgroup Slurm's
// cgroup/v2 plugin gives a job ("StandInJobCgroup" in the names).
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/wait.h>
#include <linux/magic.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <string>

#include "daemon/slurm/job_cgroup.h"
#include "harness.h"

namespace akad {
namespace {

std::string cgroup2Root() {
  struct statfs f {};
  if (::statfs("/sys/fs/cgroup", &f) == 0 && f.f_type == CGROUP2_SUPER_MAGIC) return "/sys/fs/cgroup";
  if (::statfs("/sys/fs/cgroup/unified", &f) == 0 && f.f_type == CGROUP2_SUPER_MAGIC) return "/sys/fs/cgroup/unified";
  return "";
}

std::string slurp(const std::string& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(JobCgroup, TheOwnCgroupIsReadFromTheV2Line) {
  test::TempDir dir;
  std::ofstream(dir / "hybrid") << "4:memory:/x\n1:cpu:/\n0::/system.slice/slurmstepd.scope/job_7/step_batch/user/task_0\n";
  auto own = slurm::ownCgroupV2((dir / "hybrid").string());
  ASSERT_TRUE(own) << own.error().message;
  EXPECT_EQ(*own, "/system.slice/slurmstepd.scope/job_7/step_batch/user/task_0");
  std::ofstream(dir / "v1") << "4:memory:/x\n";
  EXPECT_FALSE(slurm::ownCgroupV2((dir / "v1").string()));
}

TEST(JobCgroup, TheRootIsNotAJobCgroup) {
  EXPECT_FALSE(slurm::nestUnderJobCgroup("/sys/fs/cgroup", "/"));
  EXPECT_FALSE(slurm::nestUnderJobCgroup("/sys/fs/cgroup", "/a/../b"));
}

// The job's process moves into <job>/akad-node, leaving the job's cgroup without processes (the
// condition for handing controllers to the sandboxes); at the end it is back and the cgroups
// akad-node made are gone. Where the v2 hierarchy has the memory controller (a pure v2 host),
// the job's cgroup then hands it to its children, which it could not with a process in it.
TEST(JobCgroup, AProcessInAStandInJobCgroupNestsAndLeavesNothing) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root";
  const std::string root = cgroup2Root();
  if (root.empty()) GTEST_SKIP() << "no cgroup v2 hierarchy on this host";
  const std::string job = "akad-test-jobcg-" + std::to_string(::getpid());
  const std::string jobDir = root + "/" + job;
  ASSERT_EQ(::mkdir(jobDir.c_str(), 0755), 0) << strerror(errno);
  const bool memory = slurp(root + "/cgroup.controllers").find("memory") != std::string::npos &&
                      slurp(root + "/cgroup.subtree_control").find("memory") != std::string::npos;
  int pipefd[2];
  ASSERT_EQ(::pipe(pipefd), 0);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::close(pipefd[0]);
    auto fail = [&](const std::string& why) {
      (void)!::write(pipefd[1], why.data(), why.size());
      ::_exit(1);
    };
    { std::ofstream(jobDir + "/cgroup.procs") << ::getpid(); }
    auto n = slurm::nestUnderJobCgroup(root, job);
    if (!n) fail("nest: " + n.error().message);
    if (n->sandbox_parent != job + "/sandboxes") fail("sandbox parent " + n->sandbox_parent);
    auto own = slurm::ownCgroupV2();
    if (!own || *own != "/" + job + "/akad-node") fail("after nesting this process is in " + (own ? *own : own.error().message));
    if (!slurp(jobDir + "/cgroup.procs").empty()) fail("the job's cgroup still has processes");
    if (memory) {
      std::ofstream ctl(jobDir + "/cgroup.subtree_control");
      ctl << "+memory";
      ctl.flush();
      if (!ctl) fail("the job's cgroup cannot hand memory to its children");
      if (::mkdir((jobDir + "/sandboxes").c_str(), 0755) != 0) fail("mkdir sandboxes");
    }
    if (auto st = slurm::leaveJobCgroup(*n); !st) fail("leave: " + st.error().message);
    own = slurm::ownCgroupV2();
    if (!own || *own != "/" + job) fail("after leaving this process is in " + (own ? *own : own.error().message));
    ::_exit(0);
  }
  ::close(pipefd[1]);
  std::string why;
  char buf[512];
  for (ssize_t r; (r = ::read(pipefd[0], buf, sizeof buf)) > 0;) why.append(buf, static_cast<size_t>(r));
  ::close(pipefd[0]);
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << why;
  struct stat st {};
  EXPECT_NE(::stat((jobDir + "/akad-node").c_str(), &st), 0) << "akad-node's cgroup was left";
  EXPECT_NE(::stat((jobDir + "/sandboxes").c_str(), &st), 0) << "the sandboxes' cgroup was left";
  EXPECT_EQ(::rmdir(jobDir.c_str()), 0) << strerror(errno);
  if (!memory) std::cout << "[ note ] no memory controller in " << root << ": the hand-over was not tried here\n";
}

}  // namespace
}  // namespace akad
