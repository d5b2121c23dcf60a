#include "cli/snapshot_store_commands.h"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <string>

#include "cli/json_text.h"
#include "cli/options.h"
#include "common/base64.h"
#include "common/sha256.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace akad::cli {
namespace {

int runSnapshotExport(const std::string& sha, const std::string& out) {
  auto client = connectDaemon();
  if (!client) return reportError(client.error());
  const fs::path archive = out.empty() ? fs::path(sha + ".tar.zst") : fs::path(out);
  const fs::path tmp = archive.string() + ".part";
  std::ofstream file(tmp, std::ios::binary | std::ios::trunc);
  if (!file) return reportError(Error{"cannot write " + tmp.string()});
  Sha256 hash;
  bool bad = false;
  auto result = client->stream("snapshot.export", json{{"snapshot", sha}}, [&](const json& ev) {
    auto bytes = base64Decode(str(ev, "chunk"));
    if (!bytes) {
      bad = true;
      return;
    }
    hash.update(*bytes);
    file.write(bytes->data(), static_cast<std::streamsize>(bytes->size()));
  });
  file.close();
  std::error_code ec;
  if (!result) {
    fs::remove(tmp, ec);
    return reportError(result.error());
  }
  const std::string got = hash.hexDigest();
  if (bad || !file || got != sha) {
    fs::remove(tmp, ec);
    return reportError(Error{"the exported archive does not hash to " + sha + " (got " + got + "); nothing written"});
  }
  fs::rename(tmp, archive, ec);
  if (ec) {
    const Error e = errorCodeError("cannot move " + tmp.string() + " to " + archive.string(), ec);
    fs::remove(tmp, ec);
    return reportError(e);
  }
  const std::string name = archive.filename().string();
  const std::string stem = name.size() > 8 && name.substr(name.size() - 8) == ".tar.zst" ? name.substr(0, name.size() - 8) : name;
  const fs::path manifest = archive.parent_path() / (stem + ".json");
  {
    std::ofstream manifestFile(manifest, std::ios::trunc);
    manifestFile << result->at("manifest").dump(2) << "\n";
    manifestFile.close();
    // The archive is in place and verified; only its manifest is missing.
    if (!manifestFile) return reportError(Error{"wrote " + archive.string() + " (verified), but cannot write its manifest " + manifest.string()});
  }
  if (cliOptions().json) printJson(json{{"archive", archive.string()}, {"manifest", manifest.string()}, {"sha256", sha}});
  else std::cout << "wrote " << archive.string() << " and " << manifest.string() << " (sha256 " << sha << ", verified)\n";
  return kExitOk;
}

}  // namespace

void addSnapshotStoreCommands(CLI::App& app, int& exitCode) {
  // The daemon-backed half of `akactl snapshot` (the local half is in snapshot_commands.cc).
  CLI::App* snapshot = app.get_subcommand("snapshot");
  snapshot->add_subcommand("list", "Snapshots in the daemon's store")->callback([&exitCode] {
    int code = kExitOk;
    auto r = callDaemon("snapshot.list", json::object(), code);
    exitCode = code;
    if (!r) return;
    if (cliOptions().json) return printJson(*r);
    std::printf("%-64s %-10s %-6s %-24s %-8s %s\n", "SHA256", "BYTES", "FILES", "TASK", "ATTEMPT", "AGENT");
    for (const json& s : r->at("snapshots")) {
      const json& m = s.value("metadata", json::object());
      std::printf("%-64s %-10s %-6s %-24s %-8s %s%s\n", str(s, "sha256").c_str(), s.value("archive_size", json(0)).dump().c_str(),
                  s.value("files", json(0)).dump().c_str(), str(m, "task").c_str(), m.value("attempt", json("-")).dump().c_str(),
                  str(m, "agent").c_str(), s.value("corrupt", false) ? "  CORRUPT" : "");
    }
  });
  auto showSha = std::make_shared<std::string>();
  auto* show = snapshot->add_subcommand("show", "A stored snapshot's manifest");
  show->add_option("snapshot", *showSha, "SHA-256")->required();
  show->callback([&exitCode, showSha] {
    int code = kExitOk;
    auto r = callDaemon("snapshot.show", json{{"snapshot", *showSha}}, code);
    if (r) printJson(*r);
    exitCode = code;
  });
  auto exportSha = std::make_shared<std::string>();
  auto exportOut = std::make_shared<std::string>();
  auto* exp = snapshot->add_subcommand("export", "Fetch a stored archive and its manifest (hash checked)");
  exp->add_option("snapshot", *exportSha, "SHA-256")->required();
  exp->add_option("-o,--output", *exportOut, "Archive file to write (default <sha>.tar.zst)");
  exp->callback([&exitCode, exportSha, exportOut] { exitCode = runSnapshotExport(*exportSha, *exportOut); });
  snapshot->add_subcommand("gc", "Remove snapshots no run references (root only)")->callback([&exitCode] {
    int code = kExitOk;
    auto r = callDaemon("snapshot.gc", json::object(), code);
    if (r) printJson(*r);
    exitCode = code;
  });
}

}  // namespace akad::cli
