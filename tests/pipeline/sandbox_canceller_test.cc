// SandboxCanceller names akabox by a pidfd (daemon/pipeline/sandbox_run.h): a cancel reaches
// the process it was attached to or nothing, never another process that got the same pid.
// Real processes of the test's own; the recycled pid is made for real with clone3's set_tid
// (root only).
#include <gtest/gtest.h>
#include <linux/sched.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>

#include "common/unique_fd.h"
#include "daemon/pipeline/sandbox_run.h"

namespace akad {
namespace {

// A child that sleeps until signalled (the default action ends it).
pid_t sleeper() {
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::pause();
    ::_exit(0);
  }
  return pid;
}

UniqueFd pidfdOf(pid_t pid) { return UniqueFd(static_cast<int>(::syscall(SYS_pidfd_open, pid, 0))); }

// A sleeper and its pidfd, as runSandbox holds akabox's.
struct Sleeper {
  pid_t pid = sleeper();
  UniqueFd fd = pidfdOf(pid);
  bool ok() const { return pid > 0 && fd.valid(); }
};

// The signal that ended `pid` (0: it exited), waiting up to `waitS` for it to end; -1 if it
// is still running then.
int endingSignal(pid_t pid, double waitS) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(waitS);
  for (;;) {
    int status = 0;
    const pid_t got = ::waitpid(pid, &status, WNOHANG);
    if (got == pid) return WIFSIGNALED(status) ? WTERMSIG(status) : 0;
    if (std::chrono::steady_clock::now() >= until) return -1;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

void killAndReap(pid_t pid) {
  ::kill(pid, SIGKILL);
  ::waitpid(pid, nullptr, 0);
}

TEST(SandboxCanceller, ACancelTerminatesTheAttachedProcess) {
  Sleeper child;
  ASSERT_TRUE(child.ok()) << std::strerror(errno);
  SandboxCanceller c;
  c.attach(child.fd.get());
  c.cancel();
  EXPECT_TRUE(c.cancelled());
  EXPECT_EQ(endingSignal(child.pid, 5), SIGTERM);
  c.detach();
}

TEST(SandboxCanceller, ACancelBeforeTheAttachTerminatesAtTheAttach) {
  SandboxCanceller c;
  c.cancel();
  Sleeper child;
  ASSERT_TRUE(child.ok());
  c.attach(child.fd.get());
  EXPECT_EQ(endingSignal(child.pid, 5), SIGTERM);
  c.detach();
}

TEST(SandboxCanceller, AfterTheDetachACancelSignalsNothing) {
  Sleeper child;
  ASSERT_TRUE(child.ok());
  SandboxCanceller c;
  c.attach(child.fd.get());
  c.detach();
  c.cancel();
  EXPECT_EQ(endingSignal(child.pid, 0.3), -1) << "the detached process was signalled";
  killAndReap(child.pid);
}

// The case a pid could not survive: akabox is reaped, and its pid goes to another process
// before the cancel's signal is sent. The pidfd still names the reaped process, so the new
// one is left alone (kill(pid) would have terminated it).
TEST(SandboxCanceller, ARecycledPidIsNeverSignalled) {
  if (::geteuid() != 0) GTEST_SKIP() << "clone3's set_tid needs root";
  Sleeper akabox;
  ASSERT_TRUE(akabox.ok());
  const pid_t first = akabox.pid;
  SandboxCanceller c;
  c.attach(akabox.fd.get());
  killAndReap(first);  // gone, its pid free again

  // A new process with exactly that pid.
  pid_t tid = first;
  clone_args args{};
  args.exit_signal = SIGCHLD;
  args.set_tid = reinterpret_cast<uint64_t>(&tid);
  args.set_tid_size = 1;
  const long second = ::syscall(SYS_clone3, &args, sizeof args);
  if (second == 0) {
    ::pause();
    ::_exit(0);
  }
  if (second < 0 && (errno == EEXIST || errno == EPERM))
    GTEST_SKIP() << "cannot make a process with pid " << first << " here: " << std::strerror(errno);
  ASSERT_EQ(second, first) << std::strerror(errno);

  c.cancel();
  EXPECT_EQ(endingSignal(first, 0.3), -1) << "the process that reused the pid was signalled";
  c.detach();
  killAndReap(first);
}

}  // namespace
}  // namespace akad
