// Each test runs a probe in the real akabox and asserts that the guarantee held and that the
// result says what happened; the fixture asserts nothing of the sandbox is left afterwards.

#include <sched.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <fcntl.h>
#include <unistd.h>

#include <seccomp.h>

#include <algorithm>
#include <filesystem>
#include <sstream>

#include "common/data_root.h"
#include "akad/version.h"
#include "box_fixture.h"

namespace akabox_test {
namespace {

using nlohmann::json;

bool violated(const json& r, const std::string& name) {
  for (const auto& v : r["seccomp_violations"])
    if (v.get<std::string>() == name) return true;
  return false;
}

TEST_F(BoxTest, ExitCodeIdentityAndEnvironment) {
  std::string ws = tmp_ + "/ws";
  ASSERT_EQ(::mkdir(ws.c_str(), 0755), 0);
  ASSERT_EQ(::chown(ws.c_str(), 4242, 4242), 0);
  BoxRun r = run({"--workspace", ws, "--env", "FOO=bar"}, {probe(), "ids"});
  EXPECT_EQ(r.exitStatus, 0) << r.err;
  EXPECT_EQ(r.result["status"], "exited");
  EXPECT_EQ(r.result["exit_code"], 0);
  EXPECT_TRUE(hasLine(r.out, "uid=1000 euid=1000 gid=1000 egid=1000")) << r.out;
  EXPECT_NE(value(r.out, "setuid0"), "ok");
  EXPECT_EQ(value(r.out, "hostname"), "akabox");
  EXPECT_EQ(value(r.out, "cwd"), "/workspace");
  std::vector<std::string> env;
  std::istringstream in(r.out);
  for (std::string l; std::getline(in, l);)
    if (l.rfind("env=", 0) == 0) env.push_back(l.substr(4, l.find('=', 4) - 4));
  std::sort(env.begin(), env.end());
  EXPECT_EQ(env, (std::vector<std::string>{"FOO", "HOME", "LANG", "PATH"}));
  EXPECT_EQ(r.result["stdout_bytes"].get<uint64_t>(), r.out.size());

  BoxRun e = run({}, {probe(), "exit", "7"});
  EXPECT_EQ(e.exitStatus, 7);
  EXPECT_EQ(e.result["status"], "exited");
  EXPECT_EQ(e.result["exit_code"], 7);
}

// akabox reads the common command line itself and leaves everything else to CLI11
// (sandbox/main.cc): both must give the same sandbox, and CLI11 still refuses mistakes.
TEST_F(BoxTest, FlagsMeanTheSameInEveryForm) {
  auto seen = [&](const BoxRun& r) {
    std::vector<std::string> lines;
    std::istringstream in(r.out);
    for (std::string l; std::getline(in, l);)
      if (l.rfind("env=", 0) == 0 || l.rfind("uid=", 0) == 0 || l.rfind("hostname", 0) == 0) lines.push_back(l);
    std::sort(lines.begin(), lines.end());
    return lines;
  };
  BoxRun quick = run({"--env", "A=1", "--env", "B=x y", "--hostname", "h1", "--uid", "1234"}, {probe(), "ids"});
  BoxRun full = run({"--env=A=1", "--env=B=x y", "--hostname=h1", "--uid=1234"}, {probe(), "ids"});
  EXPECT_EQ(quick.exitStatus, 0) << quick.err;
  EXPECT_EQ(full.exitStatus, 0) << full.err;
  EXPECT_TRUE(hasLine(quick.out, "env=B=x y")) << quick.out;
  EXPECT_TRUE(hasLine(quick.out, "uid=1234 euid=1234 gid=1000 egid=1000")) << quick.out;
  EXPECT_EQ(value(quick.out, "hostname"), "h1");
  EXPECT_EQ(seen(quick), seen(full));
  // Mistakes CLI11 refuses before anything starts: exit status 125 and a message.
  for (const std::string bad : {"--hostname a --hostname b", "--no-such-flag 1", "--env"}) {
    std::string cmd = "'" + akaboxBin() + "' run " + bad + " -- /bin/true 2>'" + tmp_ + "/cli-err'";
    int status = std::system(cmd.c_str());
    EXPECT_EQ(WIFEXITED(status) ? WEXITSTATUS(status) : -1, 125) << bad;
    EXPECT_FALSE(readAll(tmp_ + "/cli-err").empty()) << bad;
  }
}

// The init starts as SCHED_BATCH and off akabox's CPU (subproc.cc says why); the command
// must still get the caller's scheduling policy and whole CPU set.
TEST_F(BoxTest, CommandKeepsTheCallersCpuSetAndPolicy) {
  cpu_set_t mine;
  ASSERT_EQ(::sched_getaffinity(0, sizeof(mine), &mine), 0);
  ASSERT_EQ(::sched_getscheduler(0), SCHED_OTHER);
  for (int i = 0; i < 5; ++i) {  // the CPU akabox starts on varies from run to run
    BoxRun pol = run({}, {"/usr/bin/awk", "{print \"policy=\" $41}", "/proc/self/stat"});
    ASSERT_EQ(pol.exitStatus, 0) << pol.err;
    EXPECT_EQ(pol.out, "policy=0\n");  // SCHED_OTHER, not SCHED_BATCH (3)
    if (CPU_COUNT(&mine) < 2) continue;  // one CPU: the set is not changed
    BoxRun r = run({}, {"/bin/grep", "^Cpus_allowed_list", "/proc/self/status"});
    ASSERT_EQ(r.exitStatus, 0) << r.err;
    std::string expected;
    for (int c = 0; c < CPU_SETSIZE; ++c) {
      if (!CPU_ISSET(c, &mine)) continue;
      int last = c;
      while (last + 1 < CPU_SETSIZE && CPU_ISSET(last + 1, &mine)) ++last;
      if (!expected.empty()) expected += ',';
      expected += std::to_string(c);
      if (last > c) expected += '-' + std::to_string(last);
      c = last;
    }
    EXPECT_EQ(r.out, "Cpus_allowed_list:\t" + expected + "\n");
  }
}

// Each namespace is made at a different point of the spawn (clone3, the init, the command,
// akabox's thread): the command must be in a new one of every kind, none of them the host's.
TEST_F(BoxTest, EveryNamespaceIsTheSandboxsOwn) {
  const std::vector<std::string> kinds = {"ipc", "uts", "net", "pid", "mnt", "cgroup", "user"};
  std::string script;
  for (const auto& k : kinds) script += "echo " + k + "=$(readlink /proc/self/ns/" + k + "); ";
  BoxRun r = run({}, {"/bin/sh", "-c", script});
  ASSERT_EQ(r.exitStatus, 0) << r.err;
  for (const auto& k : kinds) {
    char host[128] = {};
    ASSERT_GT(::readlink(("/proc/self/ns/" + k).c_str(), host, sizeof(host) - 1), 0);
    std::string inside = value(r.out, k);
    EXPECT_EQ(inside.rfind(k + ":[", 0), 0u) << k << ": " << r.out;
    EXPECT_NE(inside, host) << k << " is the host's";
  }
}

// /proc/PID/net needs no ptrace rights: a pid 1 left in the host's network namespace would
// show the host's interfaces (and sockets) to the sandbox.
TEST_F(BoxTest, TheInitSharesTheSandboxsNetworkNamespace) {
  BoxRun r = run({}, {"/bin/sh", "-c", "tail -n +3 /proc/1/net/dev | cut -d: -f1 | tr -d ' '"});
  ASSERT_EQ(r.exitStatus, 0) << r.err;
  EXPECT_EQ(r.out, "lo\n");
}

// The command changes into its working directory as the sandbox's user: one only root may
// enter is a set-up failure that says so, not a command stranded in a directory it cannot use.
TEST_F(BoxTest, WorkingDirectoryIsEnteredAsTheSandboxsUser) {
  std::string closed = tmp_ + "/closed";
  ASSERT_EQ(::mkdir(closed.c_str(), 0700), 0);
  BoxRun r = run({"--workspace", closed}, {"/bin/true"});
  EXPECT_EQ(r.result["status"], "setup-failed") << r.result.dump();
  EXPECT_EQ(r.exitStatus, 125);
  std::string message = r.result["message"].get<std::string>();
  EXPECT_NE(message.find("working directory: chdir('/workspace')"), std::string::npos) << message;
  EXPECT_NE(message.find("Permission denied"), std::string::npos) << message;
  ASSERT_EQ(::chmod(closed.c_str(), 0711), 0);
  BoxRun ok = run({"--workspace", closed}, {"/bin/sh", "-c", "pwd"});
  EXPECT_EQ(ok.exitStatus, 0) << ok.err;
  EXPECT_EQ(ok.out, "/workspace\n");
}

// The sandbox runs in a session of its own, with no controlling terminal: a session that
// reached outside the pid namespace would be akabox's caller's, whose terminal (TIOCSTI)
// must stay out of reach.
TEST_F(BoxTest, TheSandboxHasASessionOfItsOwnWithoutATerminal) {
  // /proc/self/stat after the ")" of the name: state ppid pgrp session tty_nr ...
  BoxRun r = run({}, {"/bin/sh", "-c", "set -- $(sed 's/.*) //' /proc/self/stat); echo session=$4; echo tty=$5; "
                                         "if (exec 3</dev/tty) 2>/dev/null; then echo devtty=open; else echo devtty=refused; fi"});
  ASSERT_EQ(r.exitStatus, 0) << r.err;
  // The leader's pid as the sandbox sees it; 0 would be a leader outside the sandbox's pid
  // namespace: the caller's session.
  const std::string session = value(r.out, "session");
  EXPECT_TRUE(!session.empty() && session.find_first_not_of("0123456789") == std::string::npos) << r.out;
  EXPECT_NE(session, "0") << r.out;
  EXPECT_EQ(value(r.out, "tty"), "0") << r.out;
  EXPECT_EQ(value(r.out, "devtty"), "refused") << r.out;
}

// The init is shielded from the OOM killer (oom_score_adj -1000) while the command runs; the
// command itself must keep its caller's value, or a memory hog could never be killed alone.
// (The shield is written by akabox or the init after the command starts: polled for.)
TEST_F(BoxTest, OnlyTheInitIsShieldedFromTheOomKiller) {
  std::string own, capEff;
  {
    std::ifstream in("/proc/self/oom_score_adj");
    std::getline(in, own);
    std::ifstream status("/proc/self/status");
    for (std::string l; std::getline(status, l);)
      if (l.rfind("CapEff:", 0) == 0) capEff = l.substr(7);
  }
  ASSERT_FALSE(own.empty());
  ASSERT_NE(own, "-1000") << "the test itself runs shielded; the check would prove nothing";
  // Lowering the value needs CAP_SYS_RESOURCE, which some hosts withhold even from root (the
  // development VM does); there the init keeps the caller's value like the command.
  const bool sysResource = (std::stoull(capEff, nullptr, 16) >> 24) & 1;
  const std::string waitForShield = sysResource ? "i=0; while [ \"$(cat /proc/1/oom_score_adj)\" != -1000 ] && [ $i -lt 200 ]; do sleep 0.01; i=$((i+1)); done; " : "";
  BoxRun r = run({}, {"/bin/sh", "-c", "echo self=$(cat /proc/self/oom_score_adj); " + waitForShield + "echo init=$(cat /proc/1/oom_score_adj)"});
  ASSERT_EQ(r.exitStatus, 0) << r.err;
  EXPECT_EQ(value(r.out, "self"), own) << r.out;
  EXPECT_EQ(value(r.out, "init"), sysResource ? "-1000" : own) << r.out;
}

// A policy that refuses chdir still starts the command (it changes directory before its
// filter goes in), and the command's own chdir is refused and reported.
TEST_F(BoxTest, APolicyThatRefusesChdirStillStartsTheCommand) {
  const std::string root = akad::dataRoot().string();  // where akabox finds policies/ too
  nlohmann::json policy = nlohmann::json::parse(readAll(root + "/policies/default.json"));
  size_t dropped = 0;
  for (auto& rule : policy["syscalls"]) {
    if (!rule.contains("names")) continue;
    auto& names = rule["names"];
    for (auto it = names.begin(); it != names.end();) {
      if (*it == "chdir" || *it == "fchdir") {
        it = names.erase(it);
        ++dropped;
      } else {
        ++it;
      }
    }
  }
  ASSERT_EQ(dropped, 2u);
  std::string path = tmp_ + "/no-chdir.json";
  std::ofstream(path) << policy.dump();
  std::string ws = tmp_ + "/ws";
  ASSERT_EQ(::mkdir(ws.c_str(), 0755), 0);
  BoxRun r = run({"--seccomp", path, "--workspace", ws}, {"/bin/sh", "-c", "pwd; cd /tmp || echo refused"});
  EXPECT_EQ(r.result["status"], "exited") << r.result.dump();
  EXPECT_EQ(r.exitStatus, 0) << r.err;
  EXPECT_EQ(r.out, "/workspace\nrefused\n") << r.err;
  EXPECT_TRUE(violated(r.result, "chdir")) << r.result["seccomp_violations"].dump();
}

TEST_F(BoxTest, SignalledCommandGives128PlusSignal) {
  BoxRun r = run({}, {probe(), "kill-self", "15"});
  EXPECT_EQ(r.exitStatus, 128 + 15);
  EXPECT_EQ(r.result["status"], "signaled");
  EXPECT_EQ(r.result["signal"], 15);
  EXPECT_TRUE(r.result["exit_code"].is_null());
}

TEST_F(BoxTest, HostFilesOutsideBindsAreUnreachable) {
  std::string secret = tmp_ + "/secret";
  std::ofstream(secret) << "host-secret";
  BoxRun r = run({}, {probe(), "read", secret});
  EXPECT_EQ(r.exitStatus, 0);
  EXPECT_EQ(value(r.out, "read"), "No such file or directory") << r.out;
  BoxRun shadow = run({}, {probe(), "read", "/etc/shadow"});
  EXPECT_EQ(value(shadow.out, "read"), "No such file or directory") << shadow.out;
  BoxRun root = run({}, {probe(), "read", "/root/.bashrc"});
  EXPECT_NE(value(root.out, "read").rfind("ok", 0), 0u) << root.out;
}

TEST_F(BoxTest, ReadOnlyBindAndRootRefuseWrites) {
  std::string ro = tmp_ + "/ro";
  ASSERT_EQ(::mkdir(ro.c_str(), 0777), 0);
  ::chmod(ro.c_str(), 0777);  // only the mount, not permissions, may stop the write
  BoxRun r = run({"--bind", ro + ":/data"}, {probe(), "write", "/data"});
  EXPECT_EQ(value(r.out, "write"), "Read-only file system") << r.out;
  EXPECT_FALSE(std::filesystem::exists(ro + "/probe-was-here"));
  BoxRun root = run({}, {probe(), "write", "/usr"});
  EXPECT_NE(value(root.out, "write"), "ok");

  // The workspace is writable, and what the agent writes belongs to the workspace's owner.
  std::string ws = tmp_ + "/ws";
  ASSERT_EQ(::mkdir(ws.c_str(), 0755), 0);
  ASSERT_EQ(::chown(ws.c_str(), 4243, 4243), 0);
  BoxRun w = run({"--workspace", ws}, {probe(), "write", "/workspace"});
  EXPECT_EQ(value(w.out, "write"), "ok") << w.out << w.err;
  struct stat st {};
  ASSERT_EQ(::stat((ws + "/probe-was-here").c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, 4243u);
}

TEST_F(BoxTest, HostProcessesAreInvisibleAndUnsignalable) {
  pid_t host = ::fork();
  if (host == 0) {
    ::execl("/bin/sleep", "sleep", "300", (char*)nullptr);
    ::_exit(1);
  }
  BoxRun procs = run({}, {probe(), "procs"});
  int count = std::stoi(value(procs.out, "proc_count"));
  EXPECT_LE(count, 2) << procs.out;  // the init and the probe itself
  EXPECT_EQ(procs.out.find("sleep"), std::string::npos) << procs.out;
  BoxRun sig = run({}, {probe(), "signal", std::to_string(host)});
  EXPECT_NE(value(sig.out, "kill"), "ok");
  EXPECT_EQ(::kill(host, 0), 0) << "the host process was killed from inside the sandbox";
  ::kill(host, SIGKILL);
  ::waitpid(host, nullptr, 0);
}

TEST_F(BoxTest, NetworkNoneCannotReachHostLoopback) {
  int l = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(l, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
  ASSERT_EQ(::listen(l, 4), 0);
  socklen_t len = sizeof(a);
  ::getsockname(l, reinterpret_cast<sockaddr*>(&a), &len);
  std::string port = std::to_string(ntohs(a.sin_port));
  BoxRun none = run({}, {probe(), "connect", port});
  EXPECT_EQ(value(none.out, "connect"), "Connection refused") << none.out;
  EXPECT_EQ(value(none.out, "loopback"), "ok") << "loopback must be up inside";
  // The same probe does reach the listener with --net host: the check above is meaningful.
  BoxRun host = run({"--net", "host"}, {probe(), "connect", port});
  EXPECT_EQ(value(host.out, "connect"), "ok") << host.out;
  ::close(l);
}

// The network namespace is made on a thread of akabox's own (sandbox/net.h); when it cannot be
// made, the run fails at set-up with that step named, and the init already started is gone.
TEST_F(BoxTest, NetworkNamespaceFailureIsReportedAndLeavesNothing) {
  // akabox runs under a filter of the test's that refuses only unshare(CLONE_NEWNET).
  inChild_ = [] {
    scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
    seccomp_attr_set(ctx, SCMP_FLTATR_CTL_NNP, 0);
    seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSPC), SCMP_SYS(unshare), 1, SCMP_A0(SCMP_CMP_MASKED_EQ, CLONE_NEWNET, CLONE_NEWNET));
    if (seccomp_load(ctx) != 0) ::_exit(99);
  };
  BoxRun r = run({}, {probe(), "ids"});
  EXPECT_EQ(r.exitStatus, 125) << r.err;
  EXPECT_EQ(r.result["status"], "setup-failed");
  std::string msg = r.result.value("message", "");
  // The namespace thread unshares the ipc and uts namespaces in the same call (net.h).
  EXPECT_NE(msg.find("network namespace: unshare(CLONE_NEWNET"), std::string::npos) << msg;
  EXPECT_NE(msg.find("): No space left on device"), std::string::npos) << msg;
  EXPECT_TRUE(r.out.empty()) << r.out;
  // --net host needs no namespace of its own and still runs under the same filter.
  BoxRun host = run({"--net", "host"}, {probe(), "exit", "3"});
  EXPECT_EQ(host.exitStatus, 3) << host.err;
  EXPECT_EQ(host.result["status"], "exited");
}

// lo is brought up beside the release (net.h); the command must not exec until it is, and a
// failure there is reported like any other set-up step.
TEST_F(BoxTest, LoopbackFailureIsReportedAndTheCommandNeverRuns) {
  inChild_ = [] {
    scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
    seccomp_attr_set(ctx, SCMP_FLTATR_CTL_NNP, 0);
    seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENETDOWN), SCMP_SYS(ioctl), 1, SCMP_A1(SCMP_CMP_EQ, SIOCSIFFLAGS));
    if (seccomp_load(ctx) != 0) ::_exit(99);
  };
  std::string ws = tmp_ + "/ws";
  ASSERT_EQ(::mkdir(ws.c_str(), 0777), 0);
  ASSERT_EQ(::chmod(ws.c_str(), 0777), 0);
  BoxRun r = run({"--workspace", ws}, {"/bin/sh", "-c", "echo ran > /workspace/ran"});
  EXPECT_EQ(r.exitStatus, 125) << r.err;
  EXPECT_EQ(r.result["status"], "setup-failed");
  std::string msg = r.result.value("message", "");
  EXPECT_NE(msg.find("network namespace: ioctl(SIOCSIFFLAGS, lo up): Network is down"), std::string::npos) << msg;
  EXPECT_FALSE(std::filesystem::exists(ws + "/ran")) << "the command ran without its loopback interface";
}

