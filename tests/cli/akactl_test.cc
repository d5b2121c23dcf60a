// akactl's contract: exit codes 0/1/2/3, --json on every subcommand, socket selection.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "common/protocol.h"
#include "tests/daemon/harness.h"

namespace akad::test {
namespace {

using nlohmann::json;

class AkactlTest : public ::testing::Test {
 protected:
  void SetUp() override {
    paths_ = {dir_ / "akad.sock", dir_ / "state", writeFakeTasks(dir_.path())};
    auto d = DaemonProcess::start(paths_);
    ASSERT_TRUE(d) << d.error().message;
    daemon_ = std::move(*d);
  }
  void TearDown() override {
    pid_t pid = daemon_->pid();
    daemon_.reset();
    EXPECT_FALSE(processExists(pid));
  }
  CommandResult ctl(const std::vector<std::string>& args) { return akactl(paths_.socket, args); }

  TempDir dir_;
  DaemonProcess::Paths paths_;
  std::unique_ptr<DaemonProcess> daemon_;
};

// Another local user binds the socket path first (a stale /run path, a typo'd --socket): akactl
// must not hand that process its request, and above all not the credentials in a submit.
TEST(Akactl, ASocketServedByAnotherUserIsRefusedBeforeAnythingIsSent) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to serve the socket as another user";
  TempDir dir;
  const fs::path open = dir / "open";
  fs::create_directories(open);
  ::chmod(dir.path().c_str(), 0711);
  ::chmod(open.c_str(), 0777);
  const fs::path sock = open / "akad.sock", got = open / "received";
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  pid_t pid = ::fork();
  if (pid == 0) {  // the impostor: uid 65534, records whatever a client sends
    ::close(ready[0]);
    if (::setgroups(0, nullptr) != 0 || ::setresgid(65534, 65534, 65534) != 0 || ::setresuid(65534, 65534, 65534) != 0) ::_exit(2);
    int s = ::socket(AF_UNIX, SOCK_STREAM, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, sock.c_str(), sizeof addr.sun_path - 1);
    if (::bind(s, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 || ::listen(s, 4) != 0) ::_exit(3);
    (void)!::write(ready[1], "r", 1);
    int c = ::accept(s, nullptr, nullptr);
    int out = ::open(got.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    char buf[4096];
    for (ssize_t n; c >= 0 && (n = ::read(c, buf, sizeof buf)) > 0;) (void)!::write(out, buf, static_cast<size_t>(n));
    ::_exit(0);
  }
  ::close(ready[1]);
  char byte = 0;
  ASSERT_EQ(::read(ready[0], &byte, 1), 1) << "the impostor did not start";
  ::close(ready[0]);
  auto r = runCommand({akactlBinary().string(), "--socket", sock.string(), "submit", "cpu", "--pass-env", "AKAD_TEST_KEY"},
                      {"AKAD_TEST_KEY=sk-do-not-leak"}, std::chrono::seconds(10));
  EXPECT_EQ(r.exitCode, 3) << r.out << r.err;
  EXPECT_NE(r.err.find("refusing to talk to"), std::string::npos) << r.err;
  // The impostor saw a connection and nothing on it.
  for (int i = 0; i < 100 && !fs::exists(got); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  ::kill(pid, SIGKILL);
  ::waitpid(pid, nullptr, 0);
  EXPECT_TRUE(fs::exists(got) ? fs::file_size(got) == 0 : true);
  std::ifstream in(got);
  std::stringstream ss;
  ss << in.rdbuf();
  EXPECT_EQ(ss.str().find("sk-do-not-leak"), std::string::npos);
}

TEST(Akactl, UnreachableDaemonExits3AndSaysWhereAndHow) {
  TempDir dir;
  fs::path missing = dir / "nobody-here.sock";
  for (const std::vector<std::string>& args : std::vector<std::vector<std::string>>{
           {"info"}, {"ping"}, {"status"}, {"submit", "cpu"}, {"watch", "r-1"}, {"cancel", "r-1"}}) {
    auto r = akactl(missing, args);
    EXPECT_EQ(r.exitCode, 3) << args[0] << ": " << r.err;
    EXPECT_NE(r.err.find(missing.string()), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("akad --socket"), std::string::npos) << r.err;
  }
  auto j = akactl(missing, {"--json", "info"});
  EXPECT_EQ(j.exitCode, 3);
  EXPECT_EQ(json::parse(j.out).at("error").at("code"), protocol::kUnreachable);
}

TEST(Akactl, UsageErrorsExit2) {
  TempDir dir;
  for (const std::vector<std::string>& args : std::vector<std::vector<std::string>>{
           {}, {"frobnicate"}, {"submit"}, {"submit", "cpu", "--attempts", "0"}, {"submit", "cpu", "--attempts", "x"},
           {"status", "--state", "sleeping"}, {"watch"}, {"cancel"}, {"info", "--no-such-flag"},
           {"submit", "cpu", "--option", "novalue"}}) {
    auto r = akactl(dir / "unused.sock", args);
    EXPECT_EQ(r.exitCode, 2) << (args.empty() ? "(none)" : args[0]) << ": " << r.out << r.err;
  }
  auto help = runCommand({akactlBinary().string(), "--help"});
  EXPECT_EQ(help.exitCode, 0);
  EXPECT_NE(help.out.find("Exit codes"), std::string::npos);
}

TEST_F(AkactlTest, DaemonErrorsExit1WithTheDaemonsMessage) {
  auto status = ctl({"status", "r-00000000"});
  EXPECT_EQ(status.exitCode, 1);
  EXPECT_NE(status.err.find("r-00000000"), std::string::npos) << status.err;
  EXPECT_EQ(ctl({"cancel", "r-00000000"}).exitCode, 1);
  EXPECT_EQ(ctl({"watch", "r-00000000"}).exitCode, 1);
  auto submit = ctl({"submit", "nosuchsuite"});
  EXPECT_EQ(submit.exitCode, 1);
  EXPECT_NE(submit.err.find("no tasks match"), std::string::npos) << submit.err;
  auto j = ctl({"--json", "submit", "nosuchsuite"});
  EXPECT_EQ(j.exitCode, 1);
  EXPECT_EQ(json::parse(j.out).at("error").at("code"), protocol::kNoTasksMatch);
  // Cancelling twice: the second is a conflict.
  std::string id = json::parse(ctl({"--json", "submit", "cpu"}).out).at("run").at("id");
  EXPECT_EQ(ctl({"cancel", id}).exitCode, 0);
  EXPECT_EQ(ctl({"cancel", id}).exitCode, 1);
}

TEST_F(AkactlTest, JsonOnEverySubcommand) {
  auto parse = [&](const std::vector<std::string>& args) {
    auto r = ctl(args);
    EXPECT_EQ(r.exitCode, 0) << r.err;
    return json::parse(r.out);
  };
  EXPECT_EQ(parse({"--json", "ping"}).at("pong"), true);
  EXPECT_EQ(parse({"ping", "--json", "--count", "20"}).at("count"), 20);
  EXPECT_EQ(parse({"info", "--json"}).at("protocol_version"), 1);
  json sub = parse({"submit", "--json", "cpu/softmax", "--option", "agent_time_limit_s=7", "--option", "gpu_model=H200", "--label", "j"});
  std::string id = sub.at("run").at("id");
  // Typed as JSON where they parse: a number stays a number, text stays text.
  EXPECT_EQ(sub.at("run").at("params").at("options").at("agent_time_limit_s"), 7);
  EXPECT_EQ(sub.at("run").at("params").at("options").at("gpu_model"), "H200");
  // Unknown options are refused at the border instead of being stored and ignored.
  auto unknown = ctl({"submit", "cpu/softmax", "--option", "mode=fast"});
  EXPECT_EQ(unknown.exitCode, 1);
  EXPECT_NE(unknown.err.find("unknown option \"mode\""), std::string::npos) << unknown.err;
  EXPECT_EQ(parse({"status", "--json"}).at("runs").at(0).at("id"), id);
  EXPECT_EQ(parse({"status", "--json", "--state", "queued"}).at("runs").size(), 1u);
  EXPECT_EQ(parse({"status", id, "--json"}).at("attempts").size(), 1u);
  EXPECT_EQ(parse({"cancel", id, "--json"}).at("run").at("state"), "cancelled");
  auto watch = ctl({"watch", id, "--json"});
  ASSERT_EQ(watch.exitCode, 0) << watch.err;
  std::istringstream lines(watch.out);
  std::string line, last;
  int count = 0;
  while (std::getline(lines, line)) {
    last = line;
    ++count;
    EXPECT_FALSE(json::parse(line, nullptr, false).is_discarded()) << line;
  }
  EXPECT_EQ(count, 3);
  EXPECT_EQ(json::parse(last).at("run").at("state"), "cancelled");
  // gpu_share: a whole number of attempts, 1 to 16; anything else is refused before a run exists.
  for (const char* bad : {"gpu_share=0", "gpu_share=17", "gpu_share=2.5", "gpu_share=\"4\""}) {
    auto refused = ctl({"submit", "cpu/softmax", "--option", bad});
    EXPECT_EQ(refused.exitCode, 1) << bad;
    EXPECT_NE(refused.err.find("option \"gpu_share\" must be a whole number"), std::string::npos) << bad << ": " << refused.err;
  }
  json sharing = parse({"submit", "--json", "cpu/softmax", "--gpu-share", "4"});
  EXPECT_EQ(sharing.at("run").at("params").at("options").at("gpu_share"), 4);
  EXPECT_EQ(parse({"cancel", sharing.at("run").at("id").get<std::string>(), "--json"}).at("run").at("state"), "cancelled");
}

TEST_F(AkactlTest, HumanOutputNamesTheRun) {
  auto sub = ctl({"submit", "cpu", "--attempts", "3"});
  ASSERT_EQ(sub.exitCode, 0) << sub.err;
  EXPECT_NE(sub.out.find("submitted run r-"), std::string::npos) << sub.out;
  EXPECT_NE(sub.out.find("6 attempt(s)"), std::string::npos) << sub.out;
  auto ping = ctl({"ping"});
  EXPECT_EQ(ping.exitCode, 0);
  EXPECT_NE(ping.out.find("pong"), std::string::npos);
}

TEST_F(AkactlTest, SocketComesFromAkadSocketWhenNoFlagIsGiven) {
  auto r = runCommand({akactlBinary().string(), "--json", "info"}, {"AKAD_SOCKET=" + paths_.socket.string()});
  ASSERT_EQ(r.exitCode, 0) << r.err;
  EXPECT_EQ(json::parse(r.out).at("pid"), daemon_->pid());
}

}  // namespace
}  // namespace akad::test
