// The durable store on real SQLite files (daemon/store.h).
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include <set>
#include <thread>

#include "common/protocol.h"
#include "daemon/store.h"
#include "tests/daemon/harness.h"

namespace akad {
namespace {

NewRun sampleRun(std::vector<std::string> tasks = {"cpu/softmax", "cpu/vecadd"}, std::int64_t attempts = 2) {
  NewRun r;
  r.label = "sample";
  r.agent = "noop";
  r.taskIds = std::move(tasks);
  r.attemptsPerTask = attempts;
  r.submitterUid = 1234;
  r.submitterGid = 99;
  r.params = {{"tasks", {"cpu"}}, {"options", {{"k", 1}}}};
  return r;
}

std::unique_ptr<Store> openStore(const std::filesystem::path& path) {
  auto s = Store::open(path);
  EXPECT_TRUE(s) << (s ? "" : s.error().message);
  return s ? std::move(*s) : nullptr;
}

TEST(Store, FreshDatabaseIsMigratedToTheLatestSchemaInWalMode) {
  test::TempDir dir;
  auto store = openStore(dir / "akad.db");
  ASSERT_TRUE(store);
  EXPECT_EQ(*store->schemaVersion(), Store::latestSchemaVersion());
  EXPECT_GE(Store::latestSchemaVersion(), 1);
  ASSERT_TRUE(store->submitRun(sampleRun()));
  EXPECT_TRUE(std::filesystem::exists(dir / "akad.db-wal"));
}

TEST(Store, SubmitStoresTheRunItsQueuedAttemptsAndAnEvent) {
  test::TempDir dir;
  auto store = openStore(dir / "akad.db");
  auto change = store->submitRun(sampleRun());
  ASSERT_TRUE(change) << change.error().message;
  const RunRecord& run = change->run;
  EXPECT_EQ(run.id.size(), 10u);
  EXPECT_EQ(run.id.rfind("r-", 0), 0u);
  EXPECT_EQ(run.state, "queued");
  EXPECT_EQ(run.counts.total, 4);
  EXPECT_EQ(run.counts.queued, 4);
  EXPECT_EQ(run.submitterUid, 1234);
  EXPECT_EQ(run.params.at("options").at("k"), 1);
  auto attempts = store->attemptsOf(run.id);
  ASSERT_TRUE(attempts);
  ASSERT_EQ(attempts->size(), 4u);
  std::set<std::pair<std::string, std::int64_t>> keys;
  for (const auto& a : *attempts) {
    EXPECT_EQ(a.state, "queued");
    EXPECT_FALSE(a.taskHash);
    EXPECT_FALSE(a.result);
    keys.insert({a.taskId, a.attemptIndex});
  }
  EXPECT_EQ(keys.size(), 4u);
  ASSERT_EQ(change->events.size(), 1u);
  EXPECT_EQ(change->events[0].kind, "run.submitted");
  auto events = store->eventsOf(run.id, 0);
  ASSERT_TRUE(events);
  ASSERT_EQ(events->size(), 1u);
  EXPECT_EQ((*events)[0].seq, change->events[0].seq);
}

TEST(Store, GetOfAnUnknownRunIsNotFound) {
  test::TempDir dir;
  auto store = openStore(dir / "akad.db");
  auto r = store->getRun("r-deadbeef");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, protocol::kNotFound);
  EXPECT_NE(r.error().message.find("r-deadbeef"), std::string::npos);
}

TEST(Store, ListIsNewestFirstAndFiltersByState) {
  test::TempDir dir;
  auto store = openStore(dir / "akad.db");
  std::vector<std::string> ids;
  for (int i = 0; i < 3; ++i) ids.push_back(store->submitRun(sampleRun({"cpu/softmax"}, 1))->run.id);
  ASSERT_TRUE(store->cancelRun(ids[1]));
  auto all = store->listRuns(std::nullopt, 10);
  ASSERT_TRUE(all);
  ASSERT_EQ(all->size(), 3u);
  EXPECT_EQ((*all)[0].id, ids[2]);
  EXPECT_EQ((*all)[2].id, ids[0]);
  auto queued = store->listRuns(std::string("queued"), 10);
  ASSERT_EQ(queued->size(), 2u);
  auto limited = store->listRuns(std::nullopt, 1);
  ASSERT_EQ(limited->size(), 1u);
  auto counts = store->counts();
  ASSERT_TRUE(counts);
  EXPECT_EQ(counts->runs, 3);
  EXPECT_EQ(counts->runsByState.at("cancelled"), 1);
  EXPECT_EQ(counts->attempts.queued, 2);
  EXPECT_EQ(counts->attempts.cancelled, 1);
}

TEST(Store, CancelEndsTheRunAndItsAttemptsOnce) {
  test::TempDir dir;
  auto store = openStore(dir / "akad.db");
  std::string id = store->submitRun(sampleRun())->run.id;
  auto c = store->cancelRun(id);
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_EQ(c->run.state, "cancelled");
  EXPECT_TRUE(c->run.endedAt);
  EXPECT_EQ(c->run.counts.cancelled, 4);
  EXPECT_EQ(c->run.counts.queued, 0);
  ASSERT_EQ(c->events.size(), 1u);
  EXPECT_EQ(c->events[0].data.at("state"), "cancelled");
  auto again = store->cancelRun(id);
  ASSERT_FALSE(again);
  EXPECT_EQ(again.error().code, protocol::kConflict);
  EXPECT_EQ(store->cancelRun("r-00000000").error().code, protocol::kNotFound);
  EXPECT_EQ(store->eventsOf(id, 0)->size(), 2u);
  EXPECT_EQ(store->eventsOf(id, c->events[0].seq)->size(), 0u);
}

TEST(Store, ReopenedStoreKeepsEverything) {
  test::TempDir dir;
  std::string id;
  {
    auto store = openStore(dir / "akad.db");
    id = store->submitRun(sampleRun())->run.id;
  }
  auto store = openStore(dir / "akad.db");
  EXPECT_EQ(*store->schemaVersion(), Store::latestSchemaVersion());
  auto run = store->getRun(id);
  ASSERT_TRUE(run);
  EXPECT_EQ(run->counts.total, 4);
  EXPECT_EQ(run->label, "sample");
}

// A writer killed with SIGKILL right after submitRun returned (no destructor, no checkpoint):
// the acknowledged run must be in the database the next process opens.
TEST(Store, AcknowledgedRunSurvivesAnUncleanStop) {
  test::TempDir dir;
  int pipefd[2];
  ASSERT_EQ(::pipe(pipefd), 0);
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::close(pipefd[0]);
    auto store = Store::open(dir / "akad.db");
    if (!store) ::_exit(2);
    std::string ids;
    for (int i = 0; i < 5; ++i) {
      auto c = (*store)->submitRun(sampleRun());
      if (!c) ::_exit(3);
      ids += c->run.id + "\n";
    }
    if (::write(pipefd[1], ids.data(), ids.size()) != static_cast<ssize_t>(ids.size())) ::_exit(4);
    ::raise(SIGKILL);
    ::_exit(5);
  }
  ::close(pipefd[1]);
  std::string ids;
  char buf[256];
  for (ssize_t n; (n = ::read(pipefd[0], buf, sizeof buf)) > 0;) ids.append(buf, static_cast<std::size_t>(n));
  ::close(pipefd[0]);
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << "child status " << status;
  auto store = openStore(dir / "akad.db");
  ASSERT_TRUE(store);
  std::size_t found = 0;
  for (std::size_t pos = 0, nl; (nl = ids.find('\n', pos)) != std::string::npos; pos = nl + 1) {
    auto run = store->getRun(ids.substr(pos, nl - pos));
    ASSERT_TRUE(run) << run.error().message;
    EXPECT_EQ(run->counts.total, 4);
    ++found;
  }
  EXPECT_EQ(found, 5u);
}