TEST_F(BoxTest, DangerousSyscallsAreRefusedAndReported) {
  BoxRun r = run({}, {probe(), "syscalls"});
  EXPECT_EQ(r.exitStatus, 0) << r.err;
  for (const char* k : {"mount", "ptrace", "unshare", "unshare_ns", "bpf", "keyctl", "perf_event_open", "userfaultfd",
                        "setns", "clone_newuser"})
    EXPECT_NE(value(r.out, k), "ok") << k << " succeeded inside the sandbox\n" << r.out;
  EXPECT_EQ(value(r.out, "mount"), "Operation not permitted");
  EXPECT_TRUE(r.result["seccomp_violations_reported"].get<bool>());
  for (const char* s : {"mount", "ptrace", "unshare", "bpf", "keyctl", "perf_event_open", "userfaultfd", "clone"})
    EXPECT_TRUE(violated(r.result, s)) << s << " missing from " << r.result["seccomp_violations"].dump();
  // Sockets of the families programs use open; AF_VSOCK (which no network namespace confines:
  // it reaches a virtual machine's host) and the other families do not.
  for (const char* k : {"socket_unix", "socket_inet", "socket_inet6", "socket_netlink"}) EXPECT_EQ(value(r.out, k), "ok") << k;
  for (const char* k : {"socket_vsock", "socket_alg", "socket_packet", "socket_key", "socket_bluetooth"})
    EXPECT_EQ(value(r.out, k), "Operation not permitted") << k << "\n" << r.out;
  EXPECT_TRUE(violated(r.result, "socket")) << r.result["seccomp_violations"].dump();
}

