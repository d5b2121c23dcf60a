#include "daemon/pipeline/image.h"

#include <regex>

#include <yaml-cpp/yaml.h>

namespace fs = std::filesystem;

namespace akad {

Result<ImageProfile> loadImageProfile(const fs::path& imagesDir, const std::string& name) {
  static const std::regex nameRe("[a-z0-9][a-z0-9_-]{0,63}");
  if (!std::regex_match(name, nameRe)) return Error{"image name '" + name + "' is not valid"};
  const fs::path dir = imagesDir / name;
  const fs::path file = dir / "image.yaml";
  ImageProfile p;
  p.name = name;
  if (!fs::exists(file)) {
    if (name == "host") return p;  // the embedded default needs nothing
    return Error{"unknown image '" + name + "': " + file.string() + " does not exist"};
  }
  YAML::Node root;
  try {
    root = YAML::LoadFile(file.string());
  } catch (const YAML::Exception& e) {
    return Error{file.string() + ": not valid YAML: " + e.what()};
  }
  try {
    std::string path = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
    if (const YAML::Node env = root["env"]) {
      if (!env.IsMap()) return Error{file.string() + ": env: must be a map"};
      for (const auto& kv : env) p.env[kv.first.as<std::string>()] = kv.second.as<std::string>();
    }
    if (const YAML::Node binds = root["binds"]) {
      if (!binds.IsSequence()) return Error{file.string() + ": binds: must be a list"};
      for (const auto& b : binds) {
        if (!b.IsMap() || !b["source"] || !b["target"])
          return Error{file.string() + ": binds: every bind needs source and target"};
        fs::path src = b["source"].as<std::string>();
        if (src.is_relative()) src = dir / src;
        const bool optional = b["optional"] && b["optional"].as<bool>();
        if (!fs::exists(src)) {
          if (optional) continue;
          return Error{file.string() + ": binds: " + src.string() + " does not exist on this host"};
        }
        p.binds.push_back({src, b["target"].as<std::string>(), false});
      }
    }
    if (const YAML::Node pre = root["path_prepend"]) {
      if (!pre.IsSequence()) return Error{file.string() + ": path_prepend: must be a list"};
      std::string prefix;
      for (const auto& e : pre) prefix += e.as<std::string>() + ":";
      path = prefix + path;
    }
    if (!p.env.count("PATH")) p.env["PATH"] = path;
  } catch (const YAML::Exception& e) {
    return Error{file.string() + ": wrong type: " + e.what()};
  }
  return p;
}

}  // namespace akad
