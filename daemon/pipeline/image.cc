#include "daemon/pipeline/image.h"

#include "images/image_profile.h"

namespace fs = std::filesystem;

namespace akad {

Result<ImageProfile> loadImageProfile(const fs::path& imagesDir, const std::string& name) {
  auto loaded = images::findImageProfile(imagesDir, name);
  if (!loaded) return loaded.error();
  ImageProfile p;
  p.name = loaded->name;
  p.requires_gpu_vendor = loaded->requiresGpuVendor;
  for (const auto& b : loaded->binds) {
    std::error_code ec;
    if (!fs::exists(b.src, ec)) {
      if (b.optional) continue;
      return Error{"image " + name + ": " + b.src.string() + " does not exist on this host"};
    }
    p.binds.push_back({b.src, b.dst.string(), !b.readonly});
  }
  p.env = loaded->env;
  auto joined = [](const std::vector<std::string>& parts, const std::string& tail) {
    std::string out;
    for (const auto& e : parts) out += e + ":";
    return tail.empty() && !out.empty() ? out.substr(0, out.size() - 1) : out + tail;
  };
  p.env["PATH"] = joined(loaded->pathPrepend, "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin");
  if (!loaded->libraryPathPrepend.empty()) p.env["LD_LIBRARY_PATH"] = joined(loaded->libraryPathPrepend, "");
  return p;
}

}  // namespace akad
