#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>

#include <fstream>

#include "common/sha256.h"
#include "daemon/snapshot/snapshot.h"
#include "tests/snapshot/test_support.h"

namespace snap = akad::snapshot;
using namespace snaptest;

namespace {

void makeWorkspace(const fs::path& ws) {
  writeFile(ws / "kernel.cu", "__global__ void k() {}\n");
  writeFile(ws / "run.sh", "#!/bin/sh\necho run\n", 0755);
  writeFile(ws / "odd perms", "x", 0600);      // normalised to 0644
  writeFile(ws / "group-exec", "x", 0750);     // normalised to 0755
  writeFile(ws / "src/a/b/deep.h", "#pragma once\n");
  writeFile(ws / "src/blob.bin", randomBytes(300000, 1));
  writeFile(ws / "src/empty", "");
  writeFile(ws / "a-c", "sorted after a/ in byte order of names");
  fs::create_directories(ws / "emptydir");
  fs::create_symlink("../kernel.cu", ws / "src/kernel-link");
  fs::create_symlink("a/b", ws / "src/dirlink");
}

}  // namespace

TEST(SnapshotRoundTrip, ExtractedTreeEqualsNormalisedSource) {
  TempDir t;
  fs::path ws = t / "ws";
  makeWorkspace(ws);
  auto m = snap::createArchive(ws, t / "s.tar.zst", {}, {{"attempt", "a1"}});
  ASSERT_TRUE(m) << m.error().message;
  EXPECT_EQ(m->archive_sha256, *akad::sha256File(t / "s.tar.zst"));
  EXPECT_EQ(m->archive_size, fs::file_size(t / "s.tar.zst"));
  EXPECT_EQ(m->metadata["attempt"], "a1");

  ASSERT_TRUE(snap::extractArchive(t / "s.tar.zst", t / "out", {}));
  auto want = describeTree(ws);
  want["odd perms"] = "file 0644 " + akad::sha256Hex("x");
  want["group-exec"] = "file 0755 " + akad::sha256Hex("x");
  EXPECT_EQ(describeTree(t / "out"), want);

  // The manifest lists every entry with its content hash.
  ASSERT_EQ(m->entries.size(), want.size());
  for (const auto& e : m->entries) {
    if (e.type == "file") {
      EXPECT_EQ(e.sha256, akad::sha256Hex(readFile(ws / e.path))) << e.path;
    }
  }
}

TEST(SnapshotRoundTrip, EntriesAreInPathOrderWithFixedModes) {
  TempDir t;
  makeWorkspace(t / "ws");
  auto m = snap::createArchive(t / "ws", t / "s.tar.zst", {}, {});
  ASSERT_TRUE(m) << m.error().message;
  std::vector<std::string> paths;
  for (const auto& e : m->entries) {
    paths.push_back(e.path);
    if (e.type == "dir") {
      EXPECT_EQ(e.mode, 0755u);
    } else if (e.type == "symlink") {
      EXPECT_EQ(e.mode, 0777u);
    } else {
      EXPECT_TRUE(e.mode == 0644u || e.mode == 0755u);
    }
  }
  std::vector<std::string> want = {"a-c", "emptydir", "group-exec", "kernel.cu", "odd perms", "run.sh",
                                   "src", "src/a", "src/a/b", "src/a/b/deep.h", "src/blob.bin",
                                   "src/dirlink", "src/empty", "src/kernel-link"};
  EXPECT_EQ(paths, want);
}

TEST(SnapshotDeterminism, SameTreeSameBytesEvenAfterTouchingEveryFile) {
  TempDir t;
  fs::path ws = t / "ws";
  makeWorkspace(ws);
  auto m1 = snap::createArchive(ws, t / "1.tar.zst", {}, {});
  auto m2 = snap::createArchive(ws, t / "2.tar.zst", {}, {});
  ASSERT_TRUE(m1 && m2);
  EXPECT_EQ(m1->archive_sha256, m2->archive_sha256);

  // New mtimes/atimes everywhere, and a different owner on one file: the bytes do not change.
  for (auto it = fs::recursive_directory_iterator(ws); it != fs::recursive_directory_iterator(); ++it) {
    struct timeval tv[2] = {{1234567, 0}, {7654321, 0}};
    ASSERT_EQ(::lutimes(it->path().c_str(), tv), 0);
  }
  ASSERT_EQ(::lchown((ws / "kernel.cu").c_str(), 1234, 5678), 0);
  auto m3 = snap::createArchive(ws, t / "3.tar.zst", {}, {});
  ASSERT_TRUE(m3);
  EXPECT_EQ(m1->archive_sha256, m3->archive_sha256);
  EXPECT_EQ(readFile(t / "1.tar.zst"), readFile(t / "3.tar.zst"));

  // A one-byte content change does change the hash.
  writeFile(ws / "kernel.cu", "__global__ void k() {}\n\n");
  auto m4 = snap::createArchive(ws, t / "4.tar.zst", {}, {});
  ASSERT_TRUE(m4);
  EXPECT_NE(m1->archive_sha256, m4->archive_sha256);
}

