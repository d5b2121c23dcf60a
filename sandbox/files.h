#pragma once
// Whole files read into memory: spec files, seccomp policies, cgroup and /proc files.

#include <cstddef>
#include <cstdint>
#include <string>

#include "common/result.h"

namespace akad::box {

// The rest of an open file from its offset, read in pieces (/proc and cgroup files report no
// useful size), at most `limit` bytes. `what` names the file in errors ("spec file"); `path`
// is quoted after it.
Result<std::string> readRest(int fd, const std::string& path, size_t limit = SIZE_MAX, const std::string& what = "");
// The same for a file by path.
Result<std::string> readWholeFile(const std::string& path, size_t limit = SIZE_MAX, const std::string& what = "");

}  // namespace akad::box
