#include "daemon/aka/import.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <mutex>
#include <set>

#include <yaml-cpp/yaml.h>

#include "common/sha256.h"
#include "daemon/aka/held_out_rules.h"
#include "daemon/aka/helpers.h"
#include "daemon/aka/trust.h"
#include "daemon/pipeline/files.h"
#include "daemon/pipeline/task.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace akad::aka {
namespace {

constexpr std::size_t kMaxConfigBytes = 1 << 20;
constexpr std::size_t kMaxFileBytes = 64 << 20;      // one file of a task folder
constexpr std::size_t kMaxTaskBytes = 1ull << 30;    // all of them
constexpr std::size_t kMaxScannedBytes = 4 << 20;    // source files the rules read
constexpr std::size_t kMaxHelperBytes = 4 << 20;

bool endsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

bool isScannedSource(const std::string& path) {
  for (const char* ext : {".py", ".hip", ".cpp", ".cc", ".cu", ".cuh", ".h", ".hpp", ".c", ".inc", ".sh"})
    if (endsWith(path, ext)) return true;
  return false;
}

std::string sanitize(const std::string& in) {
  std::string out;
  for (char c : in) {
    const char l = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    out += ((l >= 'a' && l <= 'z') || (l >= '0' && l <= '9') || l == '_' || l == '-') ? l : '_';
  }
  while (!out.empty() && (out.front() == '_' || out.front() == '-')) out.erase(out.begin());
  return out.empty() ? "task" : out;
}

std::vector<std::string> splitPath(const std::string& name) {
  std::vector<std::string> parts;
  for (const auto& p : fs::path(name)) parts.push_back(p.string());
  return parts;
}

// One file of the task folder, as read (bytes kept for the copy, so what is hashed is what is
// written).
struct ReadFile {
  std::string rel;  // relative to the task folder
  std::string bytes;
  bool executable = false;
};

struct TaskFolder {
  std::vector<TaskFile> files;  // what the classifier sees
  std::vector<ReadFile> contents;
  std::string problem;  // set when the folder as a whole cannot be imported
};

TaskFolder readTaskFolder(FileLedger& ledger, const std::string& base) {
  TaskFolder folder;
  std::size_t total = 0;
  std::error_code ec;
  const fs::path dir = ledger.root() / base;
  for (fs::recursive_directory_iterator it(dir, fs::directory_options::none, ec), end; !ec && it != end;
       it.increment(ec)) {
    const std::string rel = it->path().lexically_relative(dir).generic_string();
    const auto st = it->symlink_status(ec);
    if (fs::is_directory(st)) {
      if (it->path().filename() == ".git") it.disable_recursion_pending();
      continue;
    }
    TaskFile f;
    f.path = rel;
    if (fs::is_symlink(st)) {
      f.symlink = true;
      folder.files.push_back(f);
      continue;
    }
    if (!fs::is_regular_file(st)) continue;  // sockets, fifos: nothing a task needs
    const std::uintmax_t size = fs::file_size(it->path(), ec);
    if (ec || size > kMaxFileBytes || total + size > kMaxTaskBytes) {
      f.too_large = true;
      if (auto h = ledger.hash(base + "/" + rel); !h) folder.problem = h.error().message;
      folder.files.push_back(f);
      ec.clear();
      continue;
    }
    auto bytes = ledger.read(base + "/" + rel, kMaxFileBytes);
    if (!bytes) {
      folder.problem = bytes.error().message;
      continue;
    }
    total += bytes->size();
    f.lfs_pointer = bytes->size() < 1024 && bytes->rfind("version https://git-lfs.github.com/spec/", 0) == 0;
    if (isScannedSource(rel) && bytes->size() <= kMaxScannedBytes) {
      f.text = *bytes;
      f.scanned = true;
    }
    folder.files.push_back(std::move(f));
    folder.contents.push_back({rel, std::move(*bytes), (st.permissions() & fs::perms::owner_exec) != fs::perms::none});
  }
  if (ec) folder.problem = "cannot walk " + dir.string() + ": " + ec.message();
  return folder;
}

ReadFile* findContent(TaskFolder& folder, const std::string& rel) {
  for (auto& c : folder.contents)
    if (c.rel == rel) return &c;
  return nullptr;
}

bool usesRocmbenchHelper(const TaskFolder& folder) {
  for (const auto& c : folder.contents)
    if (c.rel.find('/') == std::string::npos && endsWith(c.rel, ".py") &&
        (c.rel == kRocmbenchHelper || c.bytes.find("performance_utils_pytest") != std::string::npos))
      return true;
  return false;
}

// Fills AKA's helpers into the folder's copy (AKA's materialize_perf_helpers_in_workspace does
// it in each run workspace). Returns the files it changed.
Result<std::vector<std::string>> materialiseHelpers(FileLedger& ledger, TaskFolder& folder) {
  std::vector<std::string> changed;
  if (usesRocmbenchHelper(folder)) {
    auto helper = ledger.read(kRocmbenchHelperSource, kMaxHelperBytes);
    if (!helper) return Error{"the checkout's " + std::string(kRocmbenchHelperSource) + " cannot be read: " + helper.error().message};
    if (ReadFile* f = findContent(folder, kRocmbenchHelper)) f->bytes = *helper;
    else folder.contents.push_back({kRocmbenchHelper, *helper, false});
    changed.push_back(kRocmbenchHelper);
  }
  if (ReadFile* runner = findContent(folder, kRunnerWithHelpers);
      runner && runner->bytes.find(kMarkStart) != std::string::npos) {
    auto helper = ledger.read(kVllmHelperSource, kMaxHelperBytes);
    if (!helper) return Error{"the checkout's " + std::string(kVllmHelperSource) + " cannot be read: " + helper.error().message};
    auto filled = fillHelperRegion(runner->bytes, *helper);
    if (!filled) return Error{std::string(kRunnerWithHelpers) + ": " + filled.error().message};
    runner->bytes = *filled;
    changed.push_back(kRunnerWithHelpers);
  }
  return changed;
}

std::string taskYaml(const ImportedTask& t, const AkaTaskConfig& c, Platform platform) {
  const std::string suite = t.id.substr(0, t.id.find('/'));
  const std::string id = t.id.substr(t.id.find('/') + 1);
  std::string prompt = c.instructions.empty() ? "Optimise the kernel of AgentKernelArena task " + t.name + "." : c.instructions;
  while (!prompt.empty() && prompt.back() == '\n') prompt.pop_back();
  prompt += "\n\nThis is AgentKernelArena task " + t.name + ", imported by akad. Its own compile, correctness and "
            "performance commands (config.yaml) score it, in akad's sandboxes, on a pristine copy of this folder "
            "with only your versions of the files you may edit.";
  if (!t.splice_functions.empty()) {
    prompt += " From ";
    for (std::size_t i = 0; i < t.editable.size(); ++i) prompt += (i ? ", " : "") + t.editable[i];
    prompt += " only the top-level definitions of ";
    for (std::size_t i = 0; i < t.splice_functions.size(); ++i) prompt += (i ? ", " : "") + t.splice_functions[i];
    prompt += " are taken; changes elsewhere in it (its tests) are ignored.";
  }
  YAML::Emitter y;
  y << YAML::BeginMap;
  y << YAML::Key << "schema" << YAML::Value << 1;
  y << YAML::Key << "id" << YAML::Value << id;
  y << YAML::Key << "suite" << YAML::Value << suite;
  y << YAML::Key << "title" << YAML::Value << ("AKA " + t.name);
  y << YAML::Key << "prompt" << YAML::Value << YAML::Literal << prompt;
  y << YAML::Key << "harness" << YAML::Value << kWrapHarness;
  // The toolchain images: the host's PyTorch/Triton with akad's HIP-on-CUDA, or ROCm's.
  y << YAML::Key << "image" << YAML::Value << (platform == Platform::Amd ? "rocm" : "torch");
  y << YAML::Key << "gpu" << YAML::Value << true;
  y << YAML::Key << "editable" << YAML::Value << YAML::Flow << t.editable;
  y << YAML::Key << "exclude" << YAML::Value << YAML::Flow
    << std::vector<std::string>{"build/", "__pycache__/", ".pytest_cache/", "temp/", "*.so", "*.o"};
  y << YAML::Key << "build" << YAML::Value << YAML::BeginMap;
  y << YAML::Key << "reference" << YAML::Value << YAML::Flow << std::vector<std::string>{};
  y << YAML::Key << "candidate" << YAML::Value << c.compile;
  y << YAML::EndMap;
  // AKA's harness holds its shapes itself: one visible "configuration" stands for all of them.
  // Held-out shapes are not imported yet (docs/aka.md, "Not built yet").
  y << YAML::Key << "configs" << YAML::Value << YAML::BeginMap;
  y << YAML::Key << "visible" << YAML::Value << YAML::BeginSeq << YAML::Flow << YAML::BeginMap << YAML::Key << "name"
    << YAML::Value << "aka-visible" << YAML::EndMap << YAML::EndSeq;
  y << YAML::Key << "held_out" << YAML::Value << YAML::Flow << std::vector<std::string>{};
  y << YAML::EndMap;
  y << YAML::Key << "tolerances" << YAML::Value << YAML::Flow << YAML::BeginMap << YAML::EndMap;
  y << YAML::Key << "timing" << YAML::Value << YAML::BeginMap << YAML::Key << "rounds" << YAML::Value << 2 << YAML::EndMap;
  y << YAML::Key << "limits" << YAML::Value << YAML::BeginMap;
  y << YAML::Key << "agent_s" << YAML::Value << 3600;
  y << YAML::Key << "compile_s" << YAML::Value << std::min(c.compile_timeout_s, 86400.0);
  y << YAML::Key << "correctness_s" << YAML::Value << std::min(c.correctness_timeout_s, 86400.0);
  y << YAML::Key << "performance_s" << YAML::Value << std::min(c.performance_timeout_s, 86400.0);
  y << YAML::Key << "memory" << YAML::Value << "16G";
  y << YAML::Key << "pids" << YAML::Value << 1024;
  y << YAML::EndMap;
  y << YAML::EndMap;
  return std::string(y.c_str()) + "\n";
}

// The task's held-out shapes, if the user has them: read, validated and tried on the pristine
// files (after helper materialisation), so a set that does not apply is refused at import, not
// found out when scoring. A bad set leaves the task imported without held-out shapes.
std::vector<Injection> importHeldOut(const ImportOptions& o, const std::string& name, const TaskFolder& folder,
                                     ImportedTask& t) {
  if (o.heldOutDir.empty()) return {};
  const std::string rel = name + "/held_out_shapes.yaml";
  std::error_code ec;
  if (!fs::exists(fs::symlink_status(o.heldOutDir / rel, ec))) return {};
  FileLedger ledger(o.heldOutDir);
  auto text = ledger.read(rel, kMaxConfigBytes);
  if (!text) {
    t.reasons.push_back("held-out shapes not used: " + text.error().message);
    return {};
  }
  t.files["held-out:" + rel] = ledger.hashes().at(rel);
  auto injections = parseHeldOutShapes(*text, rel);
  if (!injections) {
    t.reasons.push_back("held-out shapes not used: " + injections.error().message);
    return {};
  }
  std::map<std::string, std::string> files;
  for (const auto& c : folder.contents) files[c.rel] = c.bytes;
  for (const auto& inj : *injections) {
    auto it = files.find(inj.file);
    if (it == files.end()) {
      t.reasons.push_back("held-out shapes not used: " + inj.file + " is not a file of the task");
      return {};
    }
    auto changed = applyInjection(it->second, inj);
    if (!changed) {
      t.reasons.push_back("held-out shapes not used: " + changed.error().message);
      return {};
    }
    it->second = *changed;
  }
  t.held_out_injections = injections->size();
  return *injections;
}

// Without AKA's held-out files, akad's rules make candidate shapes where the runner's visible
// shapes are a plain TEST_SHAPES list; the scorer keeps those the pristine baseline passes.
json generateHeldOut(const TaskFolder& folder, ImportedTask& t) {
  const ReadFile* runner = nullptr;
  for (const auto& c : folder.contents)
    if (c.rel == kRunnerWithHelpers) runner = &c;
  if (runner == nullptr) return nullptr;
  auto visible = parseTestShapes(runner->bytes);
  if (!visible) {
    if (runner->bytes.find("TEST_SHAPES") != std::string::npos)
      t.reasons.push_back("no held-out shapes generated: " + visible.error().message);
    return nullptr;
  }
  const auto generated = generateShapes(*visible);
  if (generated.empty()) return nullptr;
  json shapes = json::array();
  std::string rules;
  for (const auto& g : generated) {
    shapes.push_back({{"shape", g.shape}, {"rule", g.rule}});
    if (rules.find(g.rule) == std::string::npos) rules += (rules.empty() ? "" : ", ") + g.rule;
  }
  t.held_out_generated = generated.size();
  t.reasons.push_back("held-out: " + std::to_string(generated.size()) + " shapes from akad's rules (" + rules +
                      "), kept where the pristine baseline passes them");
  return {{"file", kRunnerWithHelpers}, {"scalars", visible->scalars}, {"shapes", shapes}};
}

json wrapSpec(const ImportedTask& t, const AkaTaskConfig& c, const TrustMapping& m, const ImportReport& r,
              const std::vector<Injection>& heldOut, const json& generated) {
  json files = json::object();
  for (const auto& [path, sha] : t.files) files[path] = sha;
  return {{"schema", 1},
          {"mode", "wrap"},
          {"name", t.name},
          {"family", t.family},
          {"task_type", c.task_type},
          {"checkout", r.checkout.string()},
          {"commit", r.commit.commit},
          {"commit_note", r.commit.note},
          {"platform", platformName(r.platform)},
          {"class", className(t.cls)},
          {"reasons", t.reasons},
          {"compat", t.compat},
          {"editable", m.editable},
          {"splice_functions", m.splice_functions},
          {"commands", {{"compile", c.compile}, {"correctness", c.correctness}, {"performance", c.performance}}},
          {"timeouts_s", {{"compile", c.compile_timeout_s}, {"correctness", c.correctness_timeout_s},
                          {"performance", c.performance_timeout_s}}},
          {"materialised", t.materialised},
          {"held_out_injections", injectionsToJson(heldOut)},
          {"held_out_generated", generated},
          {"files", files}};
}

// Writes the task into <root>/<suite>/<task>/ through a staging tree laid out like a tasks root,
// so akad's own loader checks it before it replaces an earlier import.
Status writeTaskDefinition(const fs::path& root, const ImportedTask& t, const TaskFolder& folder,
                           const std::string& yaml, const json& spec) {
  const std::string suite = t.id.substr(0, t.id.find('/'));
  const std::string id = t.id.substr(t.id.find('/') + 1);
  const fs::path staging = root / (".staging-" + randomHex(6));
  const fs::path dir = staging / suite / id;
  std::error_code ec;
  auto fail = [&](const std::string& what) {
    fs::remove_all(staging, ec);
    return Status(Error{what});
  };
  for (const char* sub : {"workspace", "harness", "solution"}) {
    fs::create_directories(dir / sub, ec);
    if (ec) return fail("cannot create " + (dir / sub).string() + ": " + ec.message());
  }
  for (const auto& f : folder.contents) {
    const fs::path to = dir / "workspace" / f.rel;
    fs::create_directories(to.parent_path(), ec);
    if (auto s = writeFile(to, f.bytes); !s) return fail(s.error().message);
    ::chmod(to.c_str(), f.executable ? 0755 : 0644);
  }
  if (auto s = writeFile(dir / "task.yaml", yaml); !s) return fail(s.error().message);
  if (auto s = writeFile(dir / "aka.json", spec.dump(2) + "\n"); !s) return fail(s.error().message);
  if (auto loaded = loadTask(dir); !loaded)
    return fail("akad's task loader refused the definition made for it: " + loaded.error().message);
  const fs::path final = root / suite / id;
  const fs::path old = root / (".old-" + randomHex(6));
  fs::create_directories(root / suite, ec);
  if (fs::exists(final)) fs::rename(final, old, ec);
  if (ec) return fail("cannot move the earlier import of " + t.id + " aside: " + ec.message());
  fs::rename(dir, final, ec);
  if (ec) return fail("cannot move " + t.id + " into " + final.string() + ": " + ec.message());
  fs::remove_all(old, ec);
  fs::remove_all(staging, ec);
  return {};
}

ImportedTask importOne(const ImportOptions& o, const ImportReport& report, const std::string& name, const std::string& id) {
  ImportedTask t;
  t.name = name;
  t.id = id;
  FileLedger ledger(report.checkout);
  auto finish = [&](TaskClass cls, const std::string& reason) {
    t.cls = cls;
    if (!reason.empty()) t.reasons.push_back(reason);
    t.files = ledger.hashes();
    return t;
  };
  const std::string base = "tasks/" + name;
  auto text = ledger.read(base + "/config.yaml", kMaxConfigBytes);
  if (!text) return finish(TaskClass::Invalid, text.error().message);
  auto config = parseTaskConfig(*text, name);
  if (!config) return finish(TaskClass::Invalid, config.error().message);
  const Family family = familyOf(name, *config);
  t.family = familyName(family);

  TaskFolder folder = readTaskFolder(ledger, base);
  if (!folder.problem.empty()) return finish(TaskClass::Invalid, folder.problem);
  const Classification k = classifyTask(name, *config, folder.files, o.platform);
  t.cls = k.cls;
  t.reasons = k.reasons;
  t.compat = k.compat;
  auto mapping = trustMappingFor(family, *config);
  if (mapping) {
    t.editable = mapping->editable;
    t.splice_functions = mapping->splice_functions;
  }
  if (!isRunnable(t.cls) || !mapping) return finish(t.cls, "");

  if (std::find(t.compat.begin(), t.compat.end(), compat::kPerfHelpers) != t.compat.end()) {
    auto changed = materialiseHelpers(ledger, folder);
    if (!changed) return finish(TaskClass::NeedsEdit, "AKA's timing helpers cannot be filled in: " + changed.error().message);
    t.materialised = *changed;
  }
  t.files = ledger.hashes();
  const std::vector<Injection> heldOut = importHeldOut(o, name, folder, t);
  const json generated = heldOut.empty() ? generateHeldOut(folder, t) : json(nullptr);
  const std::string yaml = taskYaml(t, *config, o.platform);
  if (auto s = writeTaskDefinition(report.tasksRoot, t, folder, yaml,
                                   wrapSpec(t, *config, *mapping, report, heldOut, generated));
      !s)
    return finish(TaskClass::Invalid, s.error().message);
  t.imported = true;
  return t;
}

std::mutex& importMutex() {
  static std::mutex m;
  return m;
}

fs::path indexFile(const fs::path& stateDir) { return stateDir / "aka" / "index.json"; }

}  // namespace

