#include "sandbox/files.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>

#include "common/unique_fd.h"

namespace akad::box {
namespace {

std::string named(const std::string& what, const std::string& path) {
  return (what.empty() ? "" : what + " ") + "'" + path + "'";
}

}  // namespace

Result<std::string> readRest(int fd, const std::string& path, size_t limit, const std::string& what) {
  std::string out;
  char buf[16384];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return errnoError("cannot read " + named(what, path));
    if (n == 0) return out;
    out.append(buf, static_cast<size_t>(n));
    if (out.size() > limit)
      return Error{named(what, path) + " is larger than " + std::to_string(limit >> 20) + " MiB"};
  }
}

Result<std::string> readWholeFile(const std::string& path, size_t limit, const std::string& what) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) return errnoError("cannot open " + named(what, path));
  return readRest(fd.get(), path, limit, what);
}

}  // namespace akad::box
