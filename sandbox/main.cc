// akabox command line: parses flags into the same JSON fields a spec file has and hands them
// to the library; no sandbox logic lives here.

#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <optional>
#include <set>
#include <string>

#include <nlohmann/json.hpp>

#include "sandbox/gpu.h"
#include "sandbox/mnt_template.h"
#include "sandbox/init_lender.h"
#include "sandbox/ns_thread.h"
#include "sandbox/run.h"
#include "sandbox/subproc.h"

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
    {"--tmpfs", "tmpfs", "DST[:SIZE][:huge] private tmpfs, huge: transparent huge pages (repeatable)"},
    {"--env", "env", "KEY=VALUE added to the environment (repeatable)"},
    {"--device", "devices", "device node bound into /dev and allowed in the device cgroup (repeatable)"},
    {"--gpu", "gpus", "GPU id from discovery (nvidia0, amd1): its nodes, device cgroup rule and *_VISIBLE_DEVICES (repeatable)"},
};

// The command line, read without a parser library: akabox starts once per sandbox, and
// CLI11 (with <iostream>) would add a tenth of a millisecond of static set-up to every spawn
// before main (text.h). What it reads: `run` with the flags above, each scalar at most once,
// as `--flag VALUE` or `--flag=VALUE` (a value that starts with "--" only in the second
// form), switches any number of times, `cleanup` with its three options, and `--help`
// anywhere.
struct CommandLine {
  enum class What { Run, Cleanup, Help, Mistake } what = What::Mistake;
  json flags = json::object();  // run: the flags as the JSON fields a spec file has
  std::string specFile;
  std::string cleanupParent = "akabox", cleanupBackend = "auto";
  bool cleanupTemplates = false;
  std::string text;  // help, or what is wrong
};

void appendFlagHelp(std::string& out, const char* flag, const char* help) {
  char line[256];
  std::snprintf(line, sizeof(line), "  %-22s %s\n", flag, help);
  out += line;
}

std::string usage(const char* subcommand) {
  std::string out =
      "akabox: runs one command in a sandbox (namespaces, pivot_root, cgroup, seccomp, limits)\n"
      "see docs/akabox.md for every option, result field and exit status\n\n";
  if (!subcommand || std::strcmp(subcommand, "run") == 0) {
    out += "akabox run [options] -- COMMAND [ARG...]\n";
    appendFlagHelp(out, "--spec FILE", "JSON spec; flags override it");
    for (const auto& f : scalars) appendFlagHelp(out, (std::string(f.flag) + " VALUE").c_str(), f.help);
    for (const auto& f : repeatable) appendFlagHelp(out, (std::string(f.flag) + " VALUE").c_str(), f.help);
    appendFlagHelp(out, "--command-is-pid1", "run the command as pid 1 (no separate reaper)");
    appendFlagHelp(out, "--mount-template", "copy a kept mount namespace built once per root layout instead of building the root anew");
  }
  if (!subcommand || std::strcmp(subcommand, "cleanup") == 0) {
    out += "akabox cleanup [options]: kill and remove every cgroup left under --cgroup-parent\n";
    appendFlagHelp(out, "--cgroup-parent NAME", "parent cgroup (default akabox)");
    appendFlagHelp(out, "--cgroup-backend B", "auto (default), v1 or v2");
    appendFlagHelp(out, "--templates", "also unmount and remove the kept mount templates");
  }
  return out;
}

