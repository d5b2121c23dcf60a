#include "daemon/snapshot/store.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "common/sha256.h"
#include "tests/snapshot/test_support.h"

namespace snap = akad::snapshot;
using namespace snaptest;

namespace {

std::vector<std::string> filesUnder(const fs::path& dir) {
  std::vector<std::string> out;
  if (!fs::exists(dir)) return out;
  for (const auto& e : fs::recursive_directory_iterator(dir))
    if (!e.is_directory()) out.push_back(e.path().lexically_relative(dir).string());
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

TEST(SnapshotStore, AddListOpenManifestAreContentAddressed) {
  TempDir t;
  writeFile(t / "ws/kernel.cu", "k");
  snap::SnapshotStore store(t / "snapshots");
  auto m = store.add(t / "ws", {}, {{"attempt", "a1"}, {"task", "t"}});
  ASSERT_TRUE(m) << m.error().message;
  const std::string h = m->archive_sha256;
  EXPECT_EQ(store.archivePath(h), t / "snapshots/sha256" / h.substr(0, 2) / (h + ".tar.zst"));
  EXPECT_EQ(*akad::sha256File(store.archivePath(h)), h);
  EXPECT_EQ(filesUnder(t / "snapshots/tmp"), std::vector<std::string>{});

  auto p = store.openVerified(h);
  ASSERT_TRUE(p) << p.error().message;
  auto v = snap::verifyArchive(*p, store.manifestPath(h));
  ASSERT_TRUE(v) << v.error().message;
  EXPECT_EQ(v->metadata["attempt"], "a1");

  auto listed = store.list();
  ASSERT_EQ(listed.size(), 1u);
  EXPECT_EQ(listed[0].archive_sha256, h);
  EXPECT_EQ(store.listJson()["snapshots"][0]["files"], 1);
  auto shown = store.showJson(h);
  ASSERT_TRUE(shown);
  EXPECT_EQ((*shown)["entries"][0]["path"], "kernel.cu");

  // The same tree again: same hash, nothing new stored.
  auto again = store.add(t / "ws", {}, {{"attempt", "a2"}});
  ASSERT_TRUE(again);
  EXPECT_EQ(again->archive_sha256, h);
  EXPECT_EQ(store.list().size(), 1u);

  EXPECT_FALSE(store.openVerified("../../etc/passwd"));
  EXPECT_FALSE(store.manifest(std::string(64, 'a')));
}

TEST(SnapshotStore, HashMismatchMarksCorruptAndStaysRefused) {
  TempDir t;
  writeFile(t / "ws/a", std::string(10000, 'a'));
  snap::SnapshotStore store(t / "snapshots");
  auto m = store.add(t / "ws", {}, {});
  ASSERT_TRUE(m);
  const std::string h = m->archive_sha256;
  {
    std::string bytes = readFile(store.archivePath(h));
    bytes[bytes.size() / 2] ^= 1;
    writeFile(store.archivePath(h), bytes);
  }
  auto p = store.openVerified(h);
  ASSERT_FALSE(p);
  EXPECT_NE(p.error().message.find("is corrupt"), std::string::npos) << p.error().message;
  EXPECT_TRUE(store.isCorrupt(h));
  EXPECT_TRUE(store.listJson()["snapshots"][0]["corrupt"].get<bool>());
  // Even restoring the bytes by hand does not clear the mark...
  p = store.openVerified(h);
  ASSERT_FALSE(p);
  EXPECT_NE(p.error().message.find("marked corrupt"), std::string::npos);
  // ...but storing the same tree again does.
  ASSERT_TRUE(store.add(t / "ws", {}, {}));
  EXPECT_FALSE(store.isCorrupt(h));
  EXPECT_TRUE(store.openVerified(h));
}

TEST(SnapshotStore, GcRemovesUnreferencedSnapshotsAndTempFiles) {
  TempDir t;
  snap::SnapshotStore store(t / "snapshots");
  writeFile(t / "ws1/a", "1");
  writeFile(t / "ws2/a", "2");
  auto m1 = store.add(t / "ws1", {}, {});
  auto m2 = store.add(t / "ws2", {}, {});
  ASSERT_TRUE(m1 && m2);
  writeFile(t / "snapshots/tmp/snap-leftover.tar.zst", "half");
  auto r = store.gc({m1->archive_sha256});
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->removed, std::vector<std::string>{m2->archive_sha256});
  EXPECT_EQ(r->temp_files_removed, 1u);
  EXPECT_GT(r->bytes_freed, 0u);
  EXPECT_FALSE(fs::exists(store.archivePath(m2->archive_sha256)));
  EXPECT_FALSE(fs::exists(store.manifestPath(m2->archive_sha256)));
  ASSERT_EQ(store.list().size(), 1u);
  EXPECT_TRUE(store.openVerified(m1->archive_sha256));
}

TEST(SnapshotStore, ExportCopiesVerifiedArchiveAndManifest) {
  TempDir t;
  snap::SnapshotStore store(t / "snapshots");
  writeFile(t / "ws/a", "a");
  auto m = store.add(t / "ws", {}, {{"attempt", "x"}});
  ASSERT_TRUE(m);
  ASSERT_TRUE(store.exportTo(m->archive_sha256, t / "out.tar.zst"));
  auto v = snap::verifyArchive(t / "out.tar.zst", t / "out.json");
  ASSERT_TRUE(v) << v.error().message;
  EXPECT_EQ(v->archive_sha256, m->archive_sha256);
}

// What another machine made (the Slurm executor's nodes) comes in only as the bytes it claims to
// be: an archive changed on the way is refused and nothing is stored under its hash.
TEST(SnapshotStore, ImportKeepsOnlyAnArchiveThatHashesToItsName) {
  TempDir t;
  snap::SnapshotStore node(t / "node");
  writeFile(t / "ws/kernel.cpp", "int f() { return 1; }\n");
  auto m = node.add(t / "ws", {}, {{"attempt", "7"}});
  ASSERT_TRUE(m);
  fs::create_directories(t / "out");
  ASSERT_TRUE(node.exportTo(m->archive_sha256, t / "out/snapshot.tar.zst"));

  snap::SnapshotStore front(t / "front");
  auto in = front.importVerified(t / "out/snapshot.tar.zst", m->archive_sha256);
  ASSERT_TRUE(in) << in.error().message;
  EXPECT_TRUE(front.openVerified(m->archive_sha256));
  EXPECT_EQ(front.manifest(m->archive_sha256)->archive_sha256, m->archive_sha256);

  // One byte changed: refused, and the other store keeps nothing of it.
  snap::SnapshotStore other(t / "other");
  std::string bytes = readFile(t / "out/snapshot.tar.zst");
  bytes[bytes.size() / 2] ^= 0x01;
  writeFile(t / "out/snapshot.tar.zst", bytes);
  auto bad = other.importVerified(t / "out/snapshot.tar.zst", m->archive_sha256);
  EXPECT_FALSE(bad);
  EXPECT_FALSE(fs::exists(other.archivePath(m->archive_sha256)));
  EXPECT_TRUE(other.list().empty());
  // A name that is not the manifest's is refused too.
  EXPECT_FALSE(front.importVerified(t / "out/snapshot.tar.zst", std::string(64, 'a')));
}

TEST(SnapshotStore, WriterKilledMidwayLeavesNoSnapshotUnderAFinalName) {
  TempDir t;
  // Big and incompressible enough that the child is still writing when it is killed.
  for (int i = 0; i < 6; ++i) writeFile(t / (std::string("ws/blob") + std::to_string(i)), randomBytes(48 << 20, i));
  snap::SnapshotStore store(t / "snapshots");
  fs::create_directories(t / "snapshots/tmp");

  pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    auto m = store.add(t / "ws", {}, {});
    ::_exit(m ? 0 : 1);
  }
  // Kill it once its temporary archive holds a few MiB.
  bool killed = false;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (std::chrono::steady_clock::now() < deadline) {
    uint64_t biggest = 0;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(t / "snapshots/tmp", ec)) biggest = std::max<uint64_t>(biggest, e.file_size(ec));
    if (biggest > (8u << 20)) {
      ::kill(child, SIGKILL);
      killed = true;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(killed) << "the writer finished before it could be killed";
  ASSERT_TRUE(WIFSIGNALED(status));

  EXPECT_EQ(filesUnder(t / "snapshots/sha256"), std::vector<std::string>{});
  EXPECT_EQ(store.list().size(), 0u);
  EXPECT_EQ(filesUnder(t / "snapshots/tmp").size(), 1u);  // the half-written temporary
  auto r = store.gc({});
  ASSERT_TRUE(r);
  EXPECT_EQ(r->temp_files_removed, 1u);

  // The store still works and verifies.
  auto m = store.add(t / "ws", {}, {});
  ASSERT_TRUE(m) << m.error().message;
  EXPECT_TRUE(store.openVerified(m->archive_sha256));
  EXPECT_EQ(store.list().size(), 1u);
}
