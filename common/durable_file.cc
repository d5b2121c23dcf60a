#include "common/durable_file.h"

#include <fcntl.h>
#include <sys/random.h>
#include <unistd.h>

#include <cerrno>

#include "common/unique_fd.h"

namespace fs = std::filesystem;

namespace akad {

Status fsyncPath(const fs::path& p) {
  UniqueFd fd(::open(p.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) return errnoError("cannot open " + p.string() + " to fsync it");
  if (::fsync(fd.get()) != 0) return errnoError("cannot fsync " + p.string());
  return {};
}

Status writeAll(int fd, const char* data, std::size_t size, const fs::path& what) {
  while (size > 0) {
    const ssize_t w = ::write(fd, data, size);
    if (w < 0) {
      if (errno == EINTR) continue;
      return errnoError("cannot write " + what.string());
    }
    data += w;
    size -= static_cast<std::size_t>(w);
  }
  return {};
}

Status writeFileDurably(const fs::path& path, const std::string& content, mode_t mode) {
  std::uint64_t nonce = 0;
  if (::getrandom(&nonce, sizeof nonce, 0) != static_cast<ssize_t>(sizeof nonce)) nonce = static_cast<std::uint64_t>(::getpid());
  std::string name = ".";  // appended piece by piece: g++ 12 warns (-Wrestrict) on "." + string
  name += path.filename().string();
  name += ".tmp-";
  name += std::to_string(nonce);
  const fs::path tmp = path.parent_path() / name;
  {
    UniqueFd fd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode));
    if (!fd.valid()) return errnoError("cannot create " + tmp.string());
    Status written = writeAll(fd.get(), content.data(), content.size(), tmp);
    if (written && ::fsync(fd.get()) != 0) written = errnoError("cannot fsync " + tmp.string());
    if (!written) {
      ::unlink(tmp.c_str());
      return written;
    }
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const Error e = errnoError("cannot rename " + tmp.string() + " to " + path.string());
    ::unlink(tmp.c_str());
    return e;
  }
  return fsyncPath(path.parent_path());
}

}  // namespace akad
