// Archives an attacker could hand us. Each must be refused with an error that says why, leave
// the destination as it was (absent, or empty when it existed) and leave no staging directory.

#include <archive_entry.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <chrono>

#include "daemon/snapshot/snapshot.h"
#include "tests/snapshot/test_support.h"

namespace snap = akad::snapshot;
using namespace snaptest;

namespace {

// Extracts `archiveBytes` twice (into an absent and into an existing empty destination) and
// checks the refusal and that nothing was left behind.
void expectRefused(const std::string& archiveBytes, const std::string& expect, const snap::Limits& limits = {}) {
  TempDir t;
  writeFile(t / "a.tar.zst", archiveBytes);
  fs::create_directories(t / "parent");
  auto s = snap::extractArchive(t / "a.tar.zst", t / "parent/dest", limits);
  ASSERT_FALSE(s) << "archive was accepted; expected refusal: " << expect;
  EXPECT_NE(s.error().message.find(expect), std::string::npos) << s.error().message;
  EXPECT_EQ(listNames(t / "parent"), std::vector<std::string>{});
  EXPECT_EQ(listNames(t.path()), (std::vector<std::string>{"a.tar.zst", "parent"}));

  fs::create_directories(t / "parent/dest");
  s = snap::extractArchive(t / "a.tar.zst", t / "parent/dest", limits);
  ASSERT_FALSE(s);
  EXPECT_EQ(listNames(t / "parent"), std::vector<std::string>{"dest"});
  EXPECT_EQ(listNames(t / "parent/dest"), std::vector<std::string>{});
}

std::string archiveOf(const std::vector<TarEntry>& entries) { return zstdCompress(tarBytes(entries)); }

TarEntry file(const std::string& path, const std::string& data = "x") { return TarEntry{path, AE_IFREG, 0644, data}; }

}  // namespace

TEST(SnapshotHostileArchive, ValidArchiveFromForeignWriterIsAccepted) {
  // The control: the same builder with harmless entries extracts, so refusals below are real.
  TempDir t;
  writeFile(t / "a.tar.zst", archiveOf({file("./a"), file("d/b"), TarEntry{"d/l", AE_IFLNK, 0777, "", "b"}}));
  auto s = snap::extractArchive(t / "a.tar.zst", t / "out", {});
  ASSERT_TRUE(s) << s.error().message;
  EXPECT_EQ(readFile(t / "out/d/l"), "x");
}

TEST(SnapshotHostileArchive, DotDotPathTraversal) {
  expectRefused(archiveOf({file("../x")}), "'..' in path");
  expectRefused(archiveOf({file("a/../../x")}), "'..' in path");
}

TEST(SnapshotHostileArchive, AbsolutePath) {
  std::string target = "/tmp/akasnap-abs-" + std::to_string(::getpid());
  expectRefused(archiveOf({file(target)}), "absolute path");
  expectRefused(archiveOf({file("/etc/x")}), "absolute path");
  EXPECT_FALSE(fs::exists(target));
}

TEST(SnapshotHostileArchive, SymlinkThenWriteThrough) {
  TempDir outside;
  // Target inside the tree, then a file written through it.
  expectRefused(archiveOf({file("sub/keep"), TarEntry{"l", AE_IFLNK, 0777, "", "sub"}, file("l/x")}),
                "parent 'l' is a symlink");
  // Target outside the tree: refused at the symlink itself.
  expectRefused(archiveOf({TarEntry{"l", AE_IFLNK, 0777, "", outside.path().string()}, file("l/x")}),
                "absolute symlink target");
  expectRefused(archiveOf({TarEntry{"d/l", AE_IFLNK, 0777, "", "../../outside"}}), "leaves the tree");
  expectRefused(archiveOf({TarEntry{"d/l", AE_IFLNK, 0777, "", "x/../../.."}}), "'..' after a name");
  // A file then the same path as a symlink (replace-then-follow).
  expectRefused(archiveOf({file("l"), TarEntry{"l", AE_IFLNK, 0777, "", "."}}), "appears twice");
  EXPECT_EQ(listNames(outside.path()), std::vector<std::string>{});
}

