// Tenants of one daemon, as real local users (made here with useradd and removed afterwards):
// one user's runs, attempts, logs, reports and snapshots are out of another's reach through
// every method the socket offers; admins (root) see everything; a user outside the socket's
// group cannot connect at all. Each user is an attacker trying the real akactl.
#include <gtest/gtest.h>

#include <grp.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <iterator>
#include <regex>
#include <tuple>

#include <nlohmann/json.hpp>

#include "tests/pipeline/local_users.h"
#include "tests/pipeline/pipeline_daemon.h"

namespace akad::test {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

class TenantTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "needs root to add users";
    ASSERT_TRUE(users_.ok()) << "cannot add local users (groupadd/useradd failed)";
    daemon_ = std::make_unique<PipelineDaemon>("tenant", PipelineDaemon::Timing::Minimal);
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
    EXPECT_NE(users_.uid(who), static_cast<uid_t>(-1));
    std::vector<std::string> argv = {akactlBinary().string(), "--socket", daemon_->paths().socket.string()};
    argv.insert(argv.end(), args.begin(), args.end());
    argv = users_.asUser(who, argv);
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

  // The audit log has a's submission and every one of b's refusals, with their uids.
  const uid_t uidA = ::getpwnam(users_.name("a").c_str())->pw_uid, uidB = ::getpwnam(users_.name("b").c_str())->pw_uid;
  int submittedByA = 0, deniedToB = 0;
  std::istringstream audit(readFile(daemon_->paths().stateDir / "audit.log"));
  for (std::string line; std::getline(audit, line);) {
    json e = json::parse(line, nullptr, false);
    ASSERT_FALSE(e.is_discarded()) << line;
    if (e.at("uid") == uidA && e.at("method") == "run.submit" && e.at("outcome") == "ok") ++submittedByA;
    if (e.at("uid") == uidB && e.at("outcome") == "denied") ++deniedToB;
  }
  EXPECT_EQ(submittedByA, 1);
  EXPECT_GE(deniedToB, 11) << "b's refused requests are not all in the audit log";
}

// The held-out configurations of cpu/reduction as the daemon's copy of the task names them:
// name and the shape's numbers (those of five digits or more: shorter ones turn up by chance in
// timings and hashes).
// Whether `needle` stands in `text` as a word of its own (a number not inside a longer one or a
// hash, a name not inside a longer name).
bool containsWord(const std::string& text, const std::string& needle) {
  auto inWord = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_'; };
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1))
    if ((at == 0 || !inWord(text[at - 1])) && (at + needle.size() == text.size() || !inWord(text[at + needle.size()])))
      return true;
  return false;
}

struct HeldOut {
  std::string name;
  std::vector<std::string> numbers;
};
std::vector<HeldOut> heldOutOf(const fs::path& taskYaml) {
  std::vector<HeldOut> out;
  const std::string text = readFile(taskYaml);
  const std::regex entry(R"(\{name: (h-[^,]+), rows: ([0-9]+), cols: ([0-9]+)\})");
  for (std::sregex_iterator it(text.begin(), text.end(), entry), end; it != end; ++it) {
    HeldOut h{(*it)[1], {}};
    for (int g : {2, 3})
      if ((*it)[g].length() >= 5) h.numbers.push_back((*it)[g]);
    out.push_back(h);
  }
  return out;
}

