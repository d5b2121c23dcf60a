#include "daemon/pipeline/files.h"

#include <fcntl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>

#include "common/unique_fd.h"

namespace fs = std::filesystem;

namespace akad {

Status copyModificationTime(const fs::path& from, const fs::path& path) {
  struct stat st {};
  if (::stat(from.c_str(), &st) != 0) return errnoError("cannot stat " + from.string());
  const struct timespec times[2] = {{0, UTIME_OMIT}, st.st_mtim};
  if (::utimensat(AT_FDCWD, path.c_str(), times, AT_SYMLINK_NOFOLLOW) != 0)
    return errnoError("cannot set the modification time of " + path.string());
  return {};
}

Status copyFile(const fs::path& src, const fs::path& dst, FileTimes times) {
  std::error_code ec;
  fs::copy_file(src, dst, fs::copy_options::overwrite_existing, ec);
  if (ec) return Error{"cannot copy " + src.string() + " to " + dst.string() + ": " + ec.message()};
  struct stat st {};
  if (::stat(src.c_str(), &st) == 0)
    ::chmod(dst.c_str(), (st.st_mode & 0111) ? 0755 : 0644);
  if (times == FileTimes::Kept) return copyModificationTime(src, dst);
  return {};
}

Status copyTree(const fs::path& src, const fs::path& dst, FileTimes times) {
  std::error_code ec;
  fs::create_directories(dst, ec);
  if (ec) return Error{"cannot create " + dst.string() + ": " + ec.message()};
  for (fs::recursive_directory_iterator it(src, ec), end; it != end; it.increment(ec)) {
    if (ec) break;
    const fs::path rel = fs::relative(it->path(), src);
    const fs::path target = dst / rel;
    const auto st = it->symlink_status();
    if (fs::is_symlink(st)) {
      fs::remove(target, ec);
      fs::create_symlink(fs::read_symlink(it->path()), target, ec);
    } else if (fs::is_directory(st)) {
      fs::create_directories(target, ec);
    } else if (fs::is_regular_file(st)) {
      if (auto s = copyFile(it->path(), target, times); !s) return s;
    }
    if (ec) return Error{"cannot copy " + it->path().string() + ": " + ec.message()};
  }
  if (ec) return Error{"cannot walk " + src.string() + ": " + ec.message()};
  return {};
}

Status writeFile(const fs::path& path, const std::string& content) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f << content;
  f.close();
  if (!f) return Error{"cannot write " + path.string()};
  return {};
}

Result<std::string> readFileLimited(const fs::path& path, std::size_t maxBytes) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
  if (!fd.valid()) return errnoError("cannot open " + path.string());
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) return errnoError("cannot stat " + path.string());
  if (!S_ISREG(st.st_mode)) return Error{path.string() + " is not a regular file"};
  if (static_cast<std::size_t>(st.st_size) > maxBytes)
    return Error{path.string() + " is " + std::to_string(st.st_size) + " bytes, over the limit of " +
                 std::to_string(maxBytes)};
  std::string out(static_cast<std::size_t>(st.st_size), '\0');
  std::size_t got = 0;
  while (got < out.size()) {
    ssize_t n = ::read(fd.get(), out.data() + got, out.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += static_cast<std::size_t>(n);
  }
  out.resize(got);
  return out;
}

std::string tailOfFile(const fs::path& path, std::size_t maxBytes) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
  if (!fd.valid()) return {};
  off_t size = ::lseek(fd.get(), 0, SEEK_END);
  off_t from = size > static_cast<off_t>(maxBytes) ? size - static_cast<off_t>(maxBytes) : 0;
  std::string out(static_cast<std::size_t>(size - from), '\0');
  ssize_t n = ::pread(fd.get(), out.data(), out.size(), from);
  out.resize(n > 0 ? static_cast<std::size_t>(n) : 0);
  return out;
}

Status chownTree(const fs::path& root, uid_t uid, gid_t gid) {
  if (::lchown(root.c_str(), uid, gid) != 0) return errnoError("cannot chown " + root.string());
  std::error_code ec;
  for (fs::recursive_directory_iterator it(root, ec), end; it != end; it.increment(ec)) {
    if (ec) break;
    if (::lchown(it->path().c_str(), uid, gid) != 0) return errnoError("cannot chown " + it->path().string());
  }
  if (ec) return Error{"cannot walk " + root.string() + ": " + ec.message()};
  return {};
}

uint64_t secureRandom64() {
  uint64_t v = 0;
  while (::getrandom(&v, sizeof v, 0) != static_cast<ssize_t>(sizeof v)) {
  }
  return v;
}

std::string randomHex(std::size_t bytes) {
  static const char* hex = "0123456789abcdef";
  std::string out;
  for (std::size_t i = 0; i < bytes; ++i) {
    unsigned char b = static_cast<unsigned char>(secureRandom64());
    out += hex[b >> 4];
    out += hex[b & 0xf];
  }
  return out;
}

}  // namespace akad
