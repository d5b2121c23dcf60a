#include "daemon/pipeline/image.h"

#include "images/image_profile.h"

namespace fs = std::filesystem;

namespace akad {

namespace {

constexpr const char* kDefaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

std::string prepended(const std::vector<std::string>& parts, const std::string& tail) {
  std::string out;
  for (const auto& e : parts) out += (out.empty() ? "" : ":") + e;
  return tail.empty() ? out : out.empty() ? tail : out + ":" + tail;
}

// Adds one loaded profile's binds, variables and path entries to `p`.
Status applyProfile(const images::ImageProfile& loaded, ImageProfile& p) {
  for (const auto& b : loaded.binds) {
    std::error_code ec;
    if (!fs::exists(b.src, ec)) {
      if (b.optional) continue;
      return Error{"image " + loaded.name + ": " + b.src.string() + " does not exist on this host"};
    }
    p.binds.push_back({b.src, b.dst.string(), !b.readonly});
  }
  for (const auto& [k, v] : loaded.env) p.env[k] = v;
  const auto path = p.env.find("PATH");
  p.env["PATH"] = prepended(loaded.pathPrepend, path == p.env.end() ? kDefaultPath : path->second);
  const auto lib = p.env.find("LD_LIBRARY_PATH");
  const std::string libs = prepended(loaded.libraryPathPrepend, lib == p.env.end() ? "" : lib->second);
  if (!libs.empty()) p.env["LD_LIBRARY_PATH"] = libs;
  return {};
}

}  // namespace

Result<ImageProfile> loadImageProfile(const fs::path& imagesDir, const std::string& name) {
  auto loaded = images::findImageProfile(imagesDir, name);
  if (!loaded) return loaded.error();
  ImageProfile p;
  p.name = loaded->name;
  p.requires_gpu_vendor = loaded->requiresGpuVendor;
  if (auto st = applyProfile(*loaded, p); !st) return st.error();
  return p;
}

Status layerImageProfile(ImageProfile& onto, const fs::path& imagesDir, const std::string& name) {
  auto loaded = images::findImageProfile(imagesDir, name);
  if (!loaded) return loaded.error();
  // An agent's image is usually something to install (agent-cli): its description says how.
  if (auto st = applyProfile(*loaded, onto); !st) return Error{st.error().message + " (" + loaded->description + ")"};
  return {};
}

}  // namespace akad