TEST(Store, RefusesADatabaseFromANewerAkad) {
  test::TempDir dir;
  { ASSERT_TRUE(openStore(dir / "akad.db")); }
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open((dir / "akad.db").c_str(), &db), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(db, "UPDATE schema_version SET version = 999", nullptr, nullptr, nullptr), SQLITE_OK);
  sqlite3_close(db);
  auto s = Store::open(dir / "akad.db");
  ASSERT_FALSE(s);
  EXPECT_NE(s.error().message.find("999"), std::string::npos) << s.error().message;
  EXPECT_NE(s.error().message.find("newer"), std::string::npos) << s.error().message;
}

TEST(Store, UnopenableDatabaseIsAClearError) {
  auto s = Store::open("/nonexistent-dir/akad.db");
  ASSERT_FALSE(s);
  EXPECT_NE(s.error().message.find("/nonexistent-dir/akad.db"), std::string::npos);
}

TEST(Store, ConcurrentWritersFromManyThreadsAllCommit) {
  test::TempDir dir;
  auto store = openStore(dir / "akad.db");
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 10; ++i) {
        auto c = store->submitRun(sampleRun({"cpu/softmax"}, 1));
        if (!c) ++failures;
        else if (!store->getRun(c->run.id)) ++failures;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(store->counts()->runs, 80);
}

}  // namespace
}  // namespace akad
