// The audit log's file: one whole JSON line per recorded request, what is recorded and what
// not, rotation past the size limit, and no writing through a planted link.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <thread>

#include "common/protocol.h"
#include "daemon/audit.h"
#include "tests/daemon/harness.h"

namespace akad::test {
namespace {

using nlohmann::json;

std::vector<json> linesOf(const fs::path& file) {
  std::ifstream in(file);
  std::vector<json> out;
  for (std::string line; std::getline(in, line);) out.push_back(json::parse(line));
  return out;
}

TEST(AuditLog, RecordsChangesAndRefusalsOnly) {
  EXPECT_TRUE(AuditLog::records("run.submit", 0));
  EXPECT_TRUE(AuditLog::records("run.cancel", protocol::kConflict));
  EXPECT_TRUE(AuditLog::records("snapshot.gc", 0));
  EXPECT_TRUE(AuditLog::records("run.get", protocol::kPermissionDenied));
  EXPECT_FALSE(AuditLog::records("run.get", 0));
  EXPECT_FALSE(AuditLog::records("daemon.ping", 0));
  EXPECT_FALSE(AuditLog::records("run.get", protocol::kNotFound));
}

TEST(AuditLog, EachRecordIsOneLineWithCallerMethodTargetsAndOutcome) {
  TempDir dir;
  auto log = AuditLog::open(dir / "audit.log");
  ASSERT_TRUE(log) << log.error().message;
  (*log)->record(Peer{42, 1001, 1001}, "run.submit", auditTargets(json{{"tasks", {"cpu"}}}, nullptr), 0, "");
  json result = {{"run", {{"id", "r-1"}}}};
  (*log)->record(Peer{43, 1002, 1002}, "run.get", auditTargets(json{{"id", "r-1"}}, &result),
                 protocol::kPermissionDenied, "run r-1 belongs to another user");
  auto lines = linesOf(dir / "audit.log");
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0].at("uid"), 1001);
  EXPECT_EQ(lines[0].at("pid"), 42);
  EXPECT_EQ(lines[0].at("method"), "run.submit");
  EXPECT_EQ(lines[0].at("targets").at("tasks"), json({"cpu"}));
  EXPECT_EQ(lines[0].at("outcome"), "ok");
  EXPECT_FALSE(lines[0].at("time").get<std::string>().empty());
  EXPECT_EQ(lines[1].at("outcome"), "denied");
  EXPECT_EQ(lines[1].at("code"), protocol::kPermissionDenied);
  EXPECT_EQ(lines[1].at("targets").at("id"), "r-1");
  struct stat st {};
  ASSERT_EQ(::stat((dir / "audit.log").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
}

TEST(AuditLog, RotatesPastItsLimitKeepingTheNewestFiles) {
  TempDir dir;
  auto log = AuditLog::open(dir / "audit.log", {1000, 2});
  ASSERT_TRUE(log);
  for (int i = 0; i < 60; ++i) (*log)->record(Peer{1, 0, 0}, "run.cancel", json{{"id", "r-" + std::to_string(i)}}, 0, "");
  EXPECT_TRUE(fs::exists(dir / "audit.log.1"));
  EXPECT_TRUE(fs::exists(dir / "audit.log.2"));
  EXPECT_FALSE(fs::exists(dir / "audit.log.3"));
  for (const char* f : {"audit.log", "audit.log.1", "audit.log.2"}) EXPECT_LE(fs::file_size(dir / f), 1000u) << f;
  // The newest line is in the current file, whole.
  auto lines = linesOf(dir / "audit.log");
  ASSERT_FALSE(lines.empty());
  EXPECT_EQ(lines.back().at("targets").at("id"), "r-59");
}

TEST(AuditLog, ConcurrentRecordsStayWholeLines) {
  TempDir dir;
  auto log = AuditLog::open(dir / "audit.log");
  ASSERT_TRUE(log);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < 250; ++i) (*log)->record(Peer{t, 0, 0}, "run.submit", json{{"id", std::string(100, 'x')}}, 0, "");
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(linesOf(dir / "audit.log").size(), 1000u);
}

TEST(AuditLog, APlantedLinkIsRefused) {
  TempDir dir;
  std::ofstream(dir / "victim") << "precious\n";
  fs::create_symlink(dir / "victim", dir / "audit.log");
  EXPECT_FALSE(AuditLog::open(dir / "audit.log"));
  std::ifstream in(dir / "victim");
  std::stringstream ss;
  ss << in.rdbuf();
  EXPECT_EQ(ss.str(), "precious\n");
}

}  // namespace
}  // namespace akad::test
