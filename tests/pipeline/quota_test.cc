// Quotas and fair share on a real daemon, with real local users as the tenants (useradd here,
// removed afterwards): each limit of the tenant policy, and the fixed one on snapshot exports,
// refuses with a clear error, and one tenant's flood of 1000 attempts does not hold back another
// tenant's first attempt by more than the attempt already running.
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <ctime>
#include <fstream>

#include <nlohmann/json.hpp>

#include "common/protocol.h"
#include "tests/pipeline/local_users.h"
#include "tests/pipeline/pipeline_daemon.h"

namespace akad::test {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

// Opens N connections as the calling user; prints what the last one was told, if anything.
constexpr const char* kConnectScript = R"(
import socket, sys
path, n = sys.argv[1], int(sys.argv[2])
socks = []
for i in range(n):
    s = socket.socket(socket.AF_UNIX); s.connect(path); socks.append(s)
last = socks[-1]; last.settimeout(3)
try:
    print("last:", last.recv(4096).decode().strip())
except socket.timeout:
    print("last: accepted")
first = socks[0]; first.settimeout(5)
first.sendall(b'{"id":1,"method":"daemon.ping","params":{}}\n')
print("first:", first.recv(4096).decode().strip())
)";

// Sends N pings at once on one connection; prints "answered limited".
constexpr const char* kBurstScript = R"(
import json, socket, sys
path, n = sys.argv[1], int(sys.argv[2])
s = socket.socket(socket.AF_UNIX); s.connect(path)
s.sendall(b"".join(b'{"id":%d,"method":"daemon.ping","params":{}}\n' % i for i in range(n)))
f = s.makefile("rb"); ok = limited = 0
for i in range(n):
    r = json.loads(f.readline())
    if "error" in r:
        limited += r["error"]["code"] == -32007
    else:
        ok += 1
print(ok, limited)
)";

// Sends N exports of one snapshot in one write on one connection; prints each request's answer
// by id: {"snapshot", "chunks"} or its error.
constexpr const char* kExportScript = R"(
import json, socket, sys
path, sha, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
s = socket.socket(socket.AF_UNIX); s.settimeout(60); s.connect(path)
s.sendall(b"".join(json.dumps({"id": i, "method": "snapshot.export", "params": {"snapshot": sha}}).encode() + b"\n"
                   for i in range(1, n + 1)))
f = s.makefile("rb"); chunks = {}; answers = {}
while len(answers) < n:
    r = json.loads(f.readline())
    if "event" in r:
        chunks[r["id"]] = chunks.get(r["id"], 0) + 1
    else:
        answers[str(r["id"])] = r.get("error") or {"snapshot": r["result"]["snapshot"], "chunks": chunks.get(r["id"], 0)}
print(json.dumps(answers))
)";

class QuotaTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "needs root to add users";
    ASSERT_TRUE(users_.ok()) << "cannot add local users (groupadd/useradd failed)";
    daemon_ = std::make_unique<PipelineDaemon>("quota", PipelineDaemon::Timing::Minimal);
    ASSERT_EQ(::chmod(daemon_->paths().socket.parent_path().c_str(), 0711), 0);
  }
  void start(const std::string& policy) {
    const fs::path file = daemon_->scratch("policy") / "tenants.yaml";
    std::ofstream(file) << policy;
    // Agents of the test's own: one that asks for the host's network.
    const fs::path agents = daemon_->scratch("agents");
    std::ofstream(agents / "nethost.yaml") << "name: nethost\ndescription: wants the host network\n"
                                              "command: [\"/bin/true\"]\nnetwork: host\ntime_limit_s: 30\n";
    std::ofstream(agents / "noop.yaml") << "name: noop\ndescription: nothing\ncommand: [\"/bin/true\"]\n"
                                           "network: none\ntime_limit_s: 30\n";
    daemon_->start({"--socket-group", users_.group(), "--tenants", file.string(), "--agents-dir", agents.string()});
  }
  void TearDown() override {
    if (!daemon_) return;
    daemon_->stop();
    daemon_->expectNothingLeft();
  }
  CommandResult as(const std::string& who, const std::vector<std::string>& args, std::chrono::seconds timeout = 60s) {
    std::vector<std::string> argv = {akactlBinary().string(), "--socket", daemon_->paths().socket.string()};
    argv.insert(argv.end(), args.begin(), args.end());
    return runCommand(users_.asUser(who, argv), {}, timeout);
  }
  json asJson(const std::string& who, std::vector<std::string> args) {
    args.insert(args.begin(), "--json");
    auto r = as(who, args);
    EXPECT_EQ(r.exitCode, 0) << r.err << r.out;
    json j = json::parse(r.out, nullptr, false);
    EXPECT_FALSE(j.is_discarded()) << r.out;
    return j;
  }
  CommandResult python(const std::string& who, const char* script, const std::string& arg) {
    return runCommand(users_.asUser(who, {"/usr/bin/python3", "-c", script, daemon_->paths().socket.string(), arg}),
                      {}, 60s);
  }

  LocalUsers users_;
  std::unique_ptr<PipelineDaemon> daemon_;
};

