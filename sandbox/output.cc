#include "sandbox/output.h"

#include <fcntl.h>
#include <unistd.h>

namespace akad::box {
namespace {
void writeAll(int fd, const char* p, size_t n) {
  while (n > 0) {
    ssize_t w = ::write(fd, p, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      return;  // a closed destination must not stall the sandbox; the bytes still count
    }
    p += w;
    n -= static_cast<size_t>(w);
  }
}
}  // namespace

Status OutputCapture::open(const std::string& stdoutPath, const std::string& stderrPath) {
  auto openSink = [](Sink& s, const std::string& path, int fallback) -> Status {
    if (path.empty()) {
      s.fd = fallback;
      return {};
    }
    // Never through a link: akabox is root, and a sandbox that could plant one where a log goes
    // would have root write whatever it prints wherever it chose.
    int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0) return errnoError("cannot open output file '" + path + "'");
    s.owned.reset(fd);
    s.fd = fd;
    return {};
  };
  if (auto st = openSink(out_, stdoutPath, 1); !st) return st;
  if (stderrPath == stdoutPath && !stdoutPath.empty()) {
    err_.fd = out_.fd;
    return {};
  }
  return openSink(err_, stderrPath, 2);
}

bool OutputCapture::drain(int pipeFd, Stream s) {
  Sink& sink = s == Stream::Out ? out_ : err_;
  char buf[65536];
  for (;;) {
    ssize_t n = ::read(pipeFd, buf, sizeof(buf));
    if (n < 0) return errno == EAGAIN || errno == EINTR;
    if (n == 0) return false;
    size_t keep = static_cast<size_t>(n);
    if (limit_) {
      uint64_t used = out_.bytes + err_.bytes;
      uint64_t room = used >= limit_ ? 0 : limit_ - used;
      if (keep > room) {
        keep = static_cast<size_t>(room);
        truncated_ = true;
      }
    }
    if (keep) writeAll(sink.fd, buf, keep);
    sink.bytes += keep;
    if (static_cast<size_t>(n) < sizeof(buf)) return true;
  }
}

}  // namespace akad::box
