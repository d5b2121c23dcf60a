#include "tests/snapshot/test_support.h"

#include <archive.h>
#include <archive_entry.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <zstd.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <random>
#include <sstream>
#include <stdexcept>

#include "common/sha256.h"

namespace snaptest {

TempDir::TempDir() {
  std::string tmpl = (fs::temp_directory_path() / "akasnap-test-XXXXXX").string();
  if (::mkdtemp(tmpl.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
  path_ = tmpl;
}

TempDir::~TempDir() {
  std::error_code ec;
  fs::remove_all(path_, ec);
}

void writeFile(const fs::path& p, const std::string& data, mode_t mode) {
  fs::create_directories(p.parent_path());
  {
    std::ofstream out(p, std::ios::binary | std::ios::trunc);
    out << data;
  }
  fs::permissions(p, static_cast<fs::perms>(mode));
}

std::string readFile(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string randomBytes(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::string s(n, '\0');
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t v = rng();
    std::memcpy(&s[i], &v, 8);
  }
  for (; i < n; ++i) s[i] = static_cast<char>(rng());
  return s;
}

std::map<std::string, std::string> describeTree(const fs::path& root) {
  std::map<std::string, std::string> out;
  for (auto it = fs::recursive_directory_iterator(root); it != fs::recursive_directory_iterator(); ++it) {
    std::string rel = it->path().lexically_relative(root).string();
    struct stat st;
    ::lstat(it->path().c_str(), &st);
    char mode[8];
    std::snprintf(mode, sizeof mode, "%04o", st.st_mode & 07777);
    if (S_ISLNK(st.st_mode))
      out[rel] = "symlink " + fs::read_symlink(it->path()).string();
    else if (S_ISDIR(st.st_mode))
      out[rel] = std::string("dir ") + mode;
    else
      out[rel] = std::string("file ") + mode + " " + akad::sha256Hex(readFile(it->path()));
  }
  return out;
}

std::vector<std::string> listNames(const fs::path& dir) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

namespace {
la_ssize_t appendToString(archive*, void* client, const void* buf, size_t n) {
  static_cast<std::string*>(client)->append(static_cast<const char*>(buf), n);
  return static_cast<la_ssize_t>(n);
}
}  // namespace

std::string tarBytes(const std::vector<TarEntry>& entries, bool headerOnly) {
  std::string out;
  archive* a = archive_write_new();
  archive_write_set_format_pax_restricted(a);
  bool nonAscii = false;
  for (const auto& t : entries)
    for (char c : t.path) nonAscii |= static_cast<unsigned char>(c) >= 0x80;
  if (nonAscii) archive_write_set_options(a, "hdrcharset=BINARY");  // raw bytes, even invalid UTF-8
  archive_write_set_bytes_per_block(a, 0);
  archive_write_open2(a, &out, nullptr, appendToString, nullptr, nullptr);
  for (const auto& t : entries) {
    archive_entry* e = archive_entry_new();
    archive_entry_set_pathname(e, t.path.c_str());
    archive_entry_set_filetype(e, t.type);
    archive_entry_set_perm(e, t.perm);
    archive_entry_set_size(e, t.declaredSize >= 0 ? t.declaredSize : static_cast<int64_t>(t.data.size()));
    if (!t.symlink.empty()) archive_entry_set_symlink(e, t.symlink.c_str());
    if (!t.hardlink.empty()) archive_entry_set_hardlink(e, t.hardlink.c_str());
    if (t.rdev) archive_entry_set_rdev(e, t.rdev);
    if (archive_write_header(a, e) != ARCHIVE_OK) throw std::runtime_error(archive_error_string(a));
    archive_entry_free(e);
    if (!headerOnly && !t.data.empty()) archive_write_data(a, t.data.data(), t.data.size());
  }
  if (headerOnly)
    archive_write_fail(a);  // abandon: the declared data never follows
  else
    archive_write_close(a);
  archive_write_free(a);
  return out;
}

std::string zstdCompress(const std::string& data) {
  std::string out(ZSTD_compressBound(data.size()), '\0');
  size_t n = ZSTD_compress(out.data(), out.size(), data.data(), data.size(), 3);
  if (ZSTD_isError(n)) throw std::runtime_error(ZSTD_getErrorName(n));
  out.resize(n);
  return out;
}

std::string zstdZeroFrame(uint64_t blocks) {
  std::string f;
  const unsigned char header[] = {0x28, 0xB5, 0x2F, 0xFD,  // magic, little-endian
                                  0x00,                    // no checksum, no content size, not single-segment
                                  0x38};                   // window 2^(10+7) = 128 KiB
  f.append(reinterpret_cast<const char*>(header), sizeof header);
  const uint32_t blockSize = 128 * 1024;
  for (uint64_t i = 0; i < blocks; ++i) {
    uint32_t last = i + 1 == blocks ? 1 : 0;
    uint32_t h = last | (1u << 1) /* RLE */ | (blockSize << 3);
    f.push_back(static_cast<char>(h & 0xff));
    f.push_back(static_cast<char>((h >> 8) & 0xff));
    f.push_back(static_cast<char>((h >> 16) & 0xff));
    f.push_back('\0');  // the repeated byte
  }
  return f;
}

CommandResult runAkactl(const std::string& args) {
  static int counter = 0;
  std::string base = (fs::temp_directory_path() / (std::string("akasnap-cli-") + std::to_string(::getpid()) + "-" +
                                                   std::to_string(counter++)))
                         .string();
  std::string cmd = std::string(AKACTL_PATH) + " " + args + " >" + base + ".out 2>" + base + ".err";
  int status = std::system(cmd.c_str());
  CommandResult r;
  r.rc = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.out = readFile(base + ".out");
  r.err = readFile(base + ".err");
  fs::remove(base + ".out");
  fs::remove(base + ".err");
  return r;
}

}  // namespace snaptest