TEST_F(QuotaTest, EachLimitRefusesWithAClearErrorAndAkactlQuotaShowsIt) {
  start("limits: {max_queued_attempts: 3, max_agent_time_s: 600, max_connections: 3, requests_per_second: 5}\n"
        "tenants:\n  " + users_.name("b") + ": {max_queued_attempts: 10}\n");
  // Attempts that stay open: the first runs (sleeping), the others wait behind it.
  const std::string run = asJson("a", {"submit", "cpu/reduction", "--agent-command", "sleep 300", "--attempts", "3"})
                              .at("run").at("id");
  auto over = as("a", {"submit", "cpu/reduction", "--agent-command", "true"});
  EXPECT_EQ(over.exitCode, 1) << over.out << over.err;
  EXPECT_NE(over.err.find("adds 1 attempts to the 3 you have queued or running; your limit is 3"), std::string::npos)
      << over.err;
  auto tooLong = as("b", {"submit", "cpu/reduction", "--agent-command", "true", "--agent-time-limit", "601"});
  EXPECT_EQ(tooLong.exitCode, 1);
  EXPECT_NE(tooLong.err.find("above your ceiling of 600"), std::string::npos) << tooLong.err;
  // b's own quota is its own: a's open attempts do not count against it.
  EXPECT_EQ(as("b", {"submit", "cpu/reduction", "--agent-command", "true", "--attempts", "4"}).exitCode, 0);

  json quota = asJson("a", {"quota"});
  EXPECT_EQ(quota.at("uid"), users_.uid("a"));
  EXPECT_EQ(quota.at("limits").at("max_queued_attempts"), 3);
  EXPECT_EQ(quota.at("usage").at("open_attempts"), 3);
  EXPECT_EQ(quota.at("admin"), false);
  auto text = as("a", {"quota"});
  EXPECT_NE(text.out.find("queued or running attempts  3 of 3"), std::string::npos) << text.out;
  EXPECT_EQ(asJson("b", {"quota"}).at("limits").at("max_queued_attempts"), 10);
  auto peek = as("a", {"quota", "--uid", std::to_string(users_.uid("b"))});
  EXPECT_EQ(peek.exitCode, 1);
  EXPECT_NE(peek.err.find("only an admin"), std::string::npos) << peek.err;
  EXPECT_EQ(daemon_->ctlJson({"quota", "--uid", std::to_string(users_.uid("b"))}).at("usage").at("open_attempts"), 4);

  // Network: a tenant's agents get at most `allow` (the default limit); a run may narrow an
  // agent's network, never widen it.
  auto hostNet = as("b", {"submit", "cpu/reduction", "--agent", "nethost"});
  EXPECT_EQ(hostNet.exitCode, 1);
  EXPECT_NE(hostNet.err.find("has network 'host'; your limit is 'allow'"), std::string::npos) << hostNet.err;
  auto widened = as("b", {"submit", "cpu/reduction", "--agent", "noop", "--network", "host"});
  EXPECT_EQ(widened.exitCode, 1);
  EXPECT_NE(widened.err.find("a run may not give it 'host'"), std::string::npos) << widened.err;
  EXPECT_EQ(as("b", {"submit", "cpu/reduction", "--agent", "nethost", "--network", "none"}).exitCode, 0);
  EXPECT_EQ(asJson("b", {"quota"}).at("limits").at("agent_network"), "allow");

  // Connections: the fourth of a's is refused and closed; the ones before it work.
  auto conns = python("a", kConnectScript, "4");
  ASSERT_EQ(conns.exitCode, 0) << conns.err;
  EXPECT_NE(conns.out.find("-32006"), std::string::npos) << conns.out;
  EXPECT_NE(conns.out.find("connections open, its limit"), std::string::npos) << conns.out;
  EXPECT_NE(conns.out.find("\"pong\":true"), std::string::npos) << conns.out;
  EXPECT_NE(python("a", kConnectScript, "3").out.find("last: accepted"), std::string::npos);

  // Requests per second: of 40 at once, the burst (10) is answered and most of the rest refused.
  auto burst = python("a", kBurstScript, "40");
  ASSERT_EQ(burst.exitCode, 0) << burst.err;
  int answered = 0, limited = 0;
  std::istringstream(burst.out) >> answered >> limited;
  // The bucket holds at most 10 and refills at 5 per second; the connections above took a few.
  EXPECT_GE(answered, 1) << burst.out;
  EXPECT_LE(answered, 12) << burst.out;
  EXPECT_EQ(answered + limited, 40) << burst.out;
  // Root, an admin, has no such limit.
  auto rootBurst = runCommand({"/usr/bin/python3", "-c", kBurstScript, daemon_->paths().socket.string(), "40"}, {}, 60s);
  EXPECT_EQ(rootBurst.out, "40 0\n") << rootBurst.err;

  const json runs = daemon_->ctlJson({"status"}).at("runs");
  EXPECT_EQ(runs.size(), 3u) << runs.dump();
  for (const json& r : runs) {
    if (r.at("state") != "done") {
      auto c = daemon_->ctl({"cancel", r.at("id").get<std::string>()});
      EXPECT_EQ(c.exitCode, 0) << c.out << c.err;
    }
  }
  auto watched = daemon_->ctl({"watch", run}, 120s);
  EXPECT_EQ(watched.exitCode, 0) << watched.out << watched.err;
}