json ImportedTask::toJson(bool withFiles) const {
  json j = {{"name", name}, {"id", id}, {"family", family}, {"class", className(cls)}, {"imported", imported},
            {"reasons", reasons}, {"compat", compat}, {"editable", editable}, {"splice_functions", splice_functions},
            {"materialised", materialised}, {"held_out_injections", held_out_injections},
            {"held_out_generated", held_out_generated}};
  if (withFiles) j["files"] = files;
  else j["files_read"] = files.size();
  return j;
}

json ImportReport::toJson(bool withFiles) const {
  json tasksJson = json::array();
  std::map<std::string, int> counts;
  for (const auto& t : tasks) {
    tasksJson.push_back(t.toJson(withFiles));
    ++counts[className(t.cls)];
  }
  return {{"checkout", checkout.string()},
          {"commit", commit.known() ? json(commit.commit) : json(nullptr)},
          {"ref", commit.ref},
          {"commit_note", commit.note},
          {"platform", platformName(platform)},
          {"tasks_root", tasksRoot.string()},
          {"counts", counts},
          {"tasks", tasksJson}};
}

fs::path importedTasksRoot(const fs::path& stateDir) { return stateDir / "aka" / "tasks"; }

std::map<std::string, std::string> assignTaskIds(const std::vector<std::string>& all) {
  std::map<std::string, std::string> ids;
  std::map<std::string, int> uses;
  std::map<std::string, std::string> plain;
  for (const auto& name : all) {
    const auto parts = splitPath(name);
    std::string suite = "aka";
    std::size_t rest = 0;
    for (; rest + 1 < parts.size() && rest < 2; ++rest) {
      suite += '-';
      suite += sanitize(parts[rest]);
    }
    std::string id;
    for (std::size_t i = rest; i < parts.size(); ++i) {
      if (!id.empty()) id += '-';
      id += sanitize(parts[i]);
    }
    plain[name] = suite + "/" + id;
    ++uses[plain[name]];
  }
  for (const auto& name : all) {
    std::string full = plain[name];
    std::string suite = full.substr(0, full.find('/'));
    std::string id = full.substr(full.find('/') + 1);
    // Folder names that differ only in case or punctuation would meet in one id; so would names
    // past the loader's 64 characters once cut. A hash of the AKA name tells them apart.
    if (uses[full] > 1 || id.size() > 64) {
      id.resize(std::min<std::size_t>(id.size(), 55));
      id += "-";
      id += sha256Hex(name).substr(0, 8);
    }
    ids[name] = suite + "/" + id;
  }
  return ids;
}