// How the probe's 32-bit system call (int 0x80) ends outside any sandbox: the wait status.
// Some virtual machines' kernels fault it (SIGSEGV) for every program.
int i386ProbeOutsideTheSandbox() {
  pid_t pid = ::fork();
  if (pid == 0) {
    int null = ::open("/dev/null", O_WRONLY);
    ::dup2(null, 1);
    ::execl(probeBin().c_str(), "probe", "i386", static_cast<char*>(nullptr));
    ::_exit(127);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  return status;
}

// The probe's system call never returned (it prints `printedIfReturned` when it does): the
// filter killed the process with SIGSYS, and the result says so.
void expectKilledByTheFilter(const BoxRun& r, const std::string& printedIfReturned) {
  EXPECT_EQ(r.result["status"], "signaled") << r.out << r.err;
  EXPECT_EQ(r.result["signal"], SIGSYS);
  EXPECT_EQ(r.exitStatus, 128 + SIGSYS);
  EXPECT_EQ(r.out.find(printedIfReturned), std::string::npos) << "the system call returned: " << r.out;
  EXPECT_FALSE(r.result["seccomp_violations"].empty());
}

TEST_F(BoxTest, OtherArchitectureSyscallKills) {
#if defined(__x86_64__)
  const int outside = i386ProbeOutsideTheSandbox();
  if (WIFSIGNALED(outside) && WTERMSIG(outside) == SIGSEGV)
    GTEST_SKIP() << "this kernel faults int 0x80 outside any sandbox too (the probe dies there), so there is no "
                    "32-bit system call for the filter to kill";
  ASSERT_TRUE(WIFEXITED(outside) && WEXITSTATUS(outside) == 0) << "the probe failed outside the sandbox: status " << outside;
  expectKilledByTheFilter(run({}, {probe(), "i386"}), "int80=");
#else
  GTEST_SKIP() << "int 0x80 probe is x86-64 only";
#endif
}

// The x32 ABI reaches the kernel through the 64-bit entry with bit 30 of the number set; the
// policy names x86-64 only, so the filter must kill it like any other architecture, whether
// or not this kernel was built with x32 (outside the sandbox the call just fails there).
TEST_F(BoxTest, X32SyscallKills) {
#if defined(__x86_64__)
  expectKilledByTheFilter(run({}, {probe(), "x32"}), "x32=");
#else
  GTEST_SKIP() << "the x32 ABI is x86-64 only";
#endif
}

TEST_F(BoxTest, SetuidRootBinaryGivesNoPrivilege) {
  std::string dir = tmp_ + "/suid";
  ASSERT_EQ(::mkdir(dir.c_str(), 0755), 0);
  std::filesystem::copy_file(probeBin(), dir + "/probe");
  ASSERT_EQ(::chown((dir + "/probe").c_str(), 0, 0), 0);
  ASSERT_EQ(::chmod((dir + "/probe").c_str(), 04755), 0);
  BoxRun r = run({"--bind", dir + ":/suid"}, {"/suid/probe", "ids"});
  EXPECT_EQ(r.exitStatus, 0) << r.err;
  EXPECT_TRUE(hasLine(r.out, "uid=1000 euid=1000 gid=1000 egid=1000")) << r.out;
  EXPECT_NE(value(r.out, "setuid0"), "ok");
}

TEST_F(BoxTest, InitRootAndInheritedDescriptorsGiveNoWayOut) {
  std::string secretDir = tmp_ + "/secretdir";
  ASSERT_EQ(::mkdir(secretDir.c_str(), 0755), 0);
  std::ofstream(secretDir + "/secret") << "host-secret";
  int leaked = ::open(secretDir.c_str(), O_RDONLY | O_DIRECTORY);
  ASSERT_GE(leaked, 0);
  BoxRun fds = run({}, {probe(), "fds"}, leaked);
  ::close(leaked);
  EXPECT_EQ(value(fds.out, "open_fds"), "0") << fds.out;
  BoxRun root = run({}, {probe(), "proc1root", secretDir + "/secret"});
  EXPECT_NE(value(root.out, "proc1root"), "ok") << root.out;
  EXPECT_NE(value(root.out, "proc1environ"), "ok") << root.out;
}

TEST_F(BoxTest, MemoryHogIsReportedAsOom) {
  BoxRun r = run({"--memory", "64M"}, {probe(), "memory", "256"});
  EXPECT_EQ(r.result["status"], "oom") << r.result.dump();
  EXPECT_TRUE(r.result["oom_killed"].get<bool>());
  EXPECT_EQ(r.result["signal"], SIGKILL);
  EXPECT_EQ(r.exitStatus, 128 + SIGKILL);
  uint64_t peak = r.result["peak_memory_bytes"].get<uint64_t>();
  EXPECT_GE(peak, 48ull << 20);
  EXPECT_LE(peak, 64ull << 20);
}

// The init may share akabox's memory (sandbox/shared_clone.h); an OOM killer that chose it
// would kill akabox with it, and the run would end without a result and with its cgroup left
// behind. So it stays out of the sandbox's cgroup. Here the memory goes into a tmpfs file that
// no process maps, so every process of the sandbox is smaller than the init would count
// (akabox's memory): inside the cgroup, the init would be the OOM killer's choice.
TEST_F(BoxTest, AnOomNoProcessHoldsLeavesTheInitAlone) {
  BoxRun r = run({"--memory", "32M", "--tmpfs", "/tmp:128M"},
                 {"/bin/sh", "-c", "head -c 100000000 /dev/zero > /tmp/fill; echo after=$?"});
  ASSERT_TRUE(r.result.is_object()) << "akabox exited " << r.exitStatus << " without a result: " << r.err;
  EXPECT_EQ(r.result["status"], "oom") << r.result.dump();
  EXPECT_TRUE(r.result["oom_killed"].get<bool>());
  EXPECT_NE(r.exitStatus, 125) << r.result.dump();
}

// akabox is root: a link planted where its output goes (a sandbox could plant one in a folder it
// may write) must not make it write, or create, what the link points to.
TEST_F(BoxTest, OutputFilesAreNotOpenedThroughLinks) {
  const std::string victim = tmp_ + "/victim";
  std::ofstream(victim) << "precious\n";
  ASSERT_EQ(::symlink(victim.c_str(), (tmp_ + "/stdout").c_str()), 0);  // where the run's stdout goes
  BoxRun out = run({}, {"/bin/sh", "-c", "echo overwritten"});
  EXPECT_EQ(out.exitStatus, 125) << out.result.dump();
  EXPECT_EQ(out.result.value("status", ""), "setup-failed") << out.result.dump();
  ::unlink((tmp_ + "/stdout").c_str());
  ASSERT_EQ(::symlink((tmp_ + "/made-by-root").c_str(), (tmp_ + "/stderr").c_str()), 0);
  BoxRun err = run({}, {"/bin/sh", "-c", "echo created >&2"});
  EXPECT_EQ(err.exitStatus, 125) << err.result.dump();
  EXPECT_EQ(readAll(victim), "precious\n");
  EXPECT_FALSE(std::filesystem::exists(tmp_ + "/made-by-root"));
  ::unlink((tmp_ + "/stderr").c_str());
}

// A tmpfs asked for with huge pages is mounted huge=within_size (its files of 2 MiB and more get
// transparent huge pages); the others are not.
TEST_F(BoxTest, HugeTmpfsIsMountedWithinSize) {
  BoxRun r = run({"--tmpfs", "/big:64M:huge", "--tmpfs", "/small:1M"},
                 {"/bin/sh", "-c", "grep -E ' /(big|small) ' /proc/self/mountinfo"});
  ASSERT_EQ(r.exitStatus, 0) << r.err;
  std::istringstream lines(r.out);
  int seen = 0;
  for (std::string line; std::getline(lines, line);) {
    ++seen;
    if (line.find(" /big ") != std::string::npos) {
      EXPECT_NE(line.find("huge=within_size"), std::string::npos) << line;
    } else {
      EXPECT_EQ(line.find("huge="), std::string::npos) << line;
    }
  }
  EXPECT_EQ(seen, 2) << r.out;
}

// With command_is_pid1 the init execs the command itself: it is pid 1, and it is the one
// process that joins the sandbox's cgroup before its set-up (the init otherwise stays out of
// it), so the cgroup namespace is rooted there too.
TEST_F(BoxTest, ACommandThatIsPid1IsInTheSandboxsCgroup) {
  const std::string spec = tmp_ + "/pid1.json";
  {
    std::ofstream out(spec);
    out << R"({"command_is_pid1": true, "memory": "64M"})";
  }
  BoxRun r = run({"--spec", spec}, {"/bin/sh", "-c", "echo pid=$$; cat /proc/self/cgroup; exit 7"});
  EXPECT_EQ(r.exitStatus, 7) << r.err;
  EXPECT_EQ(r.result["status"], "exited") << r.result.dump();
  EXPECT_EQ(value(r.out, "pid"), "1") << r.out;
  std::istringstream lines(r.out);
  int cgroupLines = 0;
  for (std::string l; std::getline(lines, l);) {
    if (l.rfind("pid=", 0) == 0) continue;
    ++cgroupLines;
    EXPECT_EQ(l.substr(l.rfind(':')), ":/") << "not at its cgroup namespace's root: " << l;
  }
  EXPECT_GT(cgroupLines, 0) << r.out;
}

// Waits (up to 5 s) until the command's stdout has `word`.
bool outputShows(const std::string& stdoutPath, const std::string& word) {
  for (int i = 0; i < 500; ++i) {
    if (readAll(stdoutPath).find(word) != std::string::npos) return true;
    ::usleep(10000);
  }
  return false;
}

// SIGTERM to akabox (SIGINT and SIGHUP alike) cancels the sandbox: all of it is killed, its
// cgroup removed (the fixture checks that nothing is left), and the result says why.
TEST_F(BoxTest, AkaboxStoppedWithSigtermKillsTheSandboxAndSaysSo) {
  const pid_t box = start({}, {"/bin/sh", "-c", "echo started; exec sleep 30"});
  ASSERT_TRUE(outputShows(tmp_ + "/stdout", "started")) << readAll(tmp_ + "/stderr");
  ::kill(box, SIGTERM);
  BoxRun r = finish(box);
  EXPECT_EQ(r.result["status"], "signaled") << r.result.dump();
  EXPECT_EQ(r.result["signal"], SIGKILL) << r.result.dump();
  EXPECT_LT(r.result["wall_s"].get<double>(), 10.0);
  EXPECT_NE(r.result["message"].get<std::string>().find("stopped by signal 15"), std::string::npos) << r.result.dump();
}

// akabox killed outright cannot clean up, but the sandbox does not outlive it: the init's
// parent-death signal kills it, and the pid namespace with it. The cgroup stays behind for
// `akabox cleanup` (akad runs that at its start).
TEST_F(BoxTest, KillingAkaboxKillsTheSandbox) {
  const pid_t box = start({}, {"/bin/sh", "-c", "echo started; exec sleep 30"});
  ASSERT_TRUE(outputShows(tmp_ + "/stdout", "started")) << readAll(tmp_ + "/stderr");
  ::kill(box, SIGKILL);
  BoxRun r = finish(box, false);
  EXPECT_EQ(r.exitStatus, 128 + SIGKILL);
  size_t left = processesInSandboxCgroups().size();
  for (int i = 0; i < 500 && left > 0; ++i) {  // the kernel kills asynchronously: up to 5 s
    ::usleep(10000);
    left = processesInSandboxCgroups().size();
  }
  EXPECT_EQ(left, 0u) << "processes of the sandbox outlived akabox";
  const std::string cleanup = "'" + akaboxBin() + "' cleanup --cgroup-parent '" + parent_ + "' 2>/dev/null";
  EXPECT_EQ(std::system(cleanup.c_str()), 0);
}

TEST_F(BoxTest, ForkBombStopsAtPidsLimit) {
  BoxRun r = run({"--pids", "16"}, {probe(), "forkbomb", "500"});
  EXPECT_EQ(r.exitStatus, 0) << r.err;
  std::string forked = value(r.out, "forked");
  int n = std::stoi(forked.substr(0, forked.find(' ')));
  EXPECT_LT(n, 16) << r.out;
  EXPECT_GT(n, 0);
  if (!r.result["pids_peak"].is_null()) {
    EXPECT_LE(r.result["pids_peak"].get<int>(), 16);
  }
}

TEST_F(BoxTest, WallLimitKillsProgramIgnoringSigterm) {
  BoxRun r = run({"--wall-time", "1"}, {probe(), "ignore-term"});
  EXPECT_EQ(r.result["status"], "wall-timeout") << r.result.dump();
  EXPECT_EQ(r.exitStatus, 128 + SIGKILL);
  double wall = r.result["wall_s"].get<double>();
  EXPECT_GE(wall, 1.0);
  EXPECT_LT(wall, 3.0);
}

TEST_F(BoxTest, CpuLimitStopsSpinner) {
  BoxRun r = run({"--cpu-time", "1", "--wall-time", "20"}, {probe(), "spin"});
  EXPECT_EQ(r.result["status"], "cpu-timeout") << r.result.dump();
  double cpu = r.result["cpu_s"].get<double>();
  EXPECT_GE(cpu, 0.9);
  EXPECT_LT(cpu, 3.0);
}

TEST_F(BoxTest, OutputFloodIsCutAtLimit) {
  BoxRun r = run({"--output-limit", "100K", "--wall-time", "20"}, {probe(), "flood"});
  EXPECT_EQ(r.result["status"], "output-limit") << r.result.dump();
  EXPECT_TRUE(r.result["truncated"].get<bool>());
  EXPECT_EQ(r.result["stdout_bytes"].get<uint64_t>(), 100u * 1024);
  EXPECT_EQ(r.out.size(), 100u * 1024);
}

TEST_F(BoxTest, FileSizeLimitStopsBigFile) {
  std::string ws = tmp_ + "/ws";
  ASSERT_EQ(::mkdir(ws.c_str(), 0755), 0);
  ASSERT_EQ(::chown(ws.c_str(), 4244, 4244), 0);
  BoxRun r = run({"--output-limit", "1M", "--workspace", ws}, {probe(), "bigfile", "/workspace/big"});
  EXPECT_EQ(r.result["status"], "output-limit") << r.result.dump();
  EXPECT_EQ(r.result["signal"], SIGXFSZ);
  EXPECT_LE(std::filesystem::file_size(ws + "/big"), 1u << 20);
}

TEST_F(BoxTest, DaemonisedGrandchildDiesWithTheSandbox) {
  BoxRun r = run({}, {probe(), "daemon", marker_});
  EXPECT_EQ(r.exitStatus, 0) << r.err;
  EXPECT_EQ(value(r.out, "daemon"), "started");
  EXPECT_EQ(r.result["status"], "exited");
  // TearDown's scan for marker_ in every host process's cmdline is the assertion.
}

TEST_F(BoxTest, SetupFailureSaysWhatFailedAndLeavesNothing) {
  BoxRun r = run({"--bind", "/nonexistent-akabox-src:/x"}, {probe(), "ids"});
  EXPECT_EQ(r.exitStatus, 125);
  EXPECT_EQ(r.result["status"], "setup-failed");
  std::string msg = r.result["message"];
  EXPECT_NE(msg.find("/nonexistent-akabox-src"), std::string::npos) << msg;
  EXPECT_NE(msg.find("No such file or directory"), std::string::npos) << msg;
  EXPECT_TRUE(r.out.empty());
}

TEST_F(BoxTest, MissingCommandIs127) {
  BoxRun r = run({}, {"/no/such/command"});
  EXPECT_EQ(r.exitStatus, 127);
  EXPECT_EQ(r.result["status"], "setup-failed");
  EXPECT_NE(r.result["message"].get<std::string>().find("cannot execute"), std::string::npos);
}

TEST_F(BoxTest, BadSpecFileIsRejectedClearly) {
  std::string spec = tmp_ + "/spec.json";
  std::ofstream(spec) << R"({"memory": "lots", "command": ["/bin/true"]})";
  BoxRun r = run({"--spec", spec}, {});
  EXPECT_EQ(r.exitStatus, 125);
  EXPECT_EQ(r.result["status"], "setup-failed");
  EXPECT_NE(r.result["message"].get<std::string>().find("'memory'"), std::string::npos) << r.result.dump();
}

TEST_F(BoxTest, DevicePassthroughIsBoundAndAllowed) {
  // A node with /dev/fuse's numbers (anyone may open it) made by the test, passed with --device.
  std::string node = tmp_ + "/fusedev";
  ASSERT_EQ(::mknod(node.c_str(), S_IFCHR | 0666, makedev(10, 229)), 0);
  ::chmod(node.c_str(), 0666);
  BoxRun r = run({"--device", node}, {probe(), "devopen", "/dev/fusedev"});
  EXPECT_EQ(value(r.out, "devopen"), "ok") << r.out << r.err;
  // Bound elsewhere without --device, the same node is unusable (nodev bind).
  BoxRun b = run({"--bind", node + ":/tmp/fusedev"}, {probe(), "devopen", "/tmp/fusedev"});
  EXPECT_EQ(value(b.out, "devopen"), "Permission denied") << b.out;
}

TEST_F(BoxTest, DeviceCgroupRefusesANodeBoundByHandWithoutNodev) {
  // The mount flag is lifted (dev), so only the device cgroup stands between the sandbox and
  // the node: the open must fail with EPERM, the device cgroup's answer, not nodev's EACCES.
  std::string node = tmp_ + "/fusedev";
  ASSERT_EQ(::mknod(node.c_str(), S_IFCHR | 0666, makedev(10, 229)), 0);
  ::chmod(node.c_str(), 0666);
  BoxRun denied = run({"--bind", node + ":/tmp/fusedev:ro,dev"}, {probe(), "devopen", "/tmp/fusedev"});
  EXPECT_EQ(value(denied.out, "devopen"), "Operation not permitted") << denied.out << denied.err;
  BoxRun allowed = run({"--device", node, "--bind", node + ":/tmp/fusedev:dev"}, {probe(), "devopen", "/tmp/fusedev"});
  EXPECT_EQ(value(allowed.out, "devopen"), "ok") << allowed.out << allowed.err;
}

}  // namespace
}  // namespace akabox_test