TEST(SnapshotDeterminism, LargeMultiJobArchiveIsStable) {
  // Big enough that zstd splits it into several parallel jobs.
  TempDir t;
  for (int i = 0; i < 8; ++i) writeFile(t / (std::string("ws/f") + std::to_string(i)), randomBytes(3 << 20, i) + std::string(1 << 20, 'a'));
  auto m1 = snap::createArchive(t / "ws", t / "1.tar.zst", {}, {});
  auto m2 = snap::createArchive(t / "ws", t / "2.tar.zst", {}, {});
  ASSERT_TRUE(m1 && m2);
  EXPECT_EQ(m1->archive_sha256, m2->archive_sha256);
}

TEST(SnapshotDeterminism, SameBytesForAnyZstdWorkerCount) {
  // The archive must not depend on the machine's CPU count (zstd's multithreaded layout).
  TempDir t;
  for (int i = 0; i < 6; ++i) writeFile(t / (std::string("ws/f") + std::to_string(i)), randomBytes(2 << 20, i) + std::string(2 << 20, 'a'));
  std::string first;
  for (const char* workers : {"1", "2", "4"}) {
    ::setenv("AKAD_SNAPSHOT_ZSTD_WORKERS", workers, 1);
    auto m = snap::createArchive(t / "ws", t / "s.tar.zst", {}, {});
    ::unsetenv("AKAD_SNAPSHOT_ZSTD_WORKERS");
    ASSERT_TRUE(m) << m.error().message;
    if (first.empty()) first = m->archive_sha256;
    EXPECT_EQ(m->archive_sha256, first) << workers << " workers";
  }
}

TEST(SnapshotCreate, ExcludesAndSkipsSpecialFiles) {
  TempDir t;
  fs::path ws = t / "ws";
  writeFile(ws / "keep.c", "int x;");
  writeFile(ws / "keep.o", "obj");
  writeFile(ws / "build/out.bin", "b");
  writeFile(ws / "src/build/nested.bin", "b");
  writeFile(ws / "src/__pycache__/m.pyc", "p");
  writeFile(ws / "buildfile", "a file named like the dir pattern is kept");
  ASSERT_EQ(::mkfifo((ws / "fifo").c_str(), 0644), 0);
  snap::CreateOptions opt;
  opt.exclude = {"build/", "*.o", "__pycache__/", "buildfile/"};
  auto m = snap::createArchive(ws, t / "s.tar.zst", opt, {});
  ASSERT_TRUE(m) << m.error().message;
  std::vector<std::string> paths;
  for (const auto& e : m->entries) paths.push_back(e.path);
  EXPECT_EQ(paths, (std::vector<std::string>{"buildfile", "keep.c", "src"}));
  std::string skipped;
  for (const auto& s : m->skipped) skipped += s + "\n";
  EXPECT_NE(skipped.find("fifo: fifo not archived"), std::string::npos) << skipped;
  EXPECT_NE(skipped.find("src/build: excluded"), std::string::npos) << skipped;
}

TEST(SnapshotCreate, LimitsNameTheLimitAndRemoveThePartialArchive) {
  TempDir t;
  fs::path ws = t / "ws";
  for (int i = 0; i < 10; ++i) writeFile(ws / (std::string("f") + std::to_string(i)), std::string(1000, 'x'));
  struct Case {
    snap::Limits limits;
    std::string expect;
  };
  std::vector<Case> cases;
  cases.push_back({}), cases.back().limits.max_files = 5, cases.back().expect = "max_files (5)";
  cases.push_back({}), cases.back().limits.max_total_bytes = 5000, cases.back().expect = "max_total_bytes (5000)";
  cases.push_back({}), cases.back().limits.max_file_bytes = 999, cases.back().expect = "max_file_bytes (999)";
  cases.push_back({}), cases.back().limits.max_path_bytes = 1, cases.back().expect = "max_path_bytes (1)";
  for (const auto& c : cases) {
    snap::CreateOptions opt;
    opt.limits = c.limits;
    auto m = snap::createArchive(ws, t / "s.tar.zst", opt, {});
    ASSERT_FALSE(m) << c.expect;
    EXPECT_NE(m.error().message.find(c.expect), std::string::npos) << m.error().message;
    EXPECT_FALSE(fs::exists(t / "s.tar.zst"));
  }
}

TEST(SnapshotCreate, FailureKeepsAnExistingArchiveAndLeavesNoTemporary) {
  TempDir t;
  writeFile(t / "ws/a", "a");
  writeFile(t / "out/s.tar.zst", "previous");
  snap::CreateOptions opt;
  opt.limits.max_files = 0;
  ASSERT_FALSE(snap::createArchive(t / "ws", t / "out/s.tar.zst", opt, {}));
  EXPECT_EQ(readFile(t / "out/s.tar.zst"), "previous");
  EXPECT_EQ(listNames(t / "out"), std::vector<std::string>{"s.tar.zst"});
}

