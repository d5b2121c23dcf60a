#pragma once
// Where tasks/, images/ and policies/ are, for akad, akabox and akactl alike. Header-only:
// akabox links nothing else of akacommon.

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string_view>

#include "akad/version.h"

namespace akad {

// $AKAD_DATA_DIR; else, for a binary run from the build tree it was built in, the source tree;
// else (an installed binary) the data directory `cmake --install` filled.
inline std::filesystem::path dataRoot() {
  if (const char* v = std::getenv("AKAD_DATA_DIR"); v != nullptr && *v != '\0') return v;
  char self[4096];
  const ssize_t n = ::readlink("/proc/self/exe", self, sizeof self - 1);
  if (n > 0) {
    const std::string_view exe(self, static_cast<size_t>(n)), build(kBuildRoot);
    if (exe.size() > build.size() && exe.substr(0, build.size()) == build && exe[build.size()] == '/') return kSourceRoot;
  }
  return kInstallDataDir;
}

}  // namespace akad
