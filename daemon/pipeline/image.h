#pragma once
// Toolchain images (images/<name>/image.yaml, docs/images.md): what a sandbox needs beyond the
// host's read-only system folders for a task's toolchain: extra read-only binds and variables.

#include <filesystem>
#include <string>

#include "common/result.h"
#include "daemon/pipeline/score.h"

namespace akad {

// Loads images/<name>/image.yaml. Bind sources relative to the image folder are resolved
// against it; optional binds whose source is missing are left out.
Result<ImageProfile> loadImageProfile(const std::filesystem::path& imagesDir, const std::string& name);

// Lays images/<name>/image.yaml over `onto` (an agent's own image over the task's): its binds
// after onto's, its PATH and LD_LIBRARY_PATH entries in front of onto's, its variables over
// onto's. `onto` keeps its name and GPU vendor: the task's toolchain still decides those.
Status layerImageProfile(ImageProfile& onto, const std::filesystem::path& imagesDir, const std::string& name);

}  // namespace akad
