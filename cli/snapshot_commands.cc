#include "cli/snapshot_commands.h"

#include <chrono>
#include <fstream>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "daemon/snapshot/snapshot.h"

namespace akactl {

namespace snap = akad::snapshot;

namespace {

struct CreateArgs {
  std::string dir, output;
  std::vector<std::string> exclude;
  int level = 3;
  bool json = false;
};
struct ExtractArgs {
  std::string archive, dir;
  bool json = false;
};
struct VerifyArgs {
  std::string archive, manifest;
  bool json = false;
};

int fail(bool json, const std::string& message) {
  if (json)
    std::cout << nlohmann::json{{"ok", false}, {"error", message}}.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
  else
    std::cerr << "akactl: " << message << "\n";
  return 1;
}

int runCreate(const CreateArgs& a) {
  snap::CreateOptions opt;
  opt.exclude = a.exclude;
  opt.zstd_level = a.level;
  nlohmann::json meta{{"created_at", std::chrono::duration_cast<std::chrono::seconds>(
                                         std::chrono::system_clock::now().time_since_epoch())
                                         .count()},
                      {"source", "akactl snapshot create"}};
  auto m = snap::createArchive(a.dir, a.output, opt, meta);
  if (!m) return fail(a.json, m.error().message);
  std::filesystem::path manifestPath = snap::manifestPathFor(a.output);
  {
    std::ofstream out(manifestPath);
    out << m->toJson().dump(1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
    if (!out.flush()) {
      std::filesystem::remove(a.output);
      return fail(a.json, "cannot write manifest " + manifestPath.string());
    }
  }
  if (a.json) {
    auto j = snap::describe(*m);
    j["ok"] = true;
    j["archive"] = a.output;
    j["manifest"] = manifestPath.string();
    std::cout << j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
  } else {
    for (const auto& s : m->skipped) std::cerr << "skipped " << s << "\n";
    std::cout << m->archive_sha256 << "  " << a.output << "\n";
  }
  return 0;
}

int runExtract(const ExtractArgs& a) {
  if (auto s = snap::extractArchive(a.archive, a.dir, snap::Limits{}); !s) return fail(a.json, s.error().message);
  if (a.json)
    std::cout << nlohmann::json{{"ok", true}, {"archive", a.archive}, {"dir", a.dir}}.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
  else
    std::cout << "extracted " << a.archive << " into " << a.dir << "\n";
  return 0;
}

int runVerify(const VerifyArgs& a) {
  std::filesystem::path manifest = a.manifest.empty() ? snap::manifestPathFor(a.archive) : std::filesystem::path(a.manifest);
  auto m = snap::verifyArchive(a.archive, manifest);
  if (!m) return fail(a.json, m.error().message);
  if (a.json) {
    auto j = snap::describe(*m);
    j["ok"] = true;
    std::cout << j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
  } else {
    std::cout << "ok " << m->archive_sha256 << "  " << a.archive << " (" << m->entries.size() << " entries)\n";
  }
  return 0;
}

}  // namespace

void addSnapshotCommands(CLI::App& app, int& exitCode) {
  CLI::App* snapshot = app.add_subcommand("snapshot", "Workspace snapshots (create/extract/verify work without a daemon)");
  snapshot->require_subcommand(1);

  auto c = std::make_shared<CreateArgs>();
  CLI::App* create = snapshot->add_subcommand(
      "create", "Archive DIR deterministically into FILE.tar.zst and write its manifest FILE.json; prints the SHA-256");
  create->add_option("DIR", c->dir, "Workspace directory")->required()->check(CLI::ExistingDirectory);
  create->add_option("-o,--output", c->output, "Archive to write (FILE.tar.zst)")->required();
  create->add_option("--exclude", c->exclude,
                     "Leave out matching entries: 'build/' = directory anywhere, '*.o' = basename glob, 'a/b' = path glob");
  create->add_option("--zstd-level", c->level, "zstd level (default 3; the archive's bytes depend on it)")
      ->check(CLI::Range(1, 19));
  create->add_flag("--json", c->json, "Print the result as JSON");
  create->callback([c, &exitCode] { exitCode = runCreate(*c); });

  auto x = std::make_shared<ExtractArgs>();
  CLI::App* extract = snapshot->add_subcommand(
      "extract", "Extract FILE.tar.zst into DIR (absent or empty); a refused archive leaves DIR untouched");
  extract->add_option("FILE", x->archive, "Archive")->required();
  extract->add_option("DIR", x->dir, "Destination directory")->required();
  extract->add_flag("--json", x->json, "Print the result as JSON");
  extract->callback([x, &exitCode] { exitCode = runExtract(*x); });

  auto v = std::make_shared<VerifyArgs>();
  CLI::App* verify = snapshot->add_subcommand("verify", "Check that FILE.tar.zst matches its manifest (hash and every entry)");
  verify->add_option("FILE", v->archive, "Archive")->required();
  verify->add_option("--manifest", v->manifest, "Manifest (default: FILE.json beside the archive)");
  verify->add_flag("--json", v->json, "Print the result as JSON");
  verify->callback([v, &exitCode] { exitCode = runVerify(*v); });
}

}  // namespace akactl