TEST_F(QuotaTest, OneTenantsFloodOfAThousandAttemptsDoesNotDelayAnothersFirstAttempt) {
  start("limits: {max_queued_attempts: 1000}\n");
  // a floods: 10 runs of 100 attempts (the most one run may hold per task).
  std::vector<std::string> floods;
  for (int i = 0; i < 10; ++i)
    floods.push_back(asJson("a", {"submit", "cpu/reduction", "--agent-command", "true", "--attempts", "100"})
                         .at("run").at("id"));
  EXPECT_EQ(asJson("a", {"quota"}).at("usage").at("open_attempts"), 1000);
  // Let a's attempts get going (the task's trusted build comes with the first).
  const auto deadline = std::chrono::steady_clock::now() + 300s;
  while (std::chrono::steady_clock::now() < deadline &&
         daemon_->ctlJson({"status", floods[0]}).at("run").at("counts").at("scored").get<int>() < 2)
    std::this_thread::sleep_for(500ms);
  ASSERT_GE(daemon_->ctlJson({"status", floods[0]}).at("run").at("counts").at("scored").get<int>(), 2);

  // b submits one attempt behind a's 998 queued ones.
  const std::string mine = asJson("b", {"submit", "cpu/reduction", "--agent-command", "true"}).at("run").at("id");
  json attempt;
  while (std::chrono::steady_clock::now() < deadline) {
    attempt = asJson("b", {"status", mine}).at("attempts").at(0);
    if (attempt.at("state") != "queued") break;
    std::this_thread::sleep_for(200ms);
  }
  ASSERT_NE(attempt.at("state"), "queued");
  const double submitted = isoSeconds(attempt.at("created_at")), started = isoSeconds(attempt.at("started_at"));

  // No attempt of a's started between b's submission and b's start, and b waited no longer
  // than the longest of a's attempts.
  double longest = 0, runningEnded = -1;  // when a's attempt that was running at b's submission ended
  int startedMeanwhile = 0;
  for (const std::string& run : floods) {
    const json attempts = daemon_->ctlJson({"status", run}).at("attempts");
    for (const json& a : attempts) {
      if (a.at("started_at").is_string()) {
        const double s = isoSeconds(a.at("started_at"));
        if (s > submitted && s < started) ++startedMeanwhile;
        if (a.at("ended_at").is_string()) {
          const double e = isoSeconds(a.at("ended_at"));
          longest = std::max(longest, e - s);
          if (s <= submitted && e >= submitted) runningEnded = e;
        }
      }
    }
  }
  EXPECT_EQ(startedMeanwhile, 0);
  EXPECT_GT(longest, 0);
  EXPECT_LE(started - submitted, longest + 1.0) << "b waited " << started - submitted << " s";
  // b's attempt was next: it started as soon as the one running at its submission had ended.
  ASSERT_GT(runningEnded, 0) << "no attempt of a's was running when b submitted";
  EXPECT_LE(started, runningEnded + 1.0);
  std::cout << "[ figures ] b's first attempt waited " << started - submitted << " s behind 1000 of a's; "
            << "a's longest attempt took " << longest << " s\n";

  for (const std::string& run : floods) EXPECT_EQ(as("a", {"cancel", run}).exitCode, 0);
  EXPECT_EQ(daemon_->ctl({"watch", mine}, 300s).exitCode, 0);
  EXPECT_EQ(asJson("b", {"status", mine}).at("attempts").at(0).at("state"), "scored");
}