TEST(SnapshotHostileArchive, HardlinkToEtcPasswd) {
  TarEntry h{"passwd", AE_IFREG, 0644, ""};
  h.hardlink = "/etc/passwd";
  h.declaredSize = 0;
  expectRefused(archiveOf({h}), "hardlinks are not allowed");
  TarEntry inTree{"b", AE_IFREG, 0644, ""};
  inTree.hardlink = "a";
  inTree.declaredSize = 0;
  expectRefused(archiveOf({file("a"), inTree}), "hardlinks are not allowed");
}

TEST(SnapshotHostileArchive, NonUtf8Names) {
  expectRefused(archiveOf({file("bad\xff")}), "not valid UTF-8");
}

TEST(SnapshotHostileArchive, DeviceNodesAndFifos) {
  TarEntry dev{"null", AE_IFCHR, 0666, ""};
  dev.rdev = makedev(1, 3);
  expectRefused(archiveOf({dev}), "character device entries are not allowed");
  TarEntry blk{"sda", AE_IFBLK, 0666, ""};
  blk.rdev = makedev(8, 0);
  expectRefused(archiveOf({blk}), "block device entries are not allowed");
  expectRefused(archiveOf({TarEntry{"p", AE_IFIFO, 0644, ""}}), "fifo entries are not allowed");
}

TEST(SnapshotHostileArchive, SetuidAndSetgid) {
  expectRefused(archiveOf({TarEntry{"su", AE_IFREG, 04755, "x"}}), "setuid/setgid");
  expectRefused(archiveOf({TarEntry{"sg", AE_IFREG, 02755, "x"}}), "setuid/setgid");
  expectRefused(archiveOf({TarEntry{"d", AE_IFDIR, 02755, ""}}), "setuid/setgid");
}

TEST(SnapshotHostileArchive, TenThousandDeepDirectories) {
  // One entry 10 000 levels deep: refused by its path length before anything is created.
  std::string deep;
  for (int i = 0; i < 10000; ++i) deep += "d/";
  expectRefused(archiveOf({file(deep + "f")}), "above max_path_bytes");
  // The same descent one directory entry at a time: refused by depth.
  std::vector<TarEntry> levels;
  std::string p;
  for (int i = 0; i < 300; ++i) {
    p += (i ? "/d" : "d");
    levels.push_back(TarEntry{p, AE_IFDIR, 0755, ""});
  }
  expectRefused(archiveOf(levels), "depth 257 above max_depth (256)");
}

TEST(SnapshotHostileArchive, ManyRootEntriesDoNotExhaustTheStack) {
  std::vector<TarEntry> roots(100000, TarEntry{"./", AE_IFDIR, 0755});
  roots.push_back(file("a"));
  TempDir t;
  writeFile(t / "a.tar.zst", archiveOf(roots));
  auto s = snap::extractArchive(t / "a.tar.zst", t / "out", {});
  ASSERT_TRUE(s) << s.error().message;
  EXPECT_EQ(listNames(t / "out"), std::vector<std::string>{"a"});
}

TEST(SnapshotHostileArchive, TooManyEntries) {
  std::vector<TarEntry> many;
  for (int i = 0; i < 50; ++i) many.push_back(file(std::string("f") + std::to_string(i)));
  snap::Limits limits;
  limits.max_files = 49;
  expectRefused(archiveOf(many), "more than max_files (49)", limits);
}

TEST(SnapshotHostileArchive, SmallArchiveDeclaring100GiB) {
  // ~1 KiB on disk: a header declaring a 100 GiB file and a few KiB of zeros. Refused at the
  // header, before a byte is written.
  TarEntry big = file("zeros", "");
  big.declaredSize = 100ll << 30;
  std::string bytes = zstdCompress(tarBytes({big}, /*headerOnly=*/true)) + zstdZeroFrame(64);
  EXPECT_LT(bytes.size(), 1500u);
  expectRefused(bytes, "above max_file_bytes");
}

