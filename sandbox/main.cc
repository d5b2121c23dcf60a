// akabox command line: parses flags into the same JSON fields a spec file has and hands them
// to the library; no sandbox logic lives here.

#include <unistd.h>

#include <cstring>
#include <iostream>
#include <optional>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "sandbox/gpu.h"
#include "sandbox/mnt_template.h"
#include "sandbox/net.h"
#include "sandbox/run.h"

using nlohmann::json;
namespace box = akad::box;

namespace {

struct Flag { const char* flag; const char* field; const char* help; };
const Flag scalars[] = {
    {"--root", "root", "host (default) or a prepared root directory, mounted read-only"},
    {"--workspace", "workspace", "directory bound read-write at /workspace (the working directory)"},
    {"--memory", "memory", "memory limit (512M, 4G); swap is not allowed beyond it"},
    {"--pids", "pids", "maximum number of tasks"},
    {"--cpus", "cpus", "cpuset, e.g. 0-3"},
    {"--cpu-time", "cpu_time", "CPU-time limit in seconds for the whole sandbox"},
    {"--wall-time", "wall_time", "wall-clock limit in seconds"},
    {"--output-limit", "output_limit", "cap on captured stdout+stderr and on file size"},
    {"--net", "net", "none (default: own namespace, loopback only) or host"},
    {"--seccomp", "seccomp", "policy file (OCI seccomp JSON), default or none"},
    {"--uid", "uid", "uid inside (default 1000)"},
    {"--gid", "gid", "gid inside (default 1000)"},
    {"--outside-uid", "outside_uid", "uid outside (default: the workspace owner, else 100000+uid)"},
    {"--outside-gid", "outside_gid", "gid outside (default: the workspace group, else 100000+gid)"},
    {"--stdin", "stdin", "file given as stdin (default /dev/null)"},
    {"--stdout", "stdout", "file for the command's stdout (default: akabox's)"},
    {"--stderr", "stderr", "file for the command's stderr (default: akabox's)"},
    {"--result", "result", "file for the result JSON"},
    {"--result-fd", "result_fd", "descriptor for the result JSON"},
    {"--cgroup-parent", "cgroup_parent", "parent cgroup (default akabox)"},
    {"--cgroup-backend", "cgroup_backend", "auto (default), v1 or v2"},
    {"--hostname", "hostname", "hostname inside (default akabox)"},
    {"--cwd", "cwd", "working directory inside"},
};
const Flag repeatable[] = {
    {"--bind", "binds", "SRC:DST[:rw][,dev] extra bind mount, read-only unless rw; dev keeps device nodes usable (the device cgroup still decides) (repeatable)"},
    {"--tmpfs", "tmpfs", "DST[:SIZE] private tmpfs (repeatable)"},
    {"--env", "env", "KEY=VALUE added to the environment (repeatable)"},
    {"--device", "devices", "device node bound into /dev and allowed in the device cgroup (repeatable)"},
    {"--gpu", "gpus", "GPU id from discovery (nvidia0, amd1): its nodes, device cgroup rule and *_VISIBLE_DEVICES (repeatable)"},
};

// `akabox run` with known flags, each scalar given once, every flag with one value that does
// not look like a flag: the flags as the JSON fields a spec file has, read without building
// the CLI11 parser (that alone cost about a tenth of a millisecond of every spawn). Anything
// else (help, cleanup, an unknown or repeated flag, `--flag=value`, a stray argument) returns
// nothing and goes to CLI11, which parses it or explains the mistake.
std::optional<json> quickRunFlags(int argc, char** argv, std::string& specFile) {
  if (argc < 2 || std::strcmp(argv[1], "run") != 0) return std::nullopt;
  json flags = json::object();
  auto find = [](const auto& table, const char* flag) -> const Flag* {
    for (const auto& f : table)
      if (std::strcmp(f.flag, flag) == 0) return &f;
    return nullptr;
  };
  for (int i = 2; i < argc; ++i) {
    const char* a = argv[i];
    if (std::strcmp(a, "--command-is-pid1") == 0 || std::strcmp(a, "--mount-template") == 0) {
      const char* field = a[2] == 'c' ? "command_is_pid1" : "mount_template";
      if (flags.contains(field)) return std::nullopt;
      flags[field] = true;
      continue;
    }
    if (i + 1 >= argc || argv[i + 1][0] == '-') return std::nullopt;
    const char* value = argv[++i];
    if (std::strcmp(a, "--spec") == 0) {
      if (!specFile.empty()) return std::nullopt;
      specFile = value;
    } else if (const Flag* f = find(scalars, a)) {
      if (flags.contains(f->field)) return std::nullopt;
      flags[f->field] = value;
    } else if (const Flag* r = find(repeatable, a)) {
      flags[r->field].push_back(value);
    } else {
      return std::nullopt;
    }
  }
  return flags;
}

// CLI11: help, cleanup, and every command line quickRunFlags does not take. Returns the exit
// status when akabox is done (help, a mistake, cleanup), or -1 with the run's flags filled.
int parseWithCli11(int cliArgc, char** argv, json& flags, std::string& specFile) {
  CLI::App app{"akabox: runs one command in a sandbox (namespaces, pivot_root, cgroup, seccomp, limits)\n"
               "see docs/akabox.md for every option, result field and exit status"};
  app.require_subcommand(1);
  CLI::App* run = app.add_subcommand("run", "run COMMAND in a sandbox: akabox run [options] -- COMMAND [ARG...]");
  CLI::App* cleanup = app.add_subcommand("cleanup", "kill and remove every cgroup left under --cgroup-parent");

  std::map<std::string, std::string> scalar;  // JSON field -> flag value
  std::map<std::string, std::vector<std::string>> lists;
  run->add_option("--spec", specFile, "JSON spec; flags override it");
  for (const auto& f : scalars) run->add_option(f.flag, scalar[f.field], f.help);
  for (const auto& f : repeatable) run->add_option(f.flag, lists[f.field], f.help)->take_all();
  bool pid1 = false;
  run->add_flag("--command-is-pid1", pid1, "run the command as pid 1 (no separate reaper)");
  bool mountTemplate = false;
  run->add_flag("--mount-template", mountTemplate,
                "copy a kept mount namespace built once per root layout instead of building the root anew");

  std::string cleanupParent = "akabox", cleanupBackend = "auto";
  cleanup->add_option("--cgroup-parent", cleanupParent, "parent cgroup (default akabox)");
  cleanup->add_option("--cgroup-backend", cleanupBackend, "auto (default), v1 or v2");
  bool cleanupTemplates = false;
  cleanup->add_flag("--templates", cleanupTemplates, "also unmount and remove the kept mount templates");

  try {
    app.parse(cliArgc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 125;
  }

  if (*cleanup) {
    box::CgroupBackendChoice choice = cleanupBackend == "v1"   ? box::CgroupBackendChoice::V1
                                      : cleanupBackend == "v2" ? box::CgroupBackendChoice::V2
                                                               : box::CgroupBackendChoice::Auto;
    auto n = box::cleanupLeftovers(cleanupParent, choice);
    if (!n) {
      std::cerr << "akabox cleanup: " << n.error().message << "\n";
      return 125;
    }
    std::cerr << "akabox cleanup: removed " << *n << " cgroup(s) under " << cleanupParent << "\n";
    if (cleanupTemplates) {
      auto t = box::removeMountTemplates();
      if (!t) {
        std::cerr << "akabox cleanup: " << t.error().message << "\n";
        return 125;
      }
      std::cerr << "akabox cleanup: removed " << *t << " mount template(s)\n";
    }
    return 0;
  }

  for (const auto& f : scalars)
    if (run->count(f.flag)) flags[f.field] = scalar[f.field];
  for (const auto& f : repeatable)
    if (run->count(f.flag)) flags[f.field] = lists[f.field];
  if (pid1) flags["command_is_pid1"] = true;
  if (mountTemplate) flags["mount_template"] = true;
  return -1;
}

}  // namespace

int main(int argc, char** argv) {
  // The network namespace is the longest step of set-up (net.h): on a command line that
  // plainly wants one it starts before parsing, and runSandbox drops it if the spec says
  // otherwise after all.
  box::NetworkNamespaceMaker early;
  if (box::networkNamespaceEarly(argc, argv)) (void)early.start();

  // Everything after "--" is the command, untouched by option parsing.
  std::vector<std::string> command;
  int cliArgc = argc;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--") == 0) {
      for (int j = i + 1; j < argc; ++j) command.emplace_back(argv[j]);
      cliArgc = i;
      break;
    }
  }

  std::string specFile;
  std::optional<json> quick = quickRunFlags(cliArgc, argv, specFile);
  json flags = quick ? std::move(*quick) : json::object();
  if (!quick) {
    specFile.clear();
    if (int status = parseWithCli11(cliArgc, argv, flags, specFile); status >= 0) return status;
  }
  if (!command.empty()) flags["command"] = command;

  json file = json::object();
  if (!specFile.empty()) {
    auto loaded = box::loadSpecFile(specFile);
    if (!loaded) {
      box::SandboxSpec none;
      if (flags.contains("result_fd")) none.resultFd = std::atoi(flags["result_fd"].get<std::string>().c_str());
      if (flags.contains("result")) none.resultPath = flags["result"].get<std::string>();
      (void)box::deliverResult(none, box::setupFailure(loaded.error().message));
      return 125;
    }
    file = *loaded;
  }
  auto spec = box::parseSpec(file, flags);
  if (!spec) {
    // The result still goes where the caller looks for it, as far as we can tell where.
    box::SandboxSpec fallback;
    json merged = file;
    for (auto it = flags.begin(); it != flags.end(); ++it) merged[it.key()] = it.value();
    if (merged.contains("result_fd")) fallback.resultFd = std::atoi(merged["result_fd"].is_string() ? merged["result_fd"].get<std::string>().c_str() : std::to_string(merged["result_fd"].get<int>()).c_str());
    if (merged.contains("result") && merged["result"].is_string()) fallback.resultPath = merged["result"].get<std::string>();
    (void)box::deliverResult(fallback, box::setupFailure(spec.error().message));
    return 125;
  }
  if (!spec->gpus.empty()) {
    if (auto st = box::applyGpuPassthrough(*spec); !st) {
      (void)box::deliverResult(*spec, box::setupFailure(st.error().message));
      return 125;
    }
  }
  box::SandboxResult result = box::runSandbox(*spec, &early);
  if (auto st = box::deliverResult(*spec, result); !st) {
    std::cerr << "akabox: " << st.error().message << "\n";
    return 125;
  }
  // Done: the sandbox is gone and the result written. Exit without running destructors (the
  // command line's options, the spec), which would only free memory; that is part of every
  // spawn's latency.
  std::cout.flush();
  ::_exit(result.exitStatus);
}
