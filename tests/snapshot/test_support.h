#pragma once
// Helpers for the snapshot tests: temporary directories, file trees, and hostile archives built
// with libarchive's writer (and, for bombs, zstd frames assembled by hand).

#include <sys/types.h>

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

namespace snaptest {

namespace fs = std::filesystem;

class TempDir {
 public:
  TempDir();
  ~TempDir();
  const fs::path& path() const { return path_; }
  fs::path operator/(const std::string& s) const { return path_ / s; }

 private:
  fs::path path_;
};

void writeFile(const fs::path& p, const std::string& data, mode_t mode = 0644);
std::string readFile(const fs::path& p);
std::string randomBytes(size_t n, uint64_t seed);

// Every entry under `root`: "file <mode> <content sha256>", "dir <mode>", "symlink <target>".
std::map<std::string, std::string> describeTree(const fs::path& root);
// Names directly in `dir` (to prove nothing was left beside a refused extraction).
std::vector<std::string> listNames(const fs::path& dir);

struct TarEntry {
  std::string path;
  mode_t type = 0100000;  // AE_IFREG
  mode_t perm = 0644;
  std::string data{};
  std::string symlink{};
  std::string hardlink{};
  int64_t declaredSize = -1;  // -1: data.size()
  dev_t rdev = 0;
};

// A pax tar of `entries` (data written as given). With headerOnly, only the headers are kept
// (used for a header that declares more data than follows).
std::string tarBytes(const std::vector<TarEntry>& entries, bool headerOnly = false);
std::string zstdCompress(const std::string& data);
// A zstd frame of `blocks` RLE blocks of 128 KiB zeros: 4 bytes per block.
std::string zstdZeroFrame(uint64_t blocks);

struct CommandResult {
  int rc = -1;
  std::string out, err;
};
CommandResult runAkactl(const std::string& args);

}  // namespace snaptest
