// The real akad driven by the real akactl on a temporary socket and state dir.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <grp.h>

#include <nlohmann/json.hpp>
#include <fstream>
#include <sstream>
#include <thread>

#include "akad/version.h"
#include "common/client.h"
#include "common/protocol.h"
#include "tests/daemon/harness.h"

namespace akad::test {
namespace {

using nlohmann::json;

class DaemonTest : public ::testing::Test {
 protected:
  void SetUp() override {
    paths_ = {dir_ / "run/akad.sock", dir_ / "state", writeFakeTasks(dir_.path())};
    startDaemon();
  }
  void TearDown() override {
    if (daemon_) {
      pid_t pid = daemon_->pid();
      daemon_.reset();
      EXPECT_FALSE(processExists(pid)) << "akad " << pid << " outlived its test";
    }
  }
  void startDaemon() {
    auto d = DaemonProcess::start(paths_);
    ASSERT_TRUE(d) << d.error().message;
    daemon_ = std::move(*d);
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

  TempDir dir_;
  DaemonProcess::Paths paths_;
  std::unique_ptr<DaemonProcess> daemon_;
};

TEST(Versions, AkadAndAkactlPrintTheirVersion) {
  for (const auto& bin : {akadBinary(), akactlBinary()}) {
    auto r = runCommand({bin.string(), "--version"});
    EXPECT_EQ(r.exitCode, 0) << r.err;
    EXPECT_NE(r.out.find(kVersion), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("protocol 1"), std::string::npos) << r.out;
  }
}

TEST_F(DaemonTest, InfoHumanAndJson) {
  auto human = ctl({"info"});
  ASSERT_EQ(human.exitCode, 0) << human.err;
  EXPECT_NE(human.out.find(paths_.socket.string()), std::string::npos) << human.out;
  EXPECT_NE(human.out.find("runs stay queued"), std::string::npos) << human.out;
  EXPECT_NE(human.out.find("pid " + std::to_string(daemon_->pid())), std::string::npos) << human.out;

  json info = ctlJson({"info"});
  EXPECT_EQ(info.at("version"), kVersion);
  EXPECT_EQ(info.at("protocol_version"), kProtocolVersion);
  EXPECT_EQ(info.at("pid"), daemon_->pid());
  EXPECT_EQ(info.at("socket"), paths_.socket.string());
  EXPECT_EQ(info.at("state_dir"), paths_.stateDir.string());
  EXPECT_EQ(info.at("peer").at("uid"), ::geteuid());
  EXPECT_EQ(info.at("peer").at("gid"), ::getegid());
  EXPECT_GE(info.at("uptime_s").get<double>(), 0.0);
  EXPECT_EQ(info.at("counts").at("runs"), 0);
  EXPECT_NE(info.at("executor").get<std::string>().find("none"), std::string::npos);
  // --json also works after the subcommand.
  auto after = ctl({"info", "--json"});
  EXPECT_EQ(json::parse(after.out).at("pid"), daemon_->pid());
}

TEST_F(DaemonTest, SocketIsMode0660InACreatedDirectory) {
  struct stat st {};
  ASSERT_EQ(::stat(paths_.socket.c_str(), &st), 0);
  EXPECT_TRUE(S_ISSOCK(st.st_mode));
  EXPECT_EQ(st.st_mode & 07777, 0660u);
  EXPECT_TRUE(std::filesystem::is_directory(paths_.socket.parent_path()));
}

TEST_F(DaemonTest, SocketGroupIsAppliedAndAnUnknownGroupRefused) {
  ASSERT_EQ(daemon_->stop(SIGTERM), 0);
  auto bad = DaemonProcess::start(paths_, {"--socket-group", "no-such-group-akad"});
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message.find("no-such-group-akad"), std::string::npos) << bad.error().message;
  group* g = ::getgrnam("daemon");
  if (g == nullptr) GTEST_SKIP() << "no group \"daemon\" on this machine";
  auto d = DaemonProcess::start(paths_, {"--socket-group", "daemon"});
  ASSERT_TRUE(d) << d.error().message;
  daemon_ = std::move(*d);
  struct stat st {};
  ASSERT_EQ(::stat(paths_.socket.c_str(), &st), 0);
  EXPECT_EQ(st.st_gid, g->gr_gid);
  EXPECT_EQ(st.st_mode & 07777, 0660u);
}

TEST_F(DaemonTest, AttemptUidsThatHoldTheTrustedUidOrAreTooFewAreRefused) {
  ASSERT_EQ(daemon_->stop(SIGTERM), 0);
  auto shared = DaemonProcess::start(paths_, {"--workers", "1", "--sandbox-uid", "700000005", "--attempt-uids",
                                              "700000001-700000010"});
  ASSERT_FALSE(shared);
  EXPECT_NE(shared.error().message.find("must not share the trusted ones' uid"), std::string::npos)
      << shared.error().message;
  auto few = DaemonProcess::start(paths_, {"--workers", "3", "--attempt-uids", "700000001-700000002"});
  ASSERT_FALSE(few);
  EXPECT_NE(few.error().message.find("fewer uids than --workers"), std::string::npos) << few.error().message;
  auto bad = DaemonProcess::start(paths_, {"--attempt-uids", "0-5"});
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message.find("FIRST-LAST"), std::string::npos) << bad.error().message;
  auto d = DaemonProcess::start(paths_, {});
  ASSERT_TRUE(d) << d.error().message;
  daemon_ = std::move(*d);
}

TEST_F(DaemonTest, SubmitStatusCancelThenRestartKeepsTheRun) {
  json submitted = ctlJson({"submit", "cpu", "hip2hip/gemm", "--attempts", "2", "--label", "first", "--agent", "noop"});
  std::string id = submitted.at("run").at("id");
  EXPECT_EQ(submitted.at("run").at("state"), "queued");
  EXPECT_EQ(submitted.at("run").at("counts").at("total"), 6);

  auto list = ctl({"status"});
  ASSERT_EQ(list.exitCode, 0) << list.err;
  EXPECT_NE(list.out.find(id), std::string::npos);
  EXPECT_NE(list.out.find("queued"), std::string::npos);
  json one = ctlJson({"status", id});
  EXPECT_EQ(one.at("attempts").size(), 6u);
  EXPECT_EQ(one.at("run").at("agent"), "noop");

  auto cancelled = ctl({"cancel", id});
  ASSERT_EQ(cancelled.exitCode, 0) << cancelled.err;
  EXPECT_NE(cancelled.out.find("cancelled"), std::string::npos);

  ASSERT_EQ(daemon_->stop(SIGTERM), 0) << daemon_->log();
  startDaemon();
  json after = ctlJson({"status", id});
  EXPECT_EQ(after.at("run").at("state"), "cancelled");
  EXPECT_EQ(after.at("run").at("label"), "first");
  EXPECT_EQ(after.at("run").at("counts").at("cancelled"), 6);
  EXPECT_EQ(ctlJson({"info"}).at("counts").at("runs"), 1);
}

TEST_F(DaemonTest, AcknowledgedSubmitSurvivesKill9) {
  json submitted = ctlJson({"submit", "cpu/softmax"});
  std::string id = submitted.at("run").at("id");
  EXPECT_EQ(daemon_->stop(SIGKILL), 128 + SIGKILL);
  // The socket file is left behind by kill -9: the restart must treat it as stale.
  EXPECT_TRUE(std::filesystem::exists(paths_.socket));
  startDaemon();
  json run = ctlJson({"status", id});
  EXPECT_EQ(run.at("run").at("state"), "queued");
  EXPECT_EQ(run.at("attempts").size(), 1u);
  EXPECT_NE(daemon_->log().find("stale"), std::string::npos) << daemon_->log();
}

TEST_F(DaemonTest, SigtermAndSigintExitZeroAndRemoveTheSocket) {
  for (int signo : {SIGTERM, SIGINT}) {
    // An open watch stream is answered "shutting down" instead of holding the daemon up.
    std::string id = ctlJson({"submit", "cpu"}).at("run").at("id");
    auto watch = ChildProcess::spawn({akactlBinary().string(), "--socket", paths_.socket.string(), "watch", id});
    ASSERT_TRUE(watch);
    for (int i = 0; i < 500 && (*watch)->stdoutText().find("run.submitted") == std::string::npos; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    ASSERT_NE((*watch)->stdoutText().find("run.submitted"), std::string::npos);
    pid_t pid = daemon_->pid();
    EXPECT_EQ(daemon_->stop(signo), 0) << daemon_->log();
    EXPECT_FALSE(std::filesystem::exists(paths_.socket));
    EXPECT_FALSE(processExists(pid));
    auto w = (*watch)->wait(std::chrono::seconds(10));
    EXPECT_EQ(w.exitCode, 1) << w.err;
    EXPECT_NE(w.err.find("shutting down"), std::string::npos) << w.err;
    startDaemon();
  }
}

TEST_F(DaemonTest, SecondDaemonOnALiveSocketRefusesAndTheFirstKeepsServing) {
  DaemonProcess::Paths other = paths_;
  other.stateDir = dir_ / "state2";
  auto second = DaemonProcess::start(other);
  ASSERT_FALSE(second);
  EXPECT_NE(second.error().message.find("exited with 1"), std::string::npos) << second.error().message;
  EXPECT_NE(second.error().message.find("another akad"), std::string::npos) << second.error().message;
  EXPECT_TRUE(std::filesystem::exists(paths_.socket));
  EXPECT_EQ(ctl({"ping"}).exitCode, 0);

  // Same state dir, other socket: refused too (two executors on one queue).
  DaemonProcess::Paths sameState = paths_;
  sameState.socket = dir_ / "other.sock";
  auto third = DaemonProcess::start(sameState);
  ASSERT_FALSE(third);
  EXPECT_NE(third.error().message.find("state dir"), std::string::npos) << third.error().message;
}

// A tenant policy with problems stops akad before it serves anyone: it exits with every problem
// of the file named, and no socket is left for a client to find.
TEST(TenantPolicyAtStart, ABadPolicyFileIsRefusedWithEveryProblemAndNothingServes) {
  TempDir dir;
  const fs::path policy = dir / "tenants.yaml";
  std::ofstream(policy) << "admins: [7]\nlimits: {max_connections: lots, requests_per_second: -1}\nquota: 3\n";
  DaemonProcess::Paths paths{dir / "run/akad.sock", dir / "state", writeFakeTasks(dir.path())};
  auto d = DaemonProcess::start(paths, {"--tenants", policy.string()});
  ASSERT_FALSE(d) << "akad started with a bad tenant policy";
  const std::string& m = d.error().message;
  EXPECT_NE(m.find("exited with 2"), std::string::npos) << m;
  const std::string file = "tenant policy " + policy.string() + ": ";
  for (const std::string& needle : {file + "limits.max_connections must be a number, not 'lots'",
                                    file + "limits.requests_per_second must be between 0 and 1000000, not -1",
                                    file + "unknown key 'quota' (known: admins, limits, tenants)"})
    EXPECT_NE(m.find(needle), std::string::npos) << needle << " not in:\n" << m;
  EXPECT_FALSE(fs::exists(paths.socket));
}

TEST_F(DaemonTest, StaleSocketFileIsRemoved) {
  ASSERT_EQ(daemon_->stop(SIGKILL), 128 + SIGKILL);
  std::filesystem::remove(paths_.socket);
  // A socket nobody listens on: bound, then its owner closed it.
  int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strcpy(addr.sun_path, paths_.socket.c_str());
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ::close(fd);
  ASSERT_TRUE(std::filesystem::is_socket(paths_.socket));
  startDaemon();
  EXPECT_EQ(ctl({"ping"}).exitCode, 0);
}

TEST_F(DaemonTest, RefusesToReplaceAFileThatIsNotASocket) {
  ASSERT_EQ(daemon_->stop(SIGTERM), 0);
  { std::ofstream(paths_.socket) << "precious"; }
  auto d = DaemonProcess::start(paths_);
  ASSERT_FALSE(d);
  EXPECT_NE(d.error().message.find("not a socket"), std::string::npos) << d.error().message;
  std::ifstream in(paths_.socket);
  std::string content;
  in >> content;
  EXPECT_EQ(content, "precious");
}

TEST_F(DaemonTest, WatchStreamsEventsUntilTheRunEnds) {
  std::string id = ctlJson({"submit", "cpu/*"}).at("run").at("id");
  auto watch = ChildProcess::spawn(
      {akactlBinary().string(), "--socket", paths_.socket.string(), "--json", "watch", id});
  ASSERT_TRUE(watch);
  for (int i = 0; i < 500 && (*watch)->stdoutText().find("run.submitted") == std::string::npos; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_TRUE((*watch)->running()) << "watch ended before the run did";
  ASSERT_EQ(ctl({"cancel", id}).exitCode, 0);
  auto w = (*watch)->wait(std::chrono::seconds(10));
  ASSERT_EQ(w.exitCode, 0) << w.err;
  // One JSON object per line: the replayed submit, the live cancel, then the final result.
  std::vector<json> lines;
  std::istringstream in(w.out);
  for (std::string line; std::getline(in, line);) lines.push_back(json::parse(line));
  ASSERT_EQ(lines.size(), 3u) << w.out;
  EXPECT_EQ(lines[0].at("kind"), "run.submitted");
  EXPECT_EQ(lines[1].at("kind"), "run.state");
  EXPECT_EQ(lines[1].at("data").at("state"), "cancelled");
  EXPECT_LT(lines[0].at("seq").get<long>(), lines[1].at("seq").get<long>());
  EXPECT_EQ(lines[2].at("run").at("state"), "cancelled");

  // Watching a run that already ended replays and returns at once.
  auto again = ctl({"watch", id});
  EXPECT_EQ(again.exitCode, 0) << again.err;
  EXPECT_NE(again.out.find("ended: cancelled"), std::string::npos) << again.out;
}

}  // namespace
}  // namespace akad::test

namespace akad::test {
namespace {

// Files root writes where a local user could steer it: each case sets the trap a user could
// (a state dir of their own, a world-writable socket folder, a link where akad makes a file)
// and shows that akad refuses to start and writes nothing through it.
class SafeFilesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "needs root: the traps are about what root writes";
    victim_ = dir_ / "victim";
    std::ofstream(victim_) << "precious\n";
    ::chmod(victim_.c_str(), 0600);
  }
  std::string victim() const {
    std::ifstream in(victim_);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }
  Result<std::unique_ptr<DaemonProcess>> start(const fs::path& socket, const fs::path& state,
                                               const std::vector<std::string>& extra = {}) {
    std::vector<std::string> args = {"--workers", "0", "--gpus", "none"};
    args.insert(args.end(), extra.begin(), extra.end());
    return DaemonProcess::start({socket, state, writeFakeTasks(dir_.path())}, args);
  }
  // akad started with `flags` and a folder uid 65534 owns, then with one anyone can write: refused
  // each time, saying why (`refusal`: the first), and nothing is written there.
  void expectFolderOfOthersRefused(const std::string& name, std::vector<std::string> flags, const std::string& refusal) {
    const fs::path theirs = dir_ / ("their-" + name), open = dir_ / ("open-" + name);
    fs::create_directories(theirs);
    ASSERT_EQ(::chown(theirs.c_str(), 65534, 65534), 0);
    fs::create_directories(open);
    ::chmod(open.c_str(), 0777);
    const std::pair<fs::path, std::string> cases[] = {{theirs, refusal}, {open, "can be written by users other than its owner"}};
    for (const auto& [folder, why] : cases) {
      std::vector<std::string> args = flags;
      args.push_back(folder.string());
      auto d = start(dir_ / ("run-" + folder.filename().string()) / "akad.sock", dir_ / ("state-" + folder.filename().string()), args);
      ASSERT_FALSE(d) << "akad started on " << folder;
      EXPECT_NE(d.error().message.find(why), std::string::npos) << d.error().message;
      EXPECT_TRUE(fs::is_empty(folder)) << "akad wrote into the refused " << folder;
    }
  }
  TempDir dir_;
  fs::path victim_;
};

TEST_F(SafeFilesTest, AStateDirAnotherUserOwnsIsRefusedAndNothingIsWrittenThere) {
  const fs::path state = dir_ / "theirs";
  fs::create_directories(state);
  ASSERT_EQ(::chown(state.c_str(), 65534, 65534), 0);  // nobody's, as if a user had made it first
  auto d = start(dir_ / "run" / "akad.sock", state);
  ASSERT_FALSE(d) << "akad started on a state dir uid 65534 owns";
  EXPECT_NE(d.error().message.find("belongs to uid 65534"), std::string::npos) << d.error().message;
  EXPECT_TRUE(fs::is_empty(state)) << "akad wrote into the refused state dir";
}

TEST_F(SafeFilesTest, AStateDirUnderAFolderOthersCanWriteIsRefused) {
  const fs::path open = dir_ / "open";
  fs::create_directories(open);
  ::chmod(open.c_str(), 0777);  // writable by all and not sticky: anyone could swap what is inside
  auto d = start(dir_ / "run" / "akad.sock", open / "state");
  ASSERT_FALSE(d);
  EXPECT_NE(d.error().message.find("can be written by users other than its owner"), std::string::npos) << d.error().message;
}

// A trusted cache a user made (or could swap) would let them plant the binaries that time and
// check every candidate.
TEST_F(SafeFilesTest, ATrustedCacheAnotherUserOwnsOrOthersCanWriteIsRefused) {
  expectFolderOfOthersRefused("cache", {"--trusted-cache"}, "refusing --trusted-cache");

  // Its own, made by akad: accepted.
  auto ok = start(dir_ / "run3" / "akad.sock", dir_ / "state3", {"--trusted-cache", (dir_ / "mine").string()});
  ASSERT_TRUE(ok) << ok.error().message;
  EXPECT_EQ(fs::status(dir_ / "mine").permissions() & fs::perms::all, fs::perms::owner_all);
}

// The Slurm shared area holds the job specs that root runs on every node (with the akacheck path
// they name) and the agents' credential files: one another user owns or anyone can write is
// refused at start-up, before anything is written there.
TEST_F(SafeFilesTest, ASlurmSharedAreaAnotherUserOwnsOrOthersCanWriteIsRefused) {
  expectFolderOfOthersRefused("shared", {"--executor", "slurm", "--slurm-shared"}, "refusing --slurm-shared");
}

// The node program, as root on a node, is handed a job folder in a shared area another user owns:
// they could swap the folder or plant a link where its result goes (out-<job>-<restart>, here
// pointing at a root-only folder). It refuses before it writes anything, through the link or not.
TEST_F(SafeFilesTest, ANodeProgramRefusesAJobFolderAnotherUserCouldSwap) {
  const fs::path shared = dir_ / "their-area";
  const fs::path job = shared / "jobs" / "a1-x";
  fs::create_directories(job);
  std::ofstream(job / "spec.json") << "{}\n";
  const fs::path rootOnly = dir_ / "root-only";
  fs::create_directories(rootOnly);
  ::chmod(rootOnly.c_str(), 0700);
  fs::create_directory_symlink(rootOnly, job / "out-local-0");
  for (const fs::path& p : {shared, shared / "jobs", job, job / "spec.json"}) ASSERT_EQ(::lchown(p.c_str(), 65534, 65534), 0) << p;
  ASSERT_EQ(::lchown((job / "out-local-0").c_str(), 65534, 65534), 0);
  const fs::path tmp = dir_ / "node-tmp";
  fs::create_directories(tmp);
  auto r = runCommand({AKAD_TEST_NODE_BIN, "run", "--job", job.string()}, {"TMPDIR=" + tmp.string()});
  EXPECT_EQ(r.exitCode, 1) << r.err;
  EXPECT_NE(r.err.find("refusing the job folder"), std::string::npos) << r.err;
  EXPECT_TRUE(fs::is_empty(rootOnly)) << "the node program wrote through the planted link";
  EXPECT_TRUE(fs::is_empty(tmp)) << "the node program made a work folder for a job it should have refused";
}

TEST_F(SafeFilesTest, ASocketInAWorldWritableFolderIsRefused) {
  const fs::path shared = dir_ / "shared";
  fs::create_directories(shared);
  ::chmod(shared.c_str(), 01777);  // like /tmp
  auto d = start(shared / "akad.sock", dir_ / "state");
  ASSERT_FALSE(d);
  EXPECT_NE(d.error().message.find("refusing socket directory"), std::string::npos) << d.error().message;
  EXPECT_FALSE(fs::exists(shared / "akad.sock.lock"));
}

TEST_F(SafeFilesTest, PlantedLinksAtTheLockFilesAreNotFollowed) {
  // Links where akad makes its lock files: root would have opened (and with O_CREAT made) the
  // victim through them.
  fs::create_directories(dir_ / "run");
  fs::create_symlink(victim_, dir_ / "run" / "akad.sock.lock");
  auto d = start(dir_ / "run" / "akad.sock", dir_ / "state");
  ASSERT_FALSE(d) << "akad opened its socket lock through a link";
  fs::remove(dir_ / "run" / "akad.sock.lock");
  fs::create_directories(dir_ / "state2");
  fs::create_symlink(dir_ / "made-by-root", dir_ / "state2" / "akad.lock");
  auto e = start(dir_ / "run" / "akad.sock", dir_ / "state2");
  ASSERT_FALSE(e) << "akad opened its state lock through a link";
  EXPECT_FALSE(fs::exists(dir_ / "made-by-root")) << "a file was created through the planted link";
  EXPECT_EQ(victim(), "precious\n");
}

}  // namespace
}  // namespace akad::test
