#include "daemon/aka/wrap_compat.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "daemon/aka/classify.h"
#include "daemon/aka/wrap_score.h"
#include "daemon/pipeline/files.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace akad::aka {
namespace {

constexpr const char* kCudaHipInSandbox = "/akad/images/cuda-hip";
constexpr const char* kRecordInSandbox = "/akad/aka-compat-record";
constexpr std::size_t kMaxRecordBytes = 1 << 20;

bool isHipFeature(const std::string& f) {
  return f == compat::kHipExtension || f == compat::kHipToolchain || f == compat::kRocmTorchHeaders ||
         f == compat::kHipblas || f == compat::kHipRuntimeMacros || f == compat::kHostReadsDeviceMemory;
}

}  // namespace

CompatLayer locateCompatLayer(const WrapSpec& spec, const ImageProfile& image) {
  CompatLayer layer;
  if (spec.platform != "nvidia" || spec.cls != "compat") return layer;
  std::vector<std::string> needed;
  for (const auto& f : spec.compat)
    if (f != compat::kPerfHelpers) needed.push_back(f);
  if (needed.empty()) return layer;
  for (const auto& b : image.binds)
    if (b.target == kCudaHipInSandbox) {
      layer.hostDir = b.source / "aka-compat";
      layer.sandboxDir = b.target + "/aka-compat";
    }
  std::error_code ec;
  if (layer.hostDir.empty() || !fs::is_directory(layer.hostDir / "python", ec)) {
    layer.unavailable = "the task's image '" + image.name + "' has no compat layer (cuda-hip's aka-compat at " +
                        kCudaHipInSandbox + "); not applied: " + std::to_string(needed.size()) + " feature(s)";
    layer.hostDir.clear();
    layer.sandboxDir.clear();
    return layer;
  }
  layer.features = needed;
  return layer;
}

Status addCompatLayer(SandboxRequest& r, const CompatLayer& layer, const fs::path& recordDir, uid_t uid, gid_t gid) {
  if (!layer.active()) return {};
  std::error_code ec;
  fs::create_directories(recordDir, ec);
  if (ec) return Error{"cannot create " + recordDir.string() + ": " + ec.message()};
  if (uid != 0 && ::chown(recordDir.c_str(), uid, gid) != 0)
    return Error{"cannot give " + recordDir.string() + " to uid " + std::to_string(uid) + ": " + std::strerror(errno)};
  r.binds.push_back({recordDir, kRecordInSandbox, true});
  std::string features;
  bool hip = false;
  for (const auto& f : layer.features) {
    features += (features.empty() ? "" : ",") + f;
    hip = hip || isHipFeature(f);
  }
  r.env["AKAD_AKA_COMPAT"] = features;
  r.env["AKAD_AKA_COMPAT_RECORD"] = std::string(kRecordInSandbox) + "/record.jsonl";
  const std::string site = r.env.count("PYTHONPATH") ? r.env["PYTHONPATH"] + ":" : "";
  r.env["PYTHONPATH"] = site + layer.sandboxDir + "/python";
  // AMD Makefiles name ROCm's compiler as `HIPCXX ?= /opt/rocm/bin/hipcc`: the image's instead.
  if (auto hipPath = r.env.find("HIP_PATH"); hip && hipPath != r.env.end()) r.env["HIPCXX"] = hipPath->second + "/bin/hipcc";
  return {};
}

std::vector<json> readCompatRecord(const fs::path& recordDir, std::size_t limit) {
  std::vector<json> out;
  const fs::path file = recordDir / "record.jsonl";
  std::error_code ec;
  if (!fs::is_regular_file(fs::symlink_status(file, ec))) return out;
  auto text = readFileLimited(file, kMaxRecordBytes);
  if (!text) return out;
  std::size_t at = 0;
  while (at < text->size() && out.size() < limit) {
    std::size_t end = text->find('\n', at);
    if (end == std::string::npos) end = text->size();
    json line = json::parse(text->substr(at, end - at), nullptr, false);
    if (line.is_object() && line.contains("feature") && line["feature"].is_string()) out.push_back(std::move(line));
    at = end + 1;
  }
  return out;
}

}  // namespace akad::aka
