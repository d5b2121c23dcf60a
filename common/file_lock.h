#pragma once
// An flock(2) on a lock file, held until the object goes: shared state on disk that several
// processes use (the snapshot store, trusted builds) is changed under it.

#include <fcntl.h>
#include <sys/file.h>

#include <cerrno>
#include <filesystem>
#include <string>

#include "common/result.h"
#include "common/unique_fd.h"

namespace akad {

class FileLock {
 public:
  // Creates `file` if needed and takes the lock (op: LOCK_EX or LOCK_SH), waiting for it.
  Status acquire(const std::filesystem::path& file, int op) {
    fd_.reset(::open(file.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644));
    if (!fd_.valid()) return errnoError("cannot open the lock file " + file.string());
    while (::flock(fd_.get(), op) != 0)
      if (errno != EINTR) return errnoError("cannot lock " + file.string());
    return {};
  }

 private:
  UniqueFd fd_;  // closing it releases the lock
};

}  // namespace akad
