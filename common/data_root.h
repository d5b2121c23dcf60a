#pragma once
// Where akad's data (tasks/, images/, policies/) and its companion programs (akabox,
// akacheck, akad-node, akanet-bridge) are, for akad, akabox and akactl alike: one rule for
// "run from the build tree or installed". Header-only: akabox links nothing else of
// akacommon.

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <string_view>
#include <system_error>

#include "akad/version.h"

namespace akad {

// The running program's own file (/proc/self/exe); empty if it cannot be read.
inline std::filesystem::path ownExecutable() {
  char self[4096];
  const ssize_t n = ::readlink("/proc/self/exe", self, sizeof self - 1);
  return n > 0 ? std::filesystem::path(std::string(self, static_cast<size_t>(n))) : std::filesystem::path();
}

// Whether the running program lies under the build tree it was built in (kBuildRoot).
inline bool runFromBuildTree() {
  const std::string exe = ownExecutable().string();
  const std::string_view build(kBuildRoot);
  return exe.size() > build.size() && exe.compare(0, build.size(), build) == 0 && exe[build.size()] == '/';
}

// $AKAD_DATA_DIR; else, for a binary run from the build tree it was built in, the source tree;
// else (an installed binary) the data directory `cmake --install` filled.
inline std::filesystem::path dataRoot() {
  if (const char* v = std::getenv("AKAD_DATA_DIR"); v != nullptr && *v != '\0') return v;
  return runFromBuildTree() ? std::filesystem::path(kSourceRoot) : std::filesystem::path(kInstallDataDir);
}

// A program that ships with akad: beside the running one (an install puts them all in one
// bin/, and the build tree puts some side by side), else, run from the build tree, where the
// build made it (`buildDir`, relative to the build root: "sandbox", "tasks"); else the bare
// name, for PATH.
inline std::filesystem::path companionProgram(const std::string& name, const std::string& buildDir) {
  const std::filesystem::path self = ownExecutable();
  if (!self.empty())
    if (const auto beside = self.parent_path() / name; ::access(beside.c_str(), X_OK) == 0) return beside;
  if (runFromBuildTree())
    if (const auto built = std::filesystem::path(kBuildRoot) / buildDir / name; ::access(built.c_str(), X_OK) == 0)
      return built;
  return name;
}

}  // namespace akad