namespace akabox_test {
namespace {

TEST_F(BoxTest, PreparedRootDirectoryIsTheWholeReadOnlyView) {
  std::string root = tmp_ + "/rootfs";
  ASSERT_EQ(::mkdir(root.c_str(), 0755), 0);
  ASSERT_EQ(::mkdir((root + "/bin").c_str(), 0755), 0);
  ASSERT_EQ(::mkdir((root + "/etc").c_str(), 0755), 0);
  std::ofstream(root + "/etc/marker") << "prepared-root";
  std::filesystem::copy_file(probeBin(), root + "/bin/probe");
  BoxRun r = run({"--root", root}, {"/bin/probe", "read", "/etc/marker"});
  EXPECT_EQ(r.exitStatus, 0) << r.err << r.result.dump();
  EXPECT_NE(r.out.find("content=prepared-root"), std::string::npos) << r.out;
  BoxRun usr = run({"--root", root}, {"/bin/probe", "read", "/usr/bin/env"});
  EXPECT_EQ(value(usr.out, "read"), "No such file or directory") << "the host's /usr leaked into a prepared root";
  BoxRun w = run({"--root", root}, {"/bin/probe", "write", "/etc"});
  EXPECT_EQ(value(w.out, "write"), "Read-only file system") << w.out;
}

}  // namespace
}  // namespace akabox_test