// A tenant reads everything it may of its own attempt (results, status, report, every log,
// the run's events, the snapshot's manifest) and finds no held-out configuration's name, shape
// or seed; an admin's reads show them; both reports give the same held-out figures.
TEST_F(TenantTest, HeldOutConfigurationsReachATenantOnlyAsOpaqueIds) {
  const auto heldOut = heldOutOf(daemon_->paths().tasksDir / "cpu" / "reduction" / "task.yaml");
  ASSERT_GE(heldOut.size(), 3u) << "the task's held-out configurations could not be read";
  const std::string run = asJson("a", {"submit", "cpu/reduction", "--agent", "noop"}).at("run").at("id");
  auto watched = as("a", {"watch", run, "--json"}, 600s);
  ASSERT_EQ(watched.exitCode, 0);

  // The admin's view: names and held-out seeds are there.
  json full = daemon_->ctlJson({"status", run}).at("attempts").at(0);
  ASSERT_EQ(full.at("state"), "scored") << full.dump();
  const std::string id = std::to_string(full.at("id").get<long>());
  const std::string sha = full.at("result").at("snapshot");
  const std::string adminText = full.dump() + daemon_->ctl({"logs", id}).out;
  // Names are looked for anywhere (a case is "name.s0"), numbers and seeds as words.
  std::vector<std::string> names, numbers;
  for (const HeldOut& h : heldOut) {
    EXPECT_NE(adminText.find(h.name), std::string::npos) << "an admin should see " << h.name;
    names.push_back(h.name);
    numbers.insert(numbers.end(), h.numbers.begin(), h.numbers.end());
  }
  int heldOutSeeds = 0;
  for (const auto& [key, seed] : full.at("result").at("seeds").items())
    for (const HeldOut& h : heldOut)
      if (key.rfind(h.name, 0) == 0) {
        numbers.push_back(seed.is_string() ? seed.get<std::string>() : seed.dump());
        ++heldOutSeeds;
      }
  EXPECT_GT(heldOutSeeds, 0) << "the admin's result shows no held-out seeds";

  // Everything the tenant may read of it.
  const std::string exported = "/tmp/" + users_.name("a") + "-" + std::to_string(::getpid()) + ".tar.zst";
  std::vector<std::vector<std::string>> reads = {
      {"--json", "status", run}, {"--json", "results", run}, {"results", run}, {"--json", "report", run},
      {"report", run}, {"--json", "watch", run}, {"--json", "snapshot", "show", sha}, {"--json", "snapshot", "list"}};
  for (const char* stage : {"all", "agent", "compile", "generate", "correctness", "performance", "held_out"}) {
    reads.push_back({"--json", "logs", id, "--stage", stage});
    reads.push_back({"logs", id, "--stage", stage});
  }
  reads.push_back({"snapshot", "export", sha, "-o", exported});
  std::string seen;
  for (const auto& args : reads) {
    auto r = as("a", args);
    std::string line;
    for (const auto& a : args) line += a + " ";
    EXPECT_EQ(r.exitCode, 0) << line << ": " << r.err;
    const std::string text = r.out + r.err;
    for (const std::string& s : names) EXPECT_EQ(text.find(s), std::string::npos) << "'" << s << "' in what the tenant read with: " << line;
    for (const std::string& s : numbers) EXPECT_FALSE(containsWord(text, s)) << "'" << s << "' in what the tenant read with: " << line;
    seen += r.out;
  }
  const std::string manifest = readFile(fs::path(exported).replace_extension("").replace_extension(".json"));
  EXPECT_FALSE(manifest.empty()) << "the export wrote no manifest";
  for (const std::string& s : names) EXPECT_EQ(manifest.find(s), std::string::npos) << "'" << s << "' in the exported manifest";
  for (const std::string& s : numbers) EXPECT_FALSE(containsWord(manifest, s)) << "'" << s << "' in the exported manifest";
  fs::remove(exported);
  fs::remove(fs::path(exported).replace_extension("").replace_extension(".json"));
  EXPECT_NE(seen.find("held_out#1"), std::string::npos) << "the tenant's view names no held-out configuration by id";

  // The same held-out figures in both reports.
  json mine = asJson("a", {"report", run}).at("report");
  json admins = daemon_->ctlJson({"report", run}).at("report");
  for (const auto& [key, value] : admins.items()) {
    if (key.find("held_out") != std::string::npos || key.find("retention") != std::string::npos) {
      EXPECT_EQ(mine.value(key, json()), value) << key;
    }
  }
}