TEST(SnapshotCreate, ZstdLevelChangesBytesNotContent) {
  TempDir t;
  writeFile(t / "ws/a", std::string(100000, 'a') + randomBytes(1000, 3));
  snap::CreateOptions l1;
  l1.zstd_level = 1;
  auto m1 = snap::createArchive(t / "ws", t / "1.tar.zst", l1, {});
  auto m3 = snap::createArchive(t / "ws", t / "3.tar.zst", {}, {});
  ASSERT_TRUE(m1 && m3);
  EXPECT_NE(m1->archive_sha256, m3->archive_sha256);
  EXPECT_EQ(m1->entries[0].sha256, m3->entries[0].sha256);
}

TEST(SnapshotCreate, Utf8NamesRoundTripAndInvalidNamesAreSkipped) {
  TempDir t;
  writeFile(t / "ws/caf\xc3\xa9/\xe6\x97\xa5\xe6\x9c\xac.cu", "utf8");
  fs::create_symlink("caf\xc3\xa9", t / "ws/l\xc3\xa9");
  writeFile(t / "ws/bad\xff", "latin1 name");
  auto m = snap::createArchive(t / "ws", t / "s.tar.zst", {}, {});
  ASSERT_TRUE(m) << m.error().message;
  ASSERT_EQ(m->skipped.size(), 1u);
  EXPECT_EQ(m->skipped[0], "bad\\xff: name is not valid UTF-8, not archived");
  std::ofstream(t / "s.json") << m->toJson().dump();
  auto v = snap::verifyArchive(t / "s.tar.zst", t / "s.json");
  ASSERT_TRUE(v) << v.error().message;
  ASSERT_TRUE(snap::extractArchive(t / "s.tar.zst", t / "out", {}));
  fs::remove(t / "ws/bad\xff");
  EXPECT_EQ(describeTree(t / "out"), describeTree(t / "ws"));
}

TEST(SnapshotCreate, ArchiveWrittenInsideTheWorkspaceIsNotArchived) {
  TempDir t;
  writeFile(t / "ws/a", "a");
  auto m = snap::createArchive(t / "ws", t / "ws/self.tar.zst", {}, {});
  ASSERT_TRUE(m) << m.error().message;
  ASSERT_EQ(m->entries.size(), 1u);
  EXPECT_EQ(m->entries[0].path, "a");
}

TEST(SnapshotCreate, SymlinkOutOfTreeIsStoredButRefusedOnExtract) {
  TempDir t;
  writeFile(t / "ws/a", "a");
  fs::create_symlink("/etc/passwd", t / "ws/escape");
  auto m = snap::createArchive(t / "ws", t / "s.tar.zst", {}, {});
  ASSERT_TRUE(m) << m.error().message;
  auto s = snap::extractArchive(t / "s.tar.zst", t / "out", {});
  ASSERT_FALSE(s);
  EXPECT_NE(s.error().message.find("absolute symlink target"), std::string::npos) << s.error().message;
  EXPECT_FALSE(fs::exists(t / "out"));
}

TEST(SnapshotVerify, AcceptsItsOwnArchiveAndRejectsMismatches) {
  TempDir t;
  makeWorkspace(t / "ws");
  auto m = snap::createArchive(t / "ws", t / "s.tar.zst", {}, {});
  ASSERT_TRUE(m);
  std::ofstream(t / "s.json") << m->toJson().dump();
  auto ok = snap::verifyArchive(t / "s.tar.zst", t / "s.json");
  ASSERT_TRUE(ok) << ok.error().message;

  // Manifest whose archive hash does not match.
  auto bad = m->toJson();
  bad["archive_sha256"] = std::string(64, '0');
  std::ofstream(t / "bad-hash.json") << bad.dump();
  auto r = snap::verifyArchive(t / "s.tar.zst", t / "bad-hash.json");
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("but the manifest says 0000"), std::string::npos) << r.error().message;

  // Manifest whose entry content hash does not match (archive hash right).
  bad = m->toJson();
  for (auto& e : bad["entries"])
    if (e["path"] == "kernel.cu") e["sha256"] = std::string(64, 'f');
  std::ofstream(t / "bad-entry.json") << bad.dump();
  r = snap::verifyArchive(t / "s.tar.zst", t / "bad-entry.json");
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("content of 'kernel.cu' has a different SHA-256"), std::string::npos) << r.error().message;

  // Not a manifest at all.
  std::ofstream(t / "junk.json") << "{not json";
  r = snap::verifyArchive(t / "s.tar.zst", t / "junk.json");
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("not valid JSON"), std::string::npos);
}
