// The cgroup back-ends and the device cgroup, exercised directly on the live hierarchies, and
// `akabox cleanup`. The active back-end is detected; back-end specific checks skip with a
// message on the other one.

#include <fcntl.h>
#include <linux/magic.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "box_fixture.h"
#include "sandbox/cgroup.h"
#include "sandbox/devices.h"

namespace akabox_test {
namespace {

using namespace akad::box;

// Forks a child that joins `cg` the way a sandbox init does and tries to open two devices.
// Returns (errno of /dev/null, errno of /dev/zero); 0 means the open worked.
std::pair<int, int> openDevicesInside(SandboxCgroup& cg, const std::string& v2ProcsFile = "") {
  int pipefd[2];
  EXPECT_EQ(::pipe(pipefd), 0);
  pid_t pid = ::fork();
  if (pid == 0) {
    std::vector<std::string> files = cg.selfJoinFiles();
    if (!v2ProcsFile.empty()) files.push_back(v2ProcsFile);
    for (const auto& f : files) {
      int fd = ::open(f.c_str(), O_WRONLY);
      if (fd < 0 || ::write(fd, "0", 1) != 1) ::_exit(3);
      ::close(fd);
    }
    int res[2];
    int a = ::open("/dev/null", O_RDWR);
    res[0] = a >= 0 ? 0 : errno;
    int b = ::open("/dev/zero", O_RDWR);
    res[1] = b >= 0 ? 0 : errno;
    (void)!::write(pipefd[1], res, sizeof(res));
    ::_exit(0);
  }
  ::close(pipefd[1]);
  int res[2] = {-1, -1};
  EXPECT_EQ(::read(pipefd[0], res, sizeof(res)), static_cast<ssize_t>(sizeof(res)));
  ::close(pipefd[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "the child could not join the cgroup";
  return {res[0], res[1]};
}

TEST_F(BoxTest, DeviceCgroupDeniesUnlistedDevices_ActiveBackend) {
  auto v = detectCgroupVersion(CgroupBackendChoice::Auto);
  ASSERT_TRUE(v.ok()) << v.error().message;
  CgroupLimits limits;
  limits.allowedDevices = {{'c', 1, 3}};  // /dev/null only
  auto cg = createSandboxCgroup(*v, parent_, limits);
  ASSERT_TRUE(cg.ok()) << cg.error().message;
  std::string procs = *v == CgroupVersion::V2 ? (*cg)->path() + "/cgroup.procs" : "";
  auto [nullErr, zeroErr] = openDevicesInside(**cg, procs);
  EXPECT_EQ(nullErr, 0);
  EXPECT_EQ(zeroErr, EPERM) << "an unlisted device opened inside the device cgroup (" << cgroupVersionName(*v) << ")";
  EXPECT_TRUE((*cg)->remove().ok());
}

// The v2 device program works on any cgroup2 hierarchy, even one without controllers, so it
// is tested here on the dev machine's hybrid /sys/fs/cgroup/unified too.
TEST_F(BoxTest, DeviceBpfProgramDeniesUnlistedDevices_CgroupV2) {
  std::string root;
  for (const auto& m : cgroupfs::mounts())
    if (m.type == "cgroup2") root = m.path;
  if (root.empty()) GTEST_SKIP() << "no cgroup2 hierarchy mounted";
  std::string parentDir = root + "/" + parent_;
  std::string dir = parentDir + "/bpf-test";
  ASSERT_EQ(::mkdir(parentDir.c_str(), 0755), 0);
  ASSERT_EQ(::mkdir(dir.c_str(), 0755), 0);
  auto prog = loadDeviceProgram({{'c', 1, 3}, {'c', 136, -1}});
  ASSERT_TRUE(prog.ok()) << prog.error().message;
  int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY);
  ASSERT_GE(dfd, 0);
  ASSERT_TRUE(attachDeviceProgram(dfd, prog->get(), dir).ok());
  ::close(dfd);
  int pipefd[2];
  ASSERT_EQ(::pipe(pipefd), 0);
  pid_t pid = ::fork();
  if (pid == 0) {
    int fd = ::open((dir + "/cgroup.procs").c_str(), O_WRONLY);
    if (fd < 0 || ::write(fd, "0", 1) != 1) ::_exit(3);
    int res[2];
    res[0] = ::open("/dev/null", O_RDWR) >= 0 ? 0 : errno;
    res[1] = ::open("/dev/zero", O_RDWR) >= 0 ? 0 : errno;
    (void)!::write(pipefd[1], res, sizeof(res));
    ::_exit(0);
  }
  ::close(pipefd[1]);
  int res[2] = {-1, -1};
  ASSERT_EQ(::read(pipefd[0], res, sizeof(res)), static_cast<ssize_t>(sizeof(res)));
  int status;
  ::waitpid(pid, &status, 0);
  EXPECT_EQ(res[0], 0);
  EXPECT_EQ(res[1], EPERM);
  EXPECT_EQ(::rmdir(dir.c_str()), 0);
  ::rmdir(parentDir.c_str());
}

// A sandbox cgroup of the active back-end with a `sleep 300` inside that ignores SIGTERM.
void cgroupWithStubbornSleeper(const std::string& parent, std::unique_ptr<SandboxCgroup>& cg, pid_t& victim) {
  auto v = detectCgroupVersion(CgroupBackendChoice::Auto);
  ASSERT_TRUE(v.ok());
  CgroupLimits limits;
  limits.allowedDevices = standardDeviceRules();
  auto created = createSandboxCgroup(*v, parent, limits);
  ASSERT_TRUE(created.ok()) << created.error().message;
  cg = std::move(*created);
  victim = ::fork();
  if (victim == 0) {
    ::signal(SIGTERM, SIG_IGN);
    ::execl("/bin/sleep", "sleep", "300", (char*)nullptr);
    ::_exit(1);
  }
  ASSERT_TRUE(cg->addProcess(victim).ok());
}

TEST_F(BoxTest, CleanupSubcommandKillsAndRemovesLeftovers) {
  std::unique_ptr<SandboxCgroup> cg;
  pid_t victim = -1;
  ASSERT_NO_FATAL_FAILURE(cgroupWithStubbornSleeper(parent_, cg, victim));
  const std::string path = cg->path();
  // Simulate a crashed akabox: the cgroup and its process stay behind.
  SandboxCgroup* leaked = cg.release();
  (void)leaked;

  std::string cmd = akaboxBin() + " cleanup --cgroup-parent " + parent_ + " 2>/dev/null";
  EXPECT_EQ(std::system(cmd.c_str()), 0);
  int status = 0;
  ASSERT_EQ(::waitpid(victim, &status, 0), victim);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
  EXPECT_FALSE(std::filesystem::exists(path)) << path;
}

// remove() goes straight to rmdir (normally the sandbox is already gone); a process still in
// the cgroup must make it kill and retry, not fail or leave the process running.
TEST_F(BoxTest, RemoveKillsWhatIsStillInside_ActiveBackend) {
  std::unique_ptr<SandboxCgroup> cg;
  pid_t victim = -1;
  ASSERT_NO_FATAL_FAILURE(cgroupWithStubbornSleeper(parent_, cg, victim));
  const std::string path = cg->path();
  akad::Status removed = cg->remove();
  EXPECT_TRUE(removed.ok()) << removed.error().message;
  int status = 0;
  ASSERT_EQ(::waitpid(victim, &status, 0), victim);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
  EXPECT_FALSE(std::filesystem::exists(path)) << path;
}

TEST_F(BoxTest, CgroupV2KillAndAccountingFiles_CgroupV2Only) {
  auto v = detectCgroupVersion(CgroupBackendChoice::Auto);
  ASSERT_TRUE(v.ok());
  if (*v != CgroupVersion::V2)
    GTEST_SKIP() << "the active cgroup back-end is v1 (this machine); cgroup.kill/memory.peak are checked on a pure v2 host";
  CgroupLimits limits;
  limits.memoryBytes = 64 << 20;
  limits.pids = 8;
  limits.allowedDevices = standardDeviceRules();
  auto cg = createSandboxCgroup(*v, parent_, limits);
  ASSERT_TRUE(cg.ok()) << cg.error().message;
  std::string dir = (*cg)->path();
  EXPECT_EQ(readAll(dir + "/memory.max"), std::to_string(64 << 20) + "\n");
  EXPECT_EQ(readAll(dir + "/pids.max"), "8\n");
  if (std::filesystem::exists(dir + "/memory.swap.max")) {
    EXPECT_EQ(readAll(dir + "/memory.swap.max"), "0\n");
  }
  pid_t victim = ::fork();
  if (victim == 0) {
    ::execl("/bin/sleep", "sleep", "300", (char*)nullptr);
    ::_exit(1);
  }
  ASSERT_TRUE((*cg)->addProcess(victim).ok());
  EXPECT_TRUE((*cg)->killAll().ok());
  int status = 0;
  ::waitpid(victim, &status, 0);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
  EXPECT_TRUE((*cg)->usage().peakMemoryBytes.has_value());
  EXPECT_TRUE((*cg)->remove().ok());
  EXPECT_FALSE(std::filesystem::exists(dir));
}

}  // namespace
}  // namespace akabox_test