Result<ImportReport> importCheckout(const ImportOptions& o) {
  std::lock_guard lock(importMutex());
  ImportReport report;
  std::error_code ec;
  report.checkout = fs::absolute(o.checkout, ec).lexically_normal();
  report.platform = o.platform;
  report.tasksRoot = importedTasksRoot(o.stateDir);
  auto all = discoverTasks(report.checkout, {});
  if (!all) return all.error();
  auto chosen = discoverTasks(report.checkout, o.selectors);
  if (!chosen) return chosen.error();
  report.commit = readCheckoutCommit(report.checkout);
  fs::create_directories(report.tasksRoot, ec);
  if (ec) return Error{"cannot create " + report.tasksRoot.string() + ": " + ec.message()};
  const auto ids = assignTaskIds(*all);
  for (const auto& name : *chosen) {
    ImportedTask t = importOne(o, report, name, ids.at(name));
    if (!t.imported) {
      // A task refused now must not stay submittable from an earlier import.
      fs::remove_all(report.tasksRoot / t.id, ec);
    }
    report.tasks.push_back(std::move(t));
  }

  auto index = readImportIndex(o.stateDir);
  json updated = index ? *index : json::object();
  for (const auto& t : report.tasks) {
    json entry = t.toJson(false);
    entry["checkout"] = report.checkout.string();
    entry["commit"] = report.commit.known() ? json(report.commit.commit) : json(nullptr);
    entry["commit_note"] = report.commit.note;
    entry["platform"] = platformName(report.platform);
    updated[t.name] = entry;
  }
  const fs::path file = indexFile(o.stateDir);
  const fs::path tmp = file.string() + ".tmp-" + randomHex(4);
  if (auto s = writeFile(tmp, updated.dump(2) + "\n"); !s) return s.error();
  fs::rename(tmp, file, ec);
  if (ec) return Error{"cannot write " + file.string() + ": " + ec.message()};
  return report;
}

Result<json> readImportIndex(const fs::path& stateDir) {
  const fs::path file = indexFile(stateDir);
  std::error_code ec;
  if (!fs::exists(file, ec)) return json::object();
  auto text = readFileLimited(file, 64 << 20);
  if (!text) return text.error();
  try {
    json j = json::parse(*text);
    if (!j.is_object()) return Error{file.string() + " is not a JSON object"};
    return j;
  } catch (const json::exception& e) {
    return Error{file.string() + " is not valid JSON: " + e.what()};
  }
}

}  // namespace akad::aka
