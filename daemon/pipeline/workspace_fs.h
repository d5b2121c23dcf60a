#pragma once
// The agent's workspace as a file system of its own: a tmpfs mounted (in akad's mount
// namespace) on <state>/attempts/<id>/workspace with a hard size (size=) and inode count
// (nr_inodes=), so an agent that writes more gets ENOSPC from the kernel instead of filling the
// host's disk. Its pages are charged to the memory cgroup of the sandbox that writes them, so
// the workspace is also inside the agent's memory limit. Unmounting drops it whole, on every
// path out of the attempt (docs/operations.md, "Multi-tenant deployment": Disk).

#include <sys/types.h>

#include <cstdint>
#include <filesystem>
#include <optional>

#include "common/result.h"

namespace akad {

struct WorkspaceLimits {
  std::uint64_t bytes = 0;   // 0: no file system of its own (the directory on the state dir's disk)
  std::uint64_t inodes = 0;  // files and directories
};

// A workspace directory; with limits, a mounted tmpfs. The destructor unmounts it and removes
// the directory, whatever happened in between.
class Workspace {
 public:
  // Creates `dir` (which must not exist) owned by uid:gid, mode 0700.
  static Result<Workspace> create(const std::filesystem::path& dir, const WorkspaceLimits& limits, uid_t uid,
                                  gid_t gid);
  Workspace(Workspace&& other) noexcept : dir_(std::move(other.dir_)), mounted_(other.mounted_) {
    other.dir_.reset();
  }
  Workspace& operator=(Workspace&&) = delete;
  Workspace(const Workspace&) = delete;
  ~Workspace() { remove(); }
  const std::filesystem::path& path() const { return *dir_; }
  bool mounted() const { return mounted_; }
  // Unmounts (if mounted) and removes the directory now.
  void remove();

 private:
  Workspace(std::filesystem::path dir, bool mounted) : dir_(std::move(dir)), mounted_(mounted) {}
  std::optional<std::filesystem::path> dir_;
  bool mounted_ = false;
};

// Unmounts every mount at or below `root` (deepest first), as a daemon killed mid-attempt left
// them; returns how many. Lazy (MNT_DETACH), so a busy one goes as soon as it is free.
int unmountEverythingUnder(const std::filesystem::path& root);

}  // namespace akad
