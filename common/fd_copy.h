#pragma once
// Copies a file's bytes from one open descriptor to another in the kernel (sendfile), for copies
// that must stay on descriptors opened without following links.

#include <sys/sendfile.h>
#include <sys/types.h>

#include <cerrno>

namespace akad {

// Copies `bytes` bytes from `in` (from its offset) to `out`; false when fewer could be copied
// (errno says why, if a call failed).
inline bool copyFdBytes(int out, int in, off_t bytes) {
  while (bytes > 0) {
    const ssize_t n = ::sendfile(out, in, nullptr, static_cast<size_t>(bytes));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    bytes -= n;
  }
  return true;
}

}  // namespace akad
