#pragma once
// Image profiles (images/<name>/image.yaml): what a sandbox adds for a toolchain image. The
// format and the rules for applying it are in docs/images.md; this validates and loads it.

#include "common/result.h"

#include <nlohmann/json.hpp>

#include <filesystem>
#include <map>
#include <string>
#include <vector>

namespace akad::images {

struct ImageBind {
  std::filesystem::path src;  // host path, ${image_dir} expanded
  std::filesystem::path dst;  // absolute path inside the sandbox
  bool readonly = true;
  bool optional = false;  // a missing src is skipped instead of failing set-up
};

struct ImageProfile {
  std::string name;
  std::string description;
  std::string requiresGpuVendor = "none";  // "nvidia" | "amd" | "none"
  std::vector<ImageBind> binds;
  std::vector<std::string> pathPrepend;
  std::vector<std::string> libraryPathPrepend;
  std::map<std::string, std::string> env;
  std::filesystem::path imageDir;  // the folder holding image.yaml
};

// Loads and validates one image.yaml; errors name the file and the offending field.
Result<ImageProfile> loadImageProfile(const std::filesystem::path& yamlFile);

// images/<name>/image.yaml under `imagesRoot`; an unknown name lists the known ones.
Result<ImageProfile> findImageProfile(const std::filesystem::path& imagesRoot, const std::string& name);

// Every images/*/image.yaml under `imagesRoot`, by name.
Result<std::vector<ImageProfile>> loadImageProfiles(const std::filesystem::path& imagesRoot);

nlohmann::json toJson(const ImageProfile& profile);

}  // namespace akad::images