// A tenant that pipelines exports of its own snapshot gets two running at once and a clear
// refusal for the third, instead of a thread per request hashing and encoding the archive on
// every CPU. Deterministic however fast an export ends: the three requests go in one write, so
// the daemon reads and dispatches them in one go, and a slot comes back only on the thread that
// dispatches them, after the export's answer is queued (daemon/snapshot_methods.cc).
TEST_F(QuotaTest, AThirdSnapshotExportAtOnceIsRefusedWhileTwoRun) {
  start("");
  const std::string run = asJson("a", {"submit", "cpu/reduction", "--agent", "noop"}).at("run").at("id");
  ASSERT_EQ(as("a", {"watch", run, "--json"}, 600s).exitCode, 0);
  const json attempt = asJson("a", {"status", run}).at("attempts").at(0);
  ASSERT_EQ(attempt.at("state"), "scored") << attempt.dump();
  const std::string sha = attempt.at("result").at("snapshot");

  // The answers, by id, of n exports sent at once by `who` ("root": an admin).
  const auto exportAtOnce = [&](const std::string& who, int n) {
    std::vector<std::string> argv = {"/usr/bin/python3", "-c", kExportScript, daemon_->paths().socket.string(), sha,
                                     std::to_string(n)};
    const CommandResult r = runCommand(who == "root" ? argv : users_.asUser(who, argv), {}, 60s);
    json answers = json::parse(r.out, nullptr, false);
    if (r.exitCode != 0 || !answers.is_object()) {
      ADD_FAILURE() << who << "'s exports: " << r.out << r.err;
      answers = json::object();
    }
    for (int i = 1; i <= n; ++i) answers.emplace(std::to_string(i), json::object());
    return answers;
  };
  const json answers = exportAtOnce("a", 3);
  for (const char* id : {"1", "2"}) {
    EXPECT_EQ(answers.at(id).value("snapshot", ""), sha) << answers.dump();
    EXPECT_GT(answers.at(id).value("chunks", 0), 0) << answers.dump();
  }
  EXPECT_EQ(answers.at("3").value("code", 0), protocol::kQuotaExceeded) << answers.dump();
  EXPECT_EQ(answers.at("3").value("message", ""),
            "uid " + std::to_string(users_.uid("a")) + " has 2 snapshot exports running, its limit; retry when one has ended");
  // Both slots came back with the answers: the next export runs.
  EXPECT_EQ(exportAtOnce("a", 1).at("1").value("snapshot", ""), sha);
  // Root, an admin, has no such limit.
  const json admin = exportAtOnce("root", 3);
  for (const char* id : {"1", "2", "3"}) EXPECT_EQ(admin.at(id).value("snapshot", ""), sha) << admin.dump();
}

}  // namespace
}  // namespace akad::test
