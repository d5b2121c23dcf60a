#include "images/image_profile.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <regex>
#include <set>
#include <system_error>

namespace akad::images {
namespace fs = std::filesystem;

namespace {

// Parsing throws only inside this file; every exit is a Result.
struct ProfileError {
  std::string message;
};

[[noreturn]] void fail(const std::string& message) { throw ProfileError{message}; }

std::string scalar(const YAML::Node& node, const std::string& field) {
  if (!node.IsScalar()) fail("'" + field + "' must be a string");
  return node.as<std::string>();
}

bool boolean(const YAML::Node& node, const std::string& field) {
  if (!node.IsScalar()) fail("'" + field + "' must be true or false");
  std::string v = node.as<std::string>();
  if (v == "true") return true;
  if (v == "false") return false;
  fail("'" + field + "' must be true or false, not '" + v + "'");
}

void requireAbsolute(const std::string& path, const std::string& field) {
  if (path.empty() || path.front() != '/') fail("'" + field + "' must be an absolute path, not '" + path + "'");
  if (path.find("/../") != std::string::npos || (path.size() >= 3 && path.compare(path.size() - 3, 3, "/..") == 0))
    fail("'" + field + "' must not contain '..': '" + path + "'");
}

void onlyKeys(const YAML::Node& map, const std::set<std::string>& allowed, const std::string& where) {
  for (const auto& kv : map) {
    std::string key = kv.first.as<std::string>();
    if (!allowed.count(key)) {
      std::string list;
      for (const std::string& a : allowed) list += (list.empty() ? "" : ", ") + a;
      fail("unknown field '" + key + "' in " + where + " (known: " + list + ")");
    }
  }
}

std::vector<std::string> pathList(const YAML::Node& node, const std::string& field) {
  std::vector<std::string> out;
  if (!node) return out;
  if (!node.IsSequence()) fail("'" + field + "' must be a list of absolute paths");
  for (size_t i = 0; i < node.size(); ++i) {
    std::string p = scalar(node[i], field + "[" + std::to_string(i) + "]");
    requireAbsolute(p, field + "[" + std::to_string(i) + "]");
    if (p.find(':') != std::string::npos) fail("'" + field + "[" + std::to_string(i) + "]' must not contain ':'");
    out.push_back(p);
  }
  return out;
}

ImageProfile parseProfile(const YAML::Node& root, const fs::path& imageDir) {
  if (!root.IsMap()) fail("the file must be a YAML mapping");
  onlyKeys(root, {"name", "description", "requires_gpu_vendor", "binds", "path_prepend", "library_path_prepend", "env"},
           "the profile");
  ImageProfile p;
  p.imageDir = imageDir;
  if (!root["name"]) fail("missing field 'name'");
  p.name = scalar(root["name"], "name");
  if (!std::regex_match(p.name, std::regex("[a-z0-9][a-z0-9-]*")))
    fail("'name' must be lower-case letters, digits and '-', not '" + p.name + "'");
  if (p.name != imageDir.filename().string())
    fail("'name' is '" + p.name + "' but the image folder is '" + imageDir.filename().string() + "'");
  if (!root["description"]) fail("missing field 'description'");
  p.description = scalar(root["description"], "description");

  if (root["requires_gpu_vendor"]) {
    p.requiresGpuVendor = scalar(root["requires_gpu_vendor"], "requires_gpu_vendor");
    if (p.requiresGpuVendor != "nvidia" && p.requiresGpuVendor != "amd" && p.requiresGpuVendor != "none")
      fail("'requires_gpu_vendor' must be nvidia, amd or none, not '" + p.requiresGpuVendor + "'");
  }

  if (const YAML::Node binds = root["binds"]) {
    if (!binds.IsSequence()) fail("'binds' must be a list");
    for (size_t i = 0; i < binds.size(); ++i) {
      std::string where = "binds[" + std::to_string(i) + "]";
      const YAML::Node b = binds[i];
      if (!b.IsMap()) fail("'" + where + "' must be a mapping with src and dst");
      onlyKeys(b, {"src", "dst", "readonly", "optional"}, where);
      if (!b["src"] || !b["dst"]) fail("'" + where + "' needs both src and dst");
      ImageBind bind;
      std::string src = scalar(b["src"], where + ".src");
      // ${image_dir}: this image's folder; ${images_dir}: the folder of all images, so one image
      // can bind another's files (torch binds cuda-hip's hipcc) without a '..'.
      for (const auto& [var, value] : {std::pair<std::string, std::string>{"${image_dir}", imageDir.string()},
                                       {"${images_dir}", imageDir.parent_path().string()}})
        for (size_t at = src.find(var); at != std::string::npos; at = src.find(var, at + 1))
          src.replace(at, var.size(), value);
      if (src.find("${") != std::string::npos) fail("'" + where + ".src' uses an unknown variable: '" + src + "'");
      requireAbsolute(src, where + ".src");
      std::string dst = scalar(b["dst"], where + ".dst");
      requireAbsolute(dst, where + ".dst");
      if (dst == "/") fail("'" + where + ".dst' must not be the sandbox's root");
      bind.src = src;
      bind.dst = dst;
      if (b["readonly"]) bind.readonly = boolean(b["readonly"], where + ".readonly");
      if (b["optional"]) bind.optional = boolean(b["optional"], where + ".optional");
      p.binds.push_back(bind);
    }
  }

  p.pathPrepend = pathList(root["path_prepend"], "path_prepend");
  p.libraryPathPrepend = pathList(root["library_path_prepend"], "library_path_prepend");

  if (const YAML::Node env = root["env"]) {
    if (!env.IsMap()) fail("'env' must be a mapping of NAME: value");
    for (const auto& kv : env) {
      std::string key = kv.first.as<std::string>();
      if (!std::regex_match(key, std::regex("[A-Za-z_][A-Za-z0-9_]*"))) fail("'env' has an invalid variable name '" + key + "'");
      if (key == "PATH" || key == "LD_LIBRARY_PATH")
        fail("'env' must not set " + key + " (use path_prepend / library_path_prepend)");
      p.env[key] = scalar(kv.second, "env." + key);
    }
  }
  return p;
}

}  // namespace

Result<ImageProfile> loadImageProfile(const fs::path& yamlFile) {
  std::error_code ec;
  if (!fs::is_regular_file(yamlFile, ec)) return Error{"image profile " + yamlFile.string() + " does not exist"};
  fs::path imageDir = fs::absolute(yamlFile, ec).parent_path();
  try {
    return parseProfile(YAML::LoadFile(yamlFile.string()), imageDir);
  } catch (const ProfileError& e) {
    return Error{"invalid image profile " + yamlFile.string() + ": " + e.message};
  } catch (const YAML::Exception& e) {
    return Error{"invalid image profile " + yamlFile.string() + ": line " + std::to_string(e.mark.line + 1) + ": " + e.msg};
  }
}

Result<std::vector<ImageProfile>> loadImageProfiles(const fs::path& imagesRoot) {
  std::error_code ec;
  fs::directory_iterator it(imagesRoot, ec);
  if (ec) return Error{"cannot list images in " + imagesRoot.string() + ": " + ec.message()};
  std::vector<ImageProfile> out;
  for (const fs::directory_entry& e : it) {
    fs::path yaml = e.path() / "image.yaml";
    if (!e.is_directory(ec) || !fs::exists(yaml, ec)) continue;
    Result<ImageProfile> p = loadImageProfile(yaml);
    if (!p) return p.error();
    out.push_back(std::move(*p));
  }
  std::sort(out.begin(), out.end(), [](const ImageProfile& a, const ImageProfile& b) { return a.name < b.name; });
  return out;
}

Result<ImageProfile> findImageProfile(const fs::path& imagesRoot, const std::string& name) {
  // Only the named profile is read: a broken profile of another image must not stop this one.
  std::error_code ec;
  bool safeName = !name.empty() && name.find('/') == std::string::npos && name != "." && name != "..";
  if (safeName && fs::is_regular_file(imagesRoot / name / "image.yaml", ec))
    return loadImageProfile(imagesRoot / name / "image.yaml");
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(imagesRoot, ec))
    if (fs::is_regular_file(e.path() / "image.yaml", ec)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  std::string known;
  for (const auto& n : names) known += (known.empty() ? "" : ", ") + n;
  return Error{"unknown image '" + name + "' (images in " + imagesRoot.string() + ": " + known + ")"};
}

nlohmann::json toJson(const ImageProfile& p) {
  nlohmann::json binds = nlohmann::json::array();
  for (const ImageBind& b : p.binds)
    binds.push_back({{"src", b.src.string()}, {"dst", b.dst.string()}, {"readonly", b.readonly}, {"optional", b.optional}});
  return {{"name", p.name},
          {"description", p.description},
          {"requires_gpu_vendor", p.requiresGpuVendor},
          {"binds", binds},
          {"path_prepend", p.pathPrepend},
          {"library_path_prepend", p.libraryPathPrepend},
          {"env", p.env},
          {"image_dir", p.imageDir.string()}};
}

}  // namespace akad::images
