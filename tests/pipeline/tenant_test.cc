// Tenants of one daemon, as real local users (made here with useradd and removed afterwards):
// one user's runs, attempts, logs, reports and snapshots are out of another's reach through
// every method the socket offers; admins (root) see everything; a user outside the socket's
// group cannot connect at all. Each user is an attacker trying the real akactl.
#include <gtest/gtest.h>

#include <grp.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "tests/pipeline/pipeline_daemon.h"

namespace akad::test {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

// A group and users of the test's own, removed (by name, which the test chose) when it ends.
class LocalUsers {
 public:
  LocalUsers() : tag_("akt" + std::to_string(::getpid() % 100000)) {
    ok_ = run({"/usr/sbin/groupadd", group()});
    for (const char* who : {"a", "b", "c"}) {
      ok_ = ok_ && run({"/usr/sbin/useradd", "--no-create-home", "--no-user-group", "--shell", "/usr/sbin/nologin",
                        "--gid", who == std::string("c") ? "nogroup" : group(), name(who)});
      if (ok_) made_.push_back(name(who));
    }
  }
  ~LocalUsers() {
    for (const std::string& u : made_) run({"/usr/sbin/userdel", u});
    run({"/usr/sbin/groupdel", group()});
  }
  bool ok() const { return ok_; }
  std::string group() const { return tag_ + "g"; }
  std::string name(const std::string& who) const { return tag_ + who; }

 private:
  static bool run(const std::vector<std::string>& argv) { return runCommand(argv, {}, 30s).exitCode == 0; }
  std::string tag_;
  bool ok_ = false;
  std::vector<std::string> made_;
};

class TenantTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "needs root to add users";
    ASSERT_TRUE(users_.ok()) << "cannot add local users (groupadd/useradd failed)";
    daemon_ = std::make_unique<PipelineDaemon>("tenant", PipelineDaemon::Timing::Quick);
    // The users must reach the socket: its folder is the test's 0700 temporary dir.
    ASSERT_EQ(::chmod(daemon_->paths().socket.parent_path().c_str(), 0711), 0);
    daemon_->start({"--socket-group", users_.group()});
  }
  void TearDown() override {
    if (!daemon_) return;
    daemon_->stop();
    daemon_->expectNothingLeft();
  }

  // akactl as user `who` ("a", "b": in the socket's group; "c": not).
  CommandResult as(const std::string& who, const std::vector<std::string>& args, std::chrono::seconds timeout = 60s) {
    const passwd* pw = ::getpwnam(users_.name(who).c_str());
    EXPECT_NE(pw, nullptr);
    std::vector<std::string> argv = {"/usr/bin/setpriv", "--reuid", std::to_string(pw->pw_uid), "--regid",
                                     std::to_string(pw->pw_gid), "--init-groups", "--",
                                     akactlBinary().string(), "--socket", daemon_->paths().socket.string()};
    argv.insert(argv.end(), args.begin(), args.end());
    // The user's working directory for files akactl writes (export).
    return runCommand(argv, {}, timeout);
  }
  json asJson(const std::string& who, std::vector<std::string> args, std::chrono::seconds timeout = 60s) {
    args.insert(args.begin(), "--json");
    auto r = as(who, args, timeout);
    EXPECT_EQ(r.exitCode, 0) << r.err << r.out;
    json j = json::parse(r.out, nullptr, false);
    EXPECT_FALSE(j.is_discarded()) << r.out;
    return j;
  }
  void expectDenied(const std::string& who, const std::vector<std::string>& args) {
    auto r = as(who, args);
    std::string line;
    for (const auto& a : args) line += a + " ";
    EXPECT_EQ(r.exitCode, 1) << line << ": " << r.out << r.err;
    EXPECT_TRUE(r.err.find("belongs to another user") != std::string::npos ||
                r.err.find("only an admin") != std::string::npos)
        << line << ": " << r.err;
  }

  LocalUsers users_;
  std::unique_ptr<PipelineDaemon> daemon_;
};

TEST_F(TenantTest, ATenantCanReadAndTouchOnlyItsOwnWork) {
  // User a runs an attempt to the end: a run, an attempt with logs, a report and a snapshot.
  const std::string run = asJson("a", {"submit", "cpu/reduction", "--agent", "noop"}).at("run").at("id");
  ASSERT_EQ(as("a", {"watch", run, "--json"}, 600s).exitCode, 0);
  json mine = asJson("a", {"status", run});
  ASSERT_EQ(mine.at("attempts").size(), 1u);
  const json& attempt = mine.at("attempts").at(0);
  ASSERT_EQ(attempt.at("state"), "scored") << attempt.dump();
  const std::string id = std::to_string(attempt.at("id").get<long>());
  const std::string sha = attempt.at("result").at("snapshot");
  ASSERT_EQ(sha.size(), 64u);

  // User a reads all of it.
  EXPECT_EQ(as("a", {"report", run}).exitCode, 0);
  EXPECT_EQ(as("a", {"logs", id}).exitCode, 0);
  EXPECT_EQ(as("a", {"results", run}).exitCode, 0);
  EXPECT_EQ(as("a", {"snapshot", "show", sha}).exitCode, 0);
  EXPECT_NE(asJson("a", {"snapshot", "list"}).dump().find(sha), std::string::npos);
  EXPECT_NE(asJson("a", {"status"}).dump().find(run), std::string::npos);

  // User b, in the same socket group, gets none of it, not even by guessing the names.
  expectDenied("b", {"status", run});
  expectDenied("b", {"watch", run});
  expectDenied("b", {"report", run});
  expectDenied("b", {"results", run});
  expectDenied("b", {"logs", id});
  expectDenied("b", {"snapshot", "show", sha});
  expectDenied("b", {"snapshot", "export", sha, "-o", "/tmp/" + users_.name("b") + "-stolen.tar.zst"});
  EXPECT_FALSE(fs::exists("/tmp/" + users_.name("b") + "-stolen.tar.zst"));
  expectDenied("b", {"reproduce", sha});
  expectDenied("b", {"cancel", run});
  expectDenied("b", {"tasks", "validate", "cpu/reduction"});
  expectDenied("b", {"snapshot", "gc"});
  EXPECT_EQ(asJson("b", {"status"}).dump().find(run), std::string::npos) << "b's run list shows a's run";
  EXPECT_EQ(asJson("b", {"snapshot", "list"}).dump().find(sha), std::string::npos) << "b's snapshot list shows a's snapshot";
  // Nothing b tried started anything: the daemon holds a's run only.
  EXPECT_EQ(daemon_->ctlJson({"status"}).at("runs").size(), 1u);

  // Root is an admin: it sees a's work.
  EXPECT_EQ(daemon_->ctlJson({"status", run}).at("attempts").size(), 1u);
  EXPECT_EQ(daemon_->ctl({"logs", id}).exitCode, 0);

  // User c is not in the socket's group: it cannot even connect.
  auto outsider = as("c", {"ping"});
  EXPECT_EQ(outsider.exitCode, 3) << outsider.out << outsider.err;
}

}  // namespace
}  // namespace akad::test
