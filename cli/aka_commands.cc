#include "cli/aka_commands.h"

#include <cstdio>
#include <filesystem>
#include <iostream>
#include <memory>

#include "cli/options.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace akad::cli {
namespace {

std::string text(const json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : "";
}

std::string joined(const json& list) {
  std::string out;
  if (!list.is_array()) return out;
  for (const json& s : list)
    if (s.is_string()) out += (out.empty() ? "" : ",") + s.get<std::string>();
  return out;
}

// One task: its AKA name, akad id, class and compat features, then one reason per line.
void printTask(const json& t, bool reasons) {
  std::string compat = joined(t.value("compat", json()));
  if (t.value("held_out_injections", 0) > 0) compat += (compat.empty() ? "" : " ") + std::string("+held-out");
  std::printf("  %-48s %-11s %-44s %s\n", text(t, "name").c_str(), text(t, "class").c_str(),
              t.value("imported", false) ? text(t, "id").c_str() : "(not imported)", compat.c_str());
  if (!reasons) return;
  for (const json& r : t.value("reasons", json::array()))
    if (r.is_string()) std::printf("      - %s\n", r.get<std::string>().c_str());
  // convert mode: the converted task beside the wrapped one (docs/aka.md).
  if (auto c = t.find("convert"); c != t.end() && c->is_object()) {
    std::printf("      convert: %s\n", c->value("imported", false) ? text(*c, "id").c_str() : "(not converted)");
    for (const json& r : c->value("reasons", json::array()))
      if (r.is_string()) std::printf("      - %s\n", r.get<std::string>().c_str());
  }
}

struct ImportArgs {
  std::string source;
  std::string dir;
  std::vector<std::string> select;
  std::string platform;
  std::string heldOut;
  bool convert = false;
  bool quiet = false;
};

int runImport(const ImportArgs& a) {
  if (a.source != "aka") return usageError("akactl tasks import: the only source is 'aka' (AgentKernelArena), not '" + a.source + "'");
  std::error_code ec;
  const fs::path dir = fs::absolute(a.dir, ec).lexically_normal();
  if (ec) return usageError("akactl tasks import: cannot resolve " + a.dir + ": " + ec.message());
  json params{{"source", a.source}, {"dir", dir.string()}};
  if (!a.select.empty()) params["select"] = a.select;
  if (!a.platform.empty()) params["platform"] = a.platform;
  if (a.convert) params["convert"] = true;
  if (!a.heldOut.empty()) {
    const fs::path held = fs::absolute(a.heldOut, ec).lexically_normal();
    if (ec) return usageError("akactl tasks import: cannot resolve " + a.heldOut + ": " + ec.message());
    params["held_out"] = held.string();
  }
  int exitCode = kExitOk;
  auto result = callDaemon("tasks.import", params, exitCode);
  if (!result) return exitCode;
  if (cliOptions().json) {
    printJson(*result);
    return kExitOk;
  }
  const json& r = *result;
  std::cout << "checkout  " << text(r, "checkout") << "\n"
            << "commit    " << (r["commit"].is_string() ? r["commit"].get<std::string>() : text(r, "commit_note")) << "\n"
            << "platform  " << text(r, "platform") << "\n"
            << "tasks in  " << text(r, "tasks_root") << "\n\n";
  std::printf("  %-48s %-11s %-44s %s\n", "AKA TASK", "CLASS", "AKAD TASK", "COMPAT");
  for (const json& t : r.at("tasks")) printTask(t, !a.quiet || !t.value("imported", false));
  std::cout << "\n";
  for (const auto& [cls, n] : r.at("counts").items()) std::cout << "  " << cls << ": " << n.get<int>() << "\n";
  return kExitOk;
}

}  // namespace

void addAkaTaskCommands(CLI::App& tasks, int& exitCode) {
  auto args = std::make_shared<ImportArgs>();
  auto* import = tasks.add_subcommand(
      "import", "Import an AgentKernelArena checkout's tasks (admin): akactl tasks import aka DIR [--select PREFIX...]");
  import->add_option("source", args->source, "What to import: aka")->required();
  import->add_option("dir", args->dir, "The checkout (the folder holding tasks/ and src/)")->required();
  import->add_option("--select", args->select, "AKA task-name prefixes, e.g. triton2triton/vllm (default: every task)");
  import->add_option("--platform", args->platform, "nvidia, amd or cpu (default: the daemon's GPUs)")
      ->check(CLI::IsMember({"nvidia", "amd", "cpu"}));
  import->add_option("--held-out", args->heldOut,
                     "AKA's held_out_tests folder (<task name>/held_out_shapes.yaml); scored, never shown to agents");
  import->add_flag("--convert", args->convert,
                   "Also import gpumode tasks in convert mode: akad's protected harness (aka-convert-... ids)");
  import->add_flag("--quiet", args->quiet, "Reasons only for refused tasks");
  import->callback([&exitCode, args] { exitCode = runImport(*args); });
}

void printAkaTaskListing(const json& listResult) {
  auto it = listResult.find("aka");
  if (it == listResult.end()) return;
  if (it->is_object() && it->contains("error")) {
    std::cout << "\nAgentKernelArena imports: " << text(*it, "error") << "\n";
    return;
  }
  if (!it->is_array() || it->empty()) return;
  std::cout << "\nAgentKernelArena tasks (akactl tasks import aka DIR):\n";
  std::printf("  %-48s %-11s %-44s %s\n", "AKA TASK", "CLASS", "AKAD TASK", "COMPAT");
  for (const json& t : *it) printTask(t, true);
}

}  // namespace akad::cli
