#pragma once
// Writes that survive a crash whole or not at all: the snapshot store's archives and manifests,
// and the Slurm executor's shared area (daemon/slurm/shared_area.h).

#include <sys/types.h>

#include <cstddef>
#include <filesystem>
#include <string>

#include "common/result.h"

namespace akad {

// fsync of a file or folder, by path.
Status fsyncPath(const std::filesystem::path& path);
// All of `size` bytes to `fd`, retrying short writes; `what` names the file in the error.
Status writeAll(int fd, const char* data, std::size_t size, const std::filesystem::path& what);
// `content` to `path`: a temporary file in the same folder (mode `mode`), fsync, rename over
// `path`, fsync of the folder. A reader sees the old file or the whole new one.
Status writeFileDurably(const std::filesystem::path& path, const std::string& content, mode_t mode = 0644);

}  // namespace akad
