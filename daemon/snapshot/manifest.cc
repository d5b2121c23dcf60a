#include <string>

#include "daemon/snapshot/snapshot.h"

namespace akad::snapshot {

nlohmann::json Manifest::toJson() const {
  nlohmann::json entriesJson = nlohmann::json::array();
  for (const auto& e : entries) {
    nlohmann::json j{{"path", e.path}, {"type", e.type}, {"mode", e.mode}};
    if (e.type == "file") {
      j["size"] = e.size;
      j["sha256"] = e.sha256;
    } else if (e.type == "symlink") {
      j["link_target"] = e.link_target;
    }
    entriesJson.push_back(std::move(j));
  }
  return nlohmann::json{{"format", "akad-snapshot-manifest/1"},
                        {"archive_sha256", archive_sha256},
                        {"archive_size", archive_size},
                        {"metadata", metadata},
                        {"skipped", skipped},
                        {"entries", std::move(entriesJson)}};
}

namespace {
bool isHex64(const std::string& s) {
  if (s.size() != 64) return false;
  for (char c : s)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return true;
}
}  // namespace

Result<Manifest> Manifest::fromJson(const nlohmann::json& j) {
  auto bad = [](const std::string& why) { return Error{"invalid snapshot manifest: " + why, 0}; };
  if (!j.is_object()) return bad("not a JSON object");
  Manifest m;
  try {
    if (!j.contains("archive_sha256") || !j["archive_sha256"].is_string()) return bad("missing archive_sha256");
    m.archive_sha256 = j["archive_sha256"].get<std::string>();
    if (!isHex64(m.archive_sha256)) return bad("archive_sha256 is not 64 lowercase hex digits");
    if (!j.contains("archive_size") || !j["archive_size"].is_number_unsigned()) return bad("missing archive_size");
    m.archive_size = j["archive_size"].get<uint64_t>();
    if (j.contains("metadata")) m.metadata = j["metadata"];
    if (j.contains("skipped")) m.skipped = j["skipped"].get<std::vector<std::string>>();
    if (!j.contains("entries") || !j["entries"].is_array()) return bad("missing entries array");
    size_t i = 0;
    for (const auto& ej : j["entries"]) {
      ManifestEntry e;
      e.path = ej.at("path").get<std::string>();
      e.type = ej.at("type").get<std::string>();
      e.mode = ej.at("mode").get<uint32_t>();
      if (e.type == "file") {
        e.size = ej.at("size").get<uint64_t>();
        e.sha256 = ej.at("sha256").get<std::string>();
      } else if (e.type == "symlink") {
        e.link_target = ej.at("link_target").get<std::string>();
      } else if (e.type != "dir") {
        return bad("entry " + std::to_string(i) + " has unknown type '" + e.type + "'");
      }
      m.entries.push_back(std::move(e));
      ++i;
    }
  } catch (const nlohmann::json::exception& e) {
    return bad(e.what());
  }
  return m;
}

nlohmann::json describe(const Manifest& m, bool withEntries) {
  uint64_t files = 0, dirs = 0, symlinks = 0, bytes = 0;
  for (const auto& e : m.entries) {
    if (e.type == "file") {
      ++files;
      bytes += e.size;
    } else if (e.type == "dir") {
      ++dirs;
    } else {
      ++symlinks;
    }
  }
  nlohmann::json j{{"sha256", m.archive_sha256}, {"archive_size", m.archive_size}, {"files", files},
                   {"dirs", dirs}, {"symlinks", symlinks}, {"content_bytes", bytes},
                   {"skipped", m.skipped}, {"metadata", m.metadata}};
  if (withEntries) j["entries"] = m.toJson()["entries"];
  return j;
}

std::filesystem::path manifestPathFor(const std::filesystem::path& archive) {
  std::string s = archive.string();
  const std::string ext = ".tar.zst";
  if (s.size() > ext.size() && s.compare(s.size() - ext.size(), ext.size(), ext) == 0)
    return s.substr(0, s.size() - ext.size()) + ".json";
  return s + ".json";
}

}  // namespace akad::snapshot