// argv[1..argc) without the command after "--".
CommandLine parseCommandLine(int argc, char** argv) {
  CommandLine cl;
  auto mistake = [&](const std::string& why) {
    cl.what = CommandLine::What::Mistake;
    cl.text = why + "\nrun 'akabox --help' for the options";
    return cl;
  };
  for (int i = 1; i < argc; ++i)
    if (std::strcmp(argv[i], "--help") == 0 || std::strcmp(argv[i], "-h") == 0) {
      cl.what = CommandLine::What::Help;
      cl.text = usage(i > 1 && (std::strcmp(argv[1], "run") == 0 || std::strcmp(argv[1], "cleanup") == 0) ? argv[1] : nullptr);
      return cl;
    }
  if (argc < 2) return mistake("a subcommand is required: run or cleanup");
  const bool run = std::strcmp(argv[1], "run") == 0;
  if (!run && std::strcmp(argv[1], "cleanup") != 0) return mistake(std::string("unknown subcommand '") + argv[1] + "'");
  cl.what = run ? CommandLine::What::Run : CommandLine::What::Cleanup;
  std::set<std::string> given;
  for (int i = 2; i < argc; ++i) {
    std::string flag = argv[i];
    std::optional<std::string> value;
    if (flag.rfind("--", 0) != 0) return mistake("unexpected argument '" + flag + "' (the command goes after --)");
    if (auto eq = flag.find('='); eq != std::string::npos) {
      value = flag.substr(eq + 1);
      flag.resize(eq);
    }
    const bool isSwitch = run ? (flag == "--command-is-pid1" || flag == "--mount-template") : flag == "--templates";
    if (isSwitch) {
      if (value) return mistake(flag + " takes no value");  // given twice, it means the same
      if (flag == "--templates") cl.cleanupTemplates = true;
      else cl.flags[flag == "--mount-template" ? "mount_template" : "command_is_pid1"] = true;
      continue;
    }
    const Flag* scalar = nullptr;
    const Flag* list = nullptr;
    if (run) {
      for (const auto& f : scalars)
        if (flag == f.flag) scalar = &f;
      for (const auto& f : repeatable)
        if (flag == f.flag) list = &f;
    }
    const bool known = scalar || list || (run ? flag == "--spec" : flag == "--cgroup-parent" || flag == "--cgroup-backend");
    if (!known) return mistake("unknown option '" + flag + "' for akabox " + argv[1]);
    if (!value) {
      if (i + 1 >= argc || std::strncmp(argv[i + 1], "--", 2) == 0)
        return mistake(flag + " needs a value (write " + flag + "=VALUE for one that starts with --)");
      value = argv[++i];
    }
    if (!list && !given.insert(flag).second) return mistake(flag + " is given more than once");
    if (list) cl.flags[list->field].push_back(*value);
    else if (scalar) cl.flags[scalar->field] = *value;
    else if (flag == "--spec") cl.specFile = *value;
    else if (flag == "--cgroup-parent") cl.cleanupParent = *value;
    else cl.cleanupBackend = *value;
  }
  if (!run && cl.cleanupBackend != "auto" && cl.cleanupBackend != "v1" && cl.cleanupBackend != "v2")
    return mistake("--cgroup-backend must be auto, v1 or v2, not '" + cl.cleanupBackend + "'");
  return cl;
}

int cleanup(const CommandLine& cl) {
  box::CgroupBackendChoice choice = cl.cleanupBackend == "v1"   ? box::CgroupBackendChoice::V1
                                    : cl.cleanupBackend == "v2" ? box::CgroupBackendChoice::V2
                                                                : box::CgroupBackendChoice::Auto;
  auto n = box::cleanupLeftovers(cl.cleanupParent, choice);
  if (!n) {
    std::fprintf(stderr, "akabox cleanup: %s\n", n.error().message.c_str());
    return 125;
  }
  std::fprintf(stderr, "akabox cleanup: removed %d cgroup(s) under %s\n", *n, cl.cleanupParent.c_str());
  if (cl.cleanupTemplates) {
    auto t = box::removeMountTemplates();
    if (!t) {
      std::fprintf(stderr, "akabox cleanup: %s\n", t.error().message.c_str());
      return 125;
    }
    std::fprintf(stderr, "akabox cleanup: removed %d mount template(s)\n", *t);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  // The network namespace is the longest step of set-up (ns_thread.h): on a command line that
  // plainly wants one it starts before parsing, and runSandbox drops it if the spec says
  // otherwise after all.
  box::NamespaceThread early;
  if (box::networkNamespaceEarly(argc, argv)) (void)early.start();
  // The thread that will start the sandbox's init warms up meanwhile (init_lender.h).
  box::InitLender lender;
  if (argc > 1 && std::strcmp(argv[1], "run") == 0 && box::initLenderPays()) (void)lender.start();

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

  CommandLine cl = parseCommandLine(cliArgc, argv);
  switch (cl.what) {
    case CommandLine::What::Help: std::fputs(cl.text.c_str(), stdout); return 0;
    case CommandLine::What::Mistake: std::fprintf(stderr, "akabox: %s\n", cl.text.c_str()); return 125;
    case CommandLine::What::Cleanup: return cleanup(cl);
    case CommandLine::What::Run: break;
  }
  json flags = std::move(cl.flags);
  const std::string& specFile = cl.specFile;
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
  box::SandboxResult result = box::runSandbox(*spec, {&early, &lender});
  if (auto st = box::deliverResult(*spec, result); !st) {
    std::fprintf(stderr, "akabox: %s\n", st.error().message.c_str());
    return 125;
  }
  // Done: the sandbox is gone and the result written. Exit without running destructors (the
  // command line's options, the spec), which would only free memory; that is part of every
  // spawn's latency.
  std::fflush(stdout);
  ::_exit(result.exitStatus);
}
