#include "images/image_profile.h"

#include "common/config_check.h"
#include "common/yaml_json.h"

#include <algorithm>
#include <regex>
#include <system_error>

namespace akad::images {
namespace fs = std::filesystem;

namespace {

using nlohmann::json;

bool isAbsoluteWithoutDotDot(const std::string& path) {
  if (path.empty() || path.front() != '/') return false;
  return path.find("/../") == std::string::npos && !(path.size() >= 3 && path.compare(path.size() - 3, 3, "/..") == 0);
}

void requireAbsolute(ConfigCheck& check, const std::string& path, const std::string& field) {
  if (path.empty() || path.front() != '/') check.fail(field, "must be an absolute path, not '" + path + "'");
  else if (!isAbsoluteWithoutDotDot(path)) check.fail(field, "must not contain '..': '" + path + "'");
}

std::vector<std::string> pathList(ConfigCheck& check, const json& root, const std::string& field) {
  std::vector<std::string> out;
  const json* list = check.member(root, "", field);
  if (!list || !check.strings(*list, field, out)) return {};
  for (size_t i = 0; i < out.size(); ++i) {
    requireAbsolute(check, out[i], indexPath(field, i));
    if (out[i].find(':') != std::string::npos) check.fail(indexPath(field, i), "must not contain ':'");
  }
  return out;
}

void checkName(ConfigCheck& check, const json& root, ImageProfile& p) {
  if (!check.readString(root, "", "name", p.name, ConfigCheck::Required)) return;
  if (!std::regex_match(p.name, std::regex("[a-z0-9][a-z0-9-]*")))
    check.fail("name", "must be lower-case letters, digits and '-', not '" + p.name + "'");
  if (p.name != p.imageDir.filename().string())
    check.fail("name", "is '" + p.name + "' but the image folder is '" + p.imageDir.filename().string() + "'");
}

// ${image_dir}: this image's folder; ${images_dir}: the folder of all images, so one image can
// bind another's files (torch binds cuda-hip's hipcc) without a '..'.
std::string expandImageVariables(std::string src, const fs::path& imageDir) {
  for (const auto& [var, value] : {std::pair<std::string, std::string>{"${image_dir}", imageDir.string()},
                                   {"${images_dir}", imageDir.parent_path().string()}})
    for (size_t at = src.find(var); at != std::string::npos; at = src.find(var, at + 1)) src.replace(at, var.size(), value);
  return src;
}

void checkBind(ConfigCheck& check, const json& b, const std::string& where, ImageProfile& p) {
  if (!check.map(b, where, "src, dst, readonly and optional")) return;
  check.onlyKeys(b, where, {"src", "dst", "readonly", "optional"});
  ImageBind bind;
  std::string src, dst;
  if (!b.contains("src") || !b.contains("dst")) {
    check.fail(where, "needs both src and dst");
  } else {
    if (check.string(b["src"], keyPath(where, "src"), src)) {
      src = expandImageVariables(src, p.imageDir);
      if (src.find("${") != std::string::npos) check.fail(keyPath(where, "src"), "uses an unknown variable: '" + src + "'");
      else requireAbsolute(check, src, keyPath(where, "src"));
    }
    if (check.string(b["dst"], keyPath(where, "dst"), dst)) {
      requireAbsolute(check, dst, keyPath(where, "dst"));
      if (dst == "/") check.fail(keyPath(where, "dst"), "must not be the sandbox's root");
    }
  }
  bind.src = src;
  bind.dst = dst;
  check.readBool(b, where, "readonly", bind.readonly);
  check.readBool(b, where, "optional", bind.optional);
  p.binds.push_back(bind);
}

void checkEnv(ConfigCheck& check, const json& root, ImageProfile& p) {
  const json* env = check.member(root, "", "env");
  if (!env || !check.stringMap(*env, "env", p.env)) return;
  for (const auto& [key, value] : p.env) {
    if (!std::regex_match(key, std::regex("[A-Za-z_][A-Za-z0-9_]*"))) check.fail("env", "has an invalid variable name '" + key + "'");
    if (key == "PATH" || key == "LD_LIBRARY_PATH")
      check.fail("env", "must not set " + key + " (use path_prepend / library_path_prepend)");
  }
}

ImageProfile checkProfile(ConfigCheck& check, const json& root, const fs::path& imageDir) {
  ImageProfile p;
  p.imageDir = imageDir;
  if (!root.is_object()) {
    check.fail("", "the file must be a YAML mapping");
    return p;
  }
  check.onlyKeys(root, "", {"name", "description", "requires_gpu_vendor", "binds", "path_prepend", "library_path_prepend", "env"});
  checkName(check, root, p);
  check.readString(root, "", "description", p.description, ConfigCheck::Required);
  if (check.readString(root, "", "requires_gpu_vendor", p.requiresGpuVendor) && p.requiresGpuVendor != "nvidia" &&
      p.requiresGpuVendor != "amd" && p.requiresGpuVendor != "none")
    check.fail("requires_gpu_vendor", "must be nvidia, amd or none, not '" + p.requiresGpuVendor + "'");
  if (const json* binds = check.member(root, "", "binds")) {
    if (!binds->is_array()) check.fail("binds", "must be a list");
    else
      for (size_t i = 0; i < binds->size(); ++i) checkBind(check, (*binds)[i], indexPath("binds", i), p);
  }
  p.pathPrepend = pathList(check, root, "path_prepend");
  p.libraryPathPrepend = pathList(check, root, "library_path_prepend");
  checkEnv(check, root, p);
  return p;
}

}  // namespace

Result<ImageProfile> loadImageProfile(const fs::path& yamlFile) {
  std::error_code ec;
  if (!fs::is_regular_file(yamlFile, ec)) return Error{"image profile " + yamlFile.string() + " does not exist"};
  fs::path imageDir = fs::absolute(yamlFile, ec).parent_path();
  auto doc = loadYamlDocument(yamlFile);
  if (!doc) return Error{"invalid image profile " + doc.error().message};
  ConfigCheck check(yamlFile.string(), &doc->texts);
  ImageProfile p = checkProfile(check, doc->root, imageDir);
  if (!check.ok()) return check.error();
  return p;
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