namespace akabox_test {
namespace {

// A bind whose destination is a symlink in the root (on the GPU machine /usr/local/cuda ->
// cuda-13.0) lands where the link points, built from scratch or copied from a template.
TEST_F(BoxTest, BindOntoASymlinkInTheRootFollowsIt) {
  std::string root = tmp_ + "/rootfs";
  ASSERT_EQ(::mkdir(root.c_str(), 0755), 0);
  ASSERT_EQ(::mkdir((root + "/bin").c_str(), 0755), 0);
  ASSERT_EQ(::mkdir((root + "/real").c_str(), 0755), 0);
  ASSERT_EQ(::symlink("real", (root + "/data").c_str()), 0);
  std::filesystem::copy_file(probeBin(), root + "/bin/probe");
  std::string data = tmp_ + "/data";
  ASSERT_EQ(::mkdir(data.c_str(), 0755), 0);
  std::ofstream(data + "/marker") << "bound-through-link";
  BoxRun r = run({"--root", root, "--bind", data + ":/data"}, {"/bin/probe", "read", "/real/marker"});
  EXPECT_EQ(r.exitStatus, 0) << r.err << r.result.dump();
  EXPECT_NE(r.out.find("content=bound-through-link"), std::string::npos) << r.out << r.err;
}

// Ignored signals survive exec: a caller that ignores SIGCHLD and SIGPIPE must neither lose
// the command's status (the kernel would reap the init by itself) nor hand them on. Nor any
// other: the init resets those the kernel lists as ignored, so a low, a high and the last
// real-time signal are among them (the list is a 64-bit mask).
TEST_F(BoxTest, CallerIgnoringSigchldAndSigpipeChangesNothingInside) {
  // akabox's caller (the test's child, right before it execs akabox) ignores them.
  inChild_ = [] {
    ::signal(SIGCHLD, SIG_IGN);
    ::signal(SIGPIPE, SIG_IGN);
    ::signal(SIGUSR1, SIG_IGN);
    ::signal(SIGRTMIN + 5, SIG_IGN);
    ::signal(SIGRTMAX, SIG_IGN);
  };
  BoxRun r = run({}, {"/bin/sh", "-c", "grep SigIgn /proc/self/status; exit 3"});
  EXPECT_EQ(r.exitStatus, 3) << r.err << r.result.dump();
  EXPECT_EQ(r.result["status"], "exited");
  EXPECT_NE(r.out.find("SigIgn:\t0000000000000000"), std::string::npos) << r.out;
}

TEST_F(BoxTest, RestrictiveCallerUmaskStillGivesAUsableSandbox) {
  mode_t old = ::umask(077);
  BoxRun r = run({}, {probe(), "read", "/etc/passwd"});
  ::umask(old);
  EXPECT_EQ(r.exitStatus, 0) << r.err;
  EXPECT_NE(r.out.find("read=ok"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("akabox:x:1000:1000"), std::string::npos) << r.out;
}

// An /etc file too large to copy into the root (over 1 MiB) is bound read-only instead, on
// every path that builds the root: the init, a template's builder, and akabox's mount thread,
// whose /etc copy runs on a thread of its own and leaves the bind to the mount thread.
TEST_F(BoxTest, LargeEtcFileIsBoundReadOnly) {
  HostEtcLock lock;  // it changes what the host's /etc shows while it runs
  const std::string etc = "/etc/gai.conf";  // a file akabox copies; comments harm no one
  const std::string before = readAll(etc);
  if (before.empty()) GTEST_SKIP() << etc << " is missing or empty here";
  std::string big = before;
  while (big.size() <= (1u << 20)) big += "# " + marker_ + ": a line to make this file too large to copy\n";
  const std::string file = tmp_ + "/gai.conf";
  {
    std::ofstream out(file);
    out << big;
  }
  ASSERT_EQ(::mount(file.c_str(), etc.c_str(), nullptr, MS_BIND, nullptr), 0);
  BoxRun r = run({}, {"/bin/sh", "-c",
                      "wc -c < /etc/gai.conf; grep -c ' /etc/gai.conf ' /proc/self/mountinfo; "
                      "if echo x 2>/dev/null >> /etc/gai.conf; then echo writable; else echo read-only; fi"});
  ASSERT_EQ(::umount2(etc.c_str(), MNT_DETACH), 0);
  EXPECT_EQ(r.exitStatus, 0) << r.err;
  EXPECT_EQ(r.out, std::to_string(big.size()) + "\n1\nread-only\n") << r.err;
  EXPECT_EQ(readAll(etc), before) << "the host's file is as it was";
}

// When the command runs, the host's tree is detached and the root read-only, on every path.
// On the mount thread's (the "spin" mode here) the namespace is handed to the init before
// that is done, and the test slows the thread down there (AKABOX_TEST_SLOW_DETACH, 100 ms):
// a go signal sent before the build's end would let the command see /.oldroot.
TEST_F(BoxTest, TheHostTreeIsDetachedAndTheRootReadOnlyWhenTheCommandRuns) {
  inChild_ = [] { ::setenv("AKABOX_TEST_SLOW_DETACH", "1", 1); };
  BoxRun r = run({}, {"/bin/sh", "-c", "cat /proc/self/mountinfo; echo ===; cat /etc/passwd"});
  // Once (2026-12-06, ctest -j2, spin mode) this exited 125 with nothing on stderr; not seen in
  // 40 runs since under load. akabox's result says which side gave up, if it comes again.
  EXPECT_EQ(r.exitStatus, 0) << r.err << "\nresult: " << r.result.dump();
  const auto sep = r.out.find("===\n");
  ASSERT_NE(sep, std::string::npos) << r.out;
  int mounts = 0;
  bool rootSeen = false;
  std::istringstream in(r.out.substr(0, sep));
  for (std::string line; std::getline(in, line);) {
    std::istringstream f(line);
    std::string id, parent, dev, root, point, options;
    f >> id >> parent >> dev >> root >> point >> options;
    ++mounts;
    EXPECT_NE(point.rfind("/.oldroot", 0), 0u) << "the host's tree is still attached: " << line;
    if (point == "/") {
      rootSeen = true;
      EXPECT_EQ(options.rfind("ro,", 0), 0u) << "the root is writable: " << line;
    }
  }
  EXPECT_TRUE(rootSeen) << r.out;
  EXPECT_GT(mounts, 5) << r.out;
  EXPECT_NE(r.out.find("akabox:x:1000:1000", sep), std::string::npos) << r.out;

  // With a workspace, where the namespace is entered once the workspace is bound.
  const std::string ws = tmp_ + "/ws";
  ASSERT_EQ(::mkdir(ws.c_str(), 0777), 0);
  ::chmod(ws.c_str(), 0777);
  BoxRun w = run({"--workspace", ws}, {"/bin/sh", "-c", "pwd; grep -c ' /.oldroot' /proc/self/mountinfo; awk '$5 == \"/\" {print substr($6, 1, 3)}' /proc/self/mountinfo"});
  EXPECT_EQ(w.out, "/workspace\n0\nro,\n") << w.err;
}

std::vector<std::string> templateFiles(const std::string& dir) {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec))
    if (e.path().filename().string()[0] != '.') out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

// --mount-template: the first run builds and keeps the template, the next copies it; a new
// mount over a path the root takes from the host gives a new one and the stale one goes;
// cleanup removes it all.
TEST_F(BoxTest, MountTemplateIsKeptReusedRenewedAndCleanedUp) {
  HostEtcLock lock;  // the whole test: it counts on the host's state between its runs
  std::string ws = tmp_ + "/ws";
  ASSERT_EQ(::mkdir(ws.c_str(), 0755), 0);
  ASSERT_EQ(::chmod(ws.c_str(), 0777), 0);
  BoxRun a = run({"--mount-template", "--workspace", ws}, {probe(), "read", "/etc/passwd"});
  EXPECT_EQ(a.exitStatus, 0) << a.err;
  EXPECT_NE(a.out.find("akabox:x:1000:1000:akabox:/workspace"), std::string::npos) << a.out;
  std::vector<std::string> first = templateFiles(templateDir());
  ASSERT_EQ(first.size(), 1u);
  std::string mounts = readAll("/proc/self/mountinfo");
  EXPECT_NE(mounts.find(templateDir() + "/" + first[0]), std::string::npos) << "the template is kept as a mount";

  // The copy is the sandbox's own: what one run writes to its /tmp and workspace, the next
  // does not see in /tmp, and the root stays read-only.
  BoxRun w = run({"--mount-template", "--workspace", ws},
                 {"/bin/sh", "-c", "echo x > /tmp/mark && echo y > /workspace/mark && touch /etc/new 2>&1"});
  EXPECT_NE(w.exitStatus, 0);
  EXPECT_NE(w.out.find("Read-only file system"), std::string::npos) << w.out << w.err;
  BoxRun b = run({"--mount-template", "--workspace", ws}, {"/bin/sh", "-c", "ls /tmp; cat /workspace/mark"});
  EXPECT_EQ(b.exitStatus, 0) << b.err;
  EXPECT_EQ(b.out, "y\n");
  EXPECT_EQ(templateFiles(templateDir()), first) << "the same layout copies the same template";

  // A mount elsewhere on the host leaves the template as it is (where the kernel names mounts
  // by unique ids, Linux 6.8+; before, any change to the mount table renews it).
  std::string extra = tmp_ + "/hostmount";
  ASSERT_EQ(::mkdir(extra.c_str(), 0755), 0);
  ASSERT_EQ(::mount("tmpfs", extra.c_str(), "tmpfs", 0, "size=64k"), 0);
  BoxRun elsewhere = run({"--mount-template", "--workspace", ws}, {probe(), "exit", "0"});
  ::umount2(extra.c_str(), MNT_DETACH);
  EXPECT_EQ(elsewhere.exitStatus, 0) << elsewhere.err;
  struct statx sx {};
  const bool uniqueMountIds = ::statx(AT_FDCWD, "/", 0, 0x00004000U /* STATX_MNT_ID_UNIQUE */, &sx) == 0 && (sx.stx_mask & 0x00004000U);
  if (uniqueMountIds) {
    EXPECT_EQ(templateFiles(templateDir()), first) << "an unrelated host mount renewed the template";
  }

  // A mount over a path the root takes from the host (/etc/hosts bound onto itself: the same
  // file, only the mount is new) gives a new template that replaces the stale one.
  ASSERT_EQ(::mount("/etc/hosts", "/etc/hosts", nullptr, MS_BIND, nullptr), 0);
  BoxRun c = run({"--mount-template", "--workspace", ws}, {probe(), "read", "/etc/passwd"});
  ASSERT_EQ(::umount2("/etc/hosts", MNT_DETACH), 0);
  EXPECT_EQ(c.exitStatus, 0) << c.err;
  std::vector<std::string> renewed = templateFiles(templateDir());
  ASSERT_EQ(renewed.size(), 1u);
  EXPECT_NE(renewed[0], first[0]);
  EXPECT_EQ(renewed[0].substr(0, 16), first[0].substr(0, 16)) << "same layout, other host state";
  EXPECT_EQ(readAll("/proc/self/mountinfo").find(templateDir() + "/" + first[0]), std::string::npos);

  EXPECT_EQ(removeTemplates(), 0);
  EXPECT_TRUE(templateFiles(templateDir()).empty());
  EXPECT_EQ(readAll("/proc/self/mountinfo").find(templateDir()), std::string::npos);
}

// A spawn hands the init the template its layout used last before it checks the host (the
// check runs beside the set-up): when the host changed in between, the command must still
// see the host as it is now, and the dropped first attempt must leave nothing behind.
TEST_F(BoxTest, MountTemplateTakenBeforeItsCheckIsNeverUsedStale) {
  HostEtcLock lock;  // the whole test: it counts on the host's state between its runs
  const std::string etc = "/etc/gai.conf";  // copied into the template; a comment more harms no one
  const std::string before = readAll(etc);
  if (before.empty()) GTEST_SKIP() << etc << " is missing or empty here";
  BoxRun a = run({"--mount-template"}, {"/bin/cat", etc});
  ASSERT_EQ(a.exitStatus, 0) << a.err;
  EXPECT_EQ(a.out, before);
  std::vector<std::string> first = templateFiles(templateDir());
  ASSERT_EQ(first.size(), 1u);
  // The layout's last template is named beside it.
  char last[256] = {};
  const std::string link = templateDir() + "/.last-" + first[0].substr(0, 16);
  ASSERT_GT(::readlink(link.c_str(), last, sizeof last - 1), 0) << link;
  EXPECT_EQ(std::string(last), first[0]);

  // The file with other content on the host: the template's copy is stale now.
  const std::string changed = before + "# " + marker_ + "\n";
  const std::string file = tmp_ + "/gai.conf";
  {
    std::ofstream out(file);
    out << changed;
  }
  ASSERT_EQ(::mount(file.c_str(), etc.c_str(), nullptr, MS_BIND, nullptr), 0);
  // The second attempt's command must still get the caller's scheduling policy (not the
  // SCHED_BATCH akabox took for the first) and CPU set.
  BoxRun b = run({"--mount-template"},
                 {"/bin/sh", "-c", "cat " + etc + "; awk '{print \"policy=\" $41}' /proc/self/stat; grep ^Cpus_allowed_list /proc/self/status"});
  BoxRun c = run({"--mount-template"}, {"/bin/cat", etc});
  ASSERT_EQ(::umount2(etc.c_str(), MNT_DETACH), 0);
  EXPECT_EQ(b.exitStatus, 0) << b.err;
  const std::string mine = readAll("/proc/self/status");
  const size_t at = mine.find("Cpus_allowed_list:");
  ASSERT_NE(at, std::string::npos);
  EXPECT_EQ(b.out, changed + "policy=0\n" + mine.substr(at, mine.find('\n', at) + 1 - at))
      << "the command ran in the stale template, or got akabox's policy or CPU set";
  EXPECT_EQ(b.result["status"], "exited") << b.result.dump();
  EXPECT_EQ(c.out, changed);
  std::vector<std::string> renewed = templateFiles(templateDir());
  ASSERT_EQ(renewed.size(), 1u);
  EXPECT_NE(renewed[0], first[0]);
  std::fill(std::begin(last), std::end(last), '\0');
  ASSERT_GT(::readlink(link.c_str(), last, sizeof last - 1), 0);
  EXPECT_EQ(std::string(last), renewed[0]) << "the layout's last template is the new one";

  // And back: the host as it was gives the first template's name again (rebuilt).
  BoxRun d = run({"--mount-template"}, {"/bin/cat", etc});
  EXPECT_EQ(d.out, before);
  EXPECT_EQ(templateFiles(templateDir()), first);

  EXPECT_EQ(removeTemplates(), 0);
  EXPECT_EQ(::access(link.c_str(), F_OK), -1) << "cleanup removes the layout's link too";
}

// The init of a dropped attempt shares akabox's memory; killed while it holds a lock of that
// heap, it left the lock held, and the second attempt's fork (the new template's build) waited
// forever. Here the init allocates all the while akabox checks the template
// (AKABOX_TEST_HEAP_CHURN), five times over: each run must end, with the host's new content.
TEST_F(BoxTest, ADroppedAttemptsInitEndsOutsideMallocAndTheRetryCompletes) {
  HostEtcLock lock;  // the whole test: it counts on the host's state between its runs
  const std::string etc = "/etc/gai.conf";
  const std::string before = readAll(etc);
  if (before.empty()) GTEST_SKIP() << etc << " is missing or empty here";
  for (int round = 0; round < 5; ++round) {
    BoxRun a = run({"--mount-template"}, {"/bin/cat", etc});
    ASSERT_EQ(a.exitStatus, 0) << a.err;
    // Another content on the host each round: the template the layout used last is stale.
    const std::string changed = before + "# " + marker_ + " " + std::to_string(round) + "\n";
    const std::string file = tmp_ + "/gai.conf";
    {
      std::ofstream out(file);
      out << changed;
    }
    ASSERT_EQ(::mount(file.c_str(), etc.c_str(), nullptr, MS_BIND, nullptr), 0);
    inChild_ = [] { ::setenv("AKABOX_TEST_HEAP_CHURN", "1", 1); };
    const pid_t pid = start({"--mount-template"}, {"/bin/cat", etc});
    const bool ended = waitWithin(pid, 30);
    inChild_ = nullptr;
    ASSERT_EQ(::umount2(etc.c_str(), MNT_DETACH), 0);
    ASSERT_TRUE(ended) << "round " << round << ": akabox hung after it dropped the stale template";
    BoxRun b = finish(pid);
    EXPECT_EQ(b.exitStatus, 0) << b.err;
    EXPECT_EQ(b.out, changed) << "round " << round;
  }
  EXPECT_EQ(removeTemplates(), 0);
}

// Specs with ever new mount points would each keep a template: their number stays bounded.
TEST_F(BoxTest, MountTemplatesStayBoundedWithManyLayouts) {
  for (int i = 0; i < 33; ++i) {
    BoxRun r = run({"--mount-template", "--tmpfs", "/layout" + std::to_string(i)}, {probe(), "exit", "0"});
    ASSERT_EQ(r.exitStatus, 0) << r.err;
    ASSERT_LE(templateFiles(templateDir()).size(), 32u) << "after layout " << i;
  }
  EXPECT_EQ(templateFiles(templateDir()).size(), 1u) << "past the cap only the newest is kept";
  EXPECT_EQ(removeTemplates(), 0);
  EXPECT_EQ(readAll("/proc/self/mountinfo").find(templateDir()), std::string::npos);
}

}  // namespace
}  // namespace akabox_test
