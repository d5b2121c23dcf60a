// Runs the real akactl binary.

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "common/sha256.h"
#include "tests/snapshot/test_support.h"

using namespace snaptest;

TEST(SnapshotCli, CreateVerifyExtractRoundTrip) {
  TempDir t;
  writeFile(t / "ws/a.cu", "kernel");
  writeFile(t / "ws/build/x.o", "obj");
  writeFile(t / "ws/run.sh", "#!/bin/sh\n", 0755);
  std::string ws = (t / "ws").string(), out = (t / "s.tar.zst").string();

  auto c = runAkactl("snapshot create " + ws + " -o " + out + " --exclude build/");
  ASSERT_EQ(c.rc, 0) << c.err;
  std::string h = *akad::sha256File(out);
  EXPECT_EQ(c.out.substr(0, 64), h);
  ASSERT_TRUE(fs::exists(t / "s.json"));

  auto v = runAkactl("snapshot verify " + out + " --json");
  ASSERT_EQ(v.rc, 0) << v.out << v.err;
  auto j = nlohmann::json::parse(v.out);
  EXPECT_EQ(j["sha256"], h);
  EXPECT_EQ(j["files"], 2);

  auto x = runAkactl("snapshot extract " + out + " " + (t / "dest").string());
  ASSERT_EQ(x.rc, 0) << x.err;
  EXPECT_EQ(readFile(t / "dest/a.cu"), "kernel");
  EXPECT_FALSE(fs::exists(t / "dest/build"));
  EXPECT_EQ(fs::status(t / "dest/run.sh").permissions() & fs::perms::owner_exec, fs::perms::owner_exec);
}

TEST(SnapshotCli, RefusalsExitOneWithAMessageAndUsageErrorsExitTwo) {
  TempDir t;
  writeFile(t / "ws/a", "a");
  std::string out = (t / "s.tar.zst").string();
  ASSERT_EQ(runAkactl("snapshot create " + (t / "ws").string() + " -o " + out).rc, 0);

  // Extracting into a non-empty directory.
  writeFile(t / "full/x", "x");
  auto x = runAkactl("snapshot extract " + out + " " + (t / "full").string());
  EXPECT_EQ(x.rc, 1);
  EXPECT_NE(x.err.find("not empty"), std::string::npos) << x.err;

  // A tampered archive fails verification, in JSON too.
  std::string bytes = readFile(out);
  bytes[bytes.size() - 1] ^= 1;
  writeFile(out, bytes);
  auto v = runAkactl("snapshot verify " + out + " --json");
  EXPECT_EQ(v.rc, 1);
  auto j = nlohmann::json::parse(v.out);
  EXPECT_FALSE(j["ok"].get<bool>());
  EXPECT_FALSE(j["error"].get<std::string>().empty());

  auto e = runAkactl("snapshot extract " + out + " " + (t / "dest").string());
  EXPECT_EQ(e.rc, 1);
  EXPECT_FALSE(fs::exists(t / "dest"));

  EXPECT_EQ(runAkactl("snapshot create " + (t / "ws").string()).rc, 2);  // no -o
  EXPECT_EQ(runAkactl("snapshot bogus").rc, 2);
  EXPECT_EQ(runAkactl("snapshot create /nonexistent-dir -o " + out).rc, 2);
}