// Two tenants whose agents left the same files share one snapshot, made by the first. The
// second tries every method that shows a snapshot or its attempt: none names the first tenant's
// run, attempt or agent, and its re-score's original is its own attempt.
TEST_F(TenantTest, ASnapshotTwoTenantsShareShowsEachOnlyItsOwnAttempt) {
  auto scored = [&](const std::string& who) {
    const std::string run = asJson(who, {"submit", "cpu/reduction", "--agent", "noop"}).at("run").at("id");
    EXPECT_EQ(as(who, {"watch", run, "--json"}, 600s).exitCode, 0);
    json status = asJson(who, {"status", run});
    EXPECT_EQ(status.at("attempts").size(), 1u);
    const json& a = status.at("attempts").at(0);
    EXPECT_EQ(a.at("state"), "scored") << a.dump();
    return std::make_tuple(run, a.at("id").get<long>(), a.at("result").value("snapshot", std::string()));
  };
  const auto [runA, attemptA, shaA] = scored("a");
  const auto [runB, attemptB, shaB] = scored("b");
  ASSERT_EQ(shaA.size(), 64u);
  ASSERT_EQ(shaA, shaB) << "the noop agent's workspaces differ: nothing is shared to test";
  const std::string sha = shaA;

  // a made the snapshot: a sees its own attempt in the manifest.
  json mine = asJson("a", {"snapshot", "show", sha});
  EXPECT_EQ(mine.at("metadata").value("run", ""), runA) << mine.at("metadata").dump();
  const std::string listedToA = asJson("a", {"snapshot", "list"}).dump();
  EXPECT_NE(listedToA.find(runA), std::string::npos) << "a's list hides a's own run: " << listedToA.substr(0, 600);

  // b sees the task, and nothing of a's.
  const std::string attemptKey = "\"attempt\":" + std::to_string(attemptA);
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"snapshot", "show", sha}, std::vector<std::string>{"snapshot", "list"}}) {
    const std::string shown = asJson("b", args).dump();
    EXPECT_EQ(shown.find(runA), std::string::npos) << args[1] << " shows a's run: " << shown.substr(0, 600);
    EXPECT_EQ(shown.find(attemptKey), std::string::npos) << args[1] << " shows a's attempt: " << shown.substr(0, 600);
    EXPECT_NE(shown.find("cpu/reduction"), std::string::npos) << shown.substr(0, 600);
  }
  // The export writes the manifest beside the archive: b's copy names nothing of a's either.
  const std::string file = "/tmp/" + users_.name("b") + "-own.tar.zst";
  const std::string manifestFile = "/tmp/" + users_.name("b") + "-own.json";
  auto exported = as("b", {"--json", "snapshot", "export", sha, "-o", file});
  EXPECT_EQ(exported.exitCode, 0) << exported.err;
  std::ifstream manifestIn(manifestFile);
  const std::string manifest((std::istreambuf_iterator<char>(manifestIn)), std::istreambuf_iterator<char>());
  EXPECT_NE(manifest.find("cpu/reduction"), std::string::npos) << manifest.substr(0, 600);
  EXPECT_EQ(manifest.find(runA), std::string::npos) << "export shows a's run: " << manifest.substr(0, 600);
  EXPECT_EQ(exported.out.find(runA), std::string::npos) << "export shows a's run: " << exported.out.substr(0, 600);
  fs::remove(file);
  fs::remove(manifestFile);
  json again = asJson("b", {"reproduce", sha}, 600s);  // waits for the re-score
  EXPECT_EQ(again.at("original").at("id"), attemptB) << again.at("original").dump().substr(0, 600);
  EXPECT_EQ(again.dump().find(runA), std::string::npos) << "reproduce shows a's run";
  // Root, an admin, sees who made it.
  EXPECT_EQ(daemon_->ctlJson({"snapshot", "show", sha}).at("metadata").value("run", ""), runA);
}

}  // namespace
}  // namespace akad::test