TEST(SnapshotHostileArchive, ZstdBombStopsAtTheRatioLimit) {
  // 1.5 GiB of zeros (within the size limits) in 48 KiB of RLE blocks, ratio ~32 000:1.
  TarEntry big = file("zeros", "");
  big.declaredSize = 1536ll << 20;
  uint64_t blocks = (1536ull << 20) / (128 << 10);
  std::string bytes = zstdCompress(tarBytes({big}, true)) + zstdZeroFrame(blocks);
  EXPECT_LT(bytes.size(), 64u << 10);
  auto start = std::chrono::steady_clock::now();
  expectRefused(bytes, "compression ratio above max_compression_ratio");
  // Two extractions; writing 1.5 GiB each would take far longer than stopping at 64 MiB.
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(20));
}

TEST(SnapshotHostileArchive, LargePartialWriteIsRemovedOnRefusal) {
  // Ratio limit off: 128 MiB of zeros really are written before the stream turns out short.
  TarEntry big = file("zeros", "");
  big.declaredSize = 1536ll << 20;
  std::string bytes = zstdCompress(tarBytes({big}, true)) + zstdZeroFrame(1024);
  snap::Limits limits;
  limits.max_compression_ratio = 1e12;
  expectRefused(bytes, "Truncated tar archive", limits);
}

TEST(SnapshotHostileArchive, HugePathInPaxHeader) {
  // A 32 MiB path travels in a pax extended header that libarchive must buffer.
  // libarchive refuses it itself, before we see the path.
  expectRefused(archiveOf({file(std::string(32 << 20, 'p'))}), "header too large");
}

TEST(SnapshotHostileArchive, TruncatedArchive) {
  TempDir t;
  writeFile(t / "ws/a.bin", randomBytes(1 << 20, 7));
  writeFile(t / "ws/b.txt", "b");
  ASSERT_TRUE(snap::createArchive(t / "ws", t / "s.tar.zst", {}, {}));
  std::string whole = readFile(t / "s.tar.zst");
  expectRefused(whole.substr(0, whole.size() / 2), "");
  expectRefused(whole.substr(0, whole.size() - 3), "truncated");
  expectRefused(whole.substr(0, 3), "");
  expectRefused("", "empty");
}

TEST(SnapshotHostileArchive, CorruptedArchive) {
  TempDir t;
  writeFile(t / "ws/a.bin", randomBytes(1 << 20, 7));
  writeFile(t / "ws/b.txt", std::string(100000, 'b'));
  ASSERT_TRUE(snap::createArchive(t / "ws", t / "s.tar.zst", {}, {}));
  std::string whole = readFile(t / "s.tar.zst");
  std::string flipped = whole;
  flipped[flipped.size() / 2] ^= 0x40;  // inside the random file's raw block: only the checksum sees it
  expectRefused(flipped, "archive is corrupt (zstd)");
  std::string header = whole;
  header[0] ^= 0xff;
  expectRefused(header, "archive is corrupt (zstd)");
  expectRefused(zstdCompress(std::string(4096, 'j')), "");  // valid zstd, not a tar
  expectRefused(whole + "trailing garbage", "archive is corrupt (zstd)");
}

TEST(SnapshotHostileArchive, DestinationMustBeEmpty) {
  TempDir t;
  writeFile(t / "ws/a", "a");
  ASSERT_TRUE(snap::createArchive(t / "ws", t / "s.tar.zst", {}, {}));
  writeFile(t / "dest/existing", "keep");
  auto s = snap::extractArchive(t / "s.tar.zst", t / "dest", {});
  ASSERT_FALSE(s);
  EXPECT_NE(s.error().message.find("not empty"), std::string::npos);
  EXPECT_EQ(listNames(t / "dest"), std::vector<std::string>{"existing"});
  fs::create_symlink(t / "ws", t / "link");
  s = snap::extractArchive(t / "s.tar.zst", t / "link", {});
  ASSERT_FALSE(s);
  EXPECT_NE(s.error().message.find("not a directory"), std::string::npos);
}
