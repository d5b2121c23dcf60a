// Reading tasks/<suite>/<task>/task.yaml: the file as JSON (common/yaml_json.h), checked
// section by section with one ConfigCheck (common/config_check.h), so that a task author sees
// every problem at once; and the configs.json the harness reads of it. docs/tasks.md documents
// the format. The daemon and akatask (tasks/tools) both compile this file.
#include <limits>
#include <regex>
#include <set>

#include "common/byte_size.h"
#include "common/config_check.h"
#include "common/yaml_json.h"
#include "daemon/pipeline/task.h"

namespace fs = std::filesystem;

namespace akad {
namespace {

using nlohmann::json;
using Need = ConfigCheck::Need;

bool safeRelativePath(const std::string& p) {
  if (p.empty() || p.front() == '/') return false;
  for (const auto& part : fs::path(p)) {
    if (part == ".." || part == ".") return false;
  }
  return true;
}

// schema, id, suite, title, prompt, harness, image and gpu: who the task is and what it runs on.
void readIdentity(ConfigCheck& check, const json& root, Task& t) {
  int schema = 1;
  if (check.readNumber(root, "", "schema", schema, std::numeric_limits<int>::min(), std::numeric_limits<int>::max()) &&
      schema != 1)
    check.fail("schema", "only schema 1 is known");
  static const std::regex idRe("[a-z0-9][a-z0-9_-]{0,63}");
  std::string id;
  check.readString(root, "", "id", id, Need::Required);
  if (!id.empty() && !std::regex_match(id, idRe)) check.fail("id", "'" + id + "' must match [a-z0-9][a-z0-9_-]*");
  if (!id.empty() && id != t.dir.filename().string())
    check.fail("id", "'" + id + "' must equal the folder name '" + t.dir.filename().string() + "'");
  const std::string suiteDir = t.dir.parent_path().filename().string();
  check.readString(root, "", "suite", t.suite, Need::Required);
  if (!t.suite.empty() && t.suite != suiteDir)
    check.fail("suite", "'" + t.suite + "' must equal the suite folder '" + suiteDir + "'");
  t.id = t.suite + "/" + id;
  check.readString(root, "", "title", t.title, Need::Required);
  check.readString(root, "", "prompt", t.prompt, Need::Required);
  check.readString(root, "", "harness", t.harness, Need::Required);
  static const std::regex harnessRe("[a-z0-9_-]{1,32}");
  if (!t.harness.empty() && !std::regex_match(t.harness, harnessRe))
    check.fail("harness", "'" + t.harness + "' must be the name of a folder in tasks/common/");
  check.readString(root, "", "image", t.image);
  if (t.image.empty()) t.image = "host";
  check.readBool(root, "", "gpu", t.gpu);
}

// editable and exclude: which files of the workspace the agent's version of counts.
void readFiles(ConfigCheck& check, const json& root, Task& t) {
  check.readStrings(root, "", "editable", t.editable, Need::Required, /*loneString=*/true);
  if (root.contains("editable") && t.editable.empty()) check.fail("editable", "must name at least one file the agent may edit");
  for (const auto& e : t.editable)
    if (!safeRelativePath(e)) check.fail("editable", "'" + e + "' must be a relative path inside the workspace");
  check.readStrings(root, "", "exclude", t.exclude, Need::Optional, /*loneString=*/true);
}

void readBuild(ConfigCheck& check, const json& root, Task& t) {
  const json* build = check.member(root, "", "build", Need::Required, "a map with 'reference' and 'candidate' command lists");
  if (!build || !check.map(*build, "build", "'reference' and 'candidate' command lists")) return;
  check.onlyKeys(*build, "build", {"reference", "candidate"});
  check.readStrings(*build, "build", "reference", t.build_reference, Need::Required, /*loneString=*/true);
  check.readStrings(*build, "build", "candidate", t.build_candidate, Need::Required, /*loneString=*/true);
}

// One list of configurations: maps of scalar parameters, each with a name unique in the task.
std::vector<json> readConfigList(ConfigCheck& check, const json& configs, const std::string& key, std::set<std::string>& names,
                                 bool mayBeEmpty) {
  std::vector<json> out;
  const std::string field = keyPath("configs", key);
  const auto it = configs.find(key);
  if (mayBeEmpty && it != configs.end() && it->is_array() && it->empty()) return out;
  if (it == configs.end() || !it->is_array() || it->empty()) {
    check.fail(field, "must be a non-empty list of configurations");
    return out;
  }
  static const std::regex nameRe("[A-Za-z0-9][A-Za-z0-9_.x-]{0,63}");
  for (std::size_t i = 0; i < it->size(); ++i) {
    const std::string at = indexPath(field, i);
    const json& c = (*it)[i];
    if (!check.map(c, at, "parameters")) continue;
    for (auto& [k, v] : c.items())
      if (v.is_object() || v.is_array() || v.is_null()) check.fail(keyPath(at, k), "must be a number, string or boolean");
    if (!c.contains("name") || !c["name"].is_string()) {
      check.fail(keyPath(at, "name"), "missing (every configuration needs a unique name)");
      continue;
    }
    const std::string name = c["name"];
    if (!std::regex_match(name, nameRe)) check.fail(keyPath(at, "name"), "'" + name + "' must match [A-Za-z0-9][A-Za-z0-9_.x-]*");
    if (!names.insert(name).second) check.fail(keyPath(at, "name"), "'" + name + "' is used twice");
    out.push_back(c);
  }
  return out;
}

void readConfigurations(ConfigCheck& check, const json& root, Task& t) {
  const json* configs = check.member(root, "", "configs", Need::Required, "a map with 'visible' and 'held_out' lists");
  if (!configs || !check.map(*configs, "configs", "'visible' and 'held_out' lists")) return;
  check.onlyKeys(*configs, "configs", {"visible", "held_out"});
  std::set<std::string> names;
  t.visible = readConfigList(check, *configs, "visible", names, /*mayBeEmpty=*/false);
  // An imported AgentKernelArena task (daemon/aka/) keeps its held-out shapes, if it has any,
  // where only its wrap scorer reads them (aka.json; docs/aka.md), not as configurations.
  t.held_out = readConfigList(check, *configs, "held_out", names, /*mayBeEmpty=*/t.traits().imported);
}

// An empty map is valid: integer outputs are always compared exactly.
void readTolerances(ConfigCheck& check, const json& root, Task& t) {
  const json* tol = check.member(root, "", "tolerances", Need::Required,
                                  "a map from dtype to {atol, rtol}; {} when every output is an integer");
  if (!tol || !check.map(*tol, "tolerances", "dtype to {atol, rtol}")) return;
  static const std::set<std::string> dtypes = {"f32", "f64", "f16", "bf16", "i32", "i64", "u8", "i8"};
  for (auto it = tol->begin(); it != tol->end(); ++it) {
    const std::string at = keyPath("tolerances", it.key());
    if (!dtypes.count(it.key())) check.fail(at, "is an unknown dtype (known: f32 f64 f16 bf16 i32 i64 u8 i8)");
    if (!check.map(*it, at, "atol and rtol")) continue;
    check.onlyKeys(*it, at, {"atol", "rtol"});
    Tolerance x;
    check.readNumber(*it, at, "atol", x.atol, 0.0, 1e9);
    check.readNumber(*it, at, "rtol", x.rtol, 0.0, 1e9);
    t.tolerances[it.key()] = x;
  }
}

void readTiming(ConfigCheck& check, const json& root, Task& t) {
  const json* timing = check.member(root, "", "timing");
  if (!timing || !check.map(*timing, "timing")) return;
  check.onlyKeys(*timing, "timing", {"warmup", "samples", "rounds", "input_sets", "flush_bytes", "window"});
  check.readNumber(*timing, "timing", "warmup", t.timing.warmup, 0, 1000);
  check.readNumber(*timing, "timing", "samples", t.timing.samples, 5, 100000);
  check.readNumber(*timing, "timing", "rounds", t.timing.rounds, 1, 100);
  check.readNumber(*timing, "timing", "input_sets", t.timing.input_sets, 1, 64);
  check.readNumber(*timing, "timing", "flush_bytes", t.timing.flush_bytes, uint64_t{0}, uint64_t{1} << 34);
  if (check.readString(*timing, "timing", "window", t.timing.window)) {
    if (t.timing.window != "queued" && t.timing.window != "synced" && t.timing.window != "graph")
      check.fail("timing.window", "'" + t.timing.window + "' must be queued, synced or graph");
    else if (t.timing.window == "graph" && !t.traits().graphWindows)
      check.fail("timing.window", "graph windows need a harness whose driver captures CUDA graphs (python), not '" +
                                      t.harness + "'");
  }
}

void readLimits(ConfigCheck& check, const json& root, Task& t) {
  const json* limits = check.member(root, "", "limits");
  if (!limits || !check.map(*limits, "limits")) return;
  check.onlyKeys(*limits, "limits", {"agent_s", "compile_s", "correctness_s", "performance_s", "pids", "memory"});
  check.readNumber(*limits, "limits", "agent_s", t.limits.agent_s, 1.0, 86400.0);
  check.readNumber(*limits, "limits", "compile_s", t.limits.compile_s, 1.0, 86400.0);
  check.readNumber(*limits, "limits", "correctness_s", t.limits.correctness_s, 1.0, 86400.0);
  check.readNumber(*limits, "limits", "performance_s", t.limits.performance_s, 1.0, 86400.0);
  check.readNumber(*limits, "limits", "pids", t.limits.pids, 8, 1 << 20);
  std::string memory;
  if (limits->contains("memory") && check.readString(*limits, "limits", "memory", memory)) {
    auto bytes = parseSize(memory);
    if (bytes) t.limits.memory_bytes = *bytes;
    else check.fail("limits.memory", "must be a size such as 512M or 4G: " + bytes.error().message);
  }
}

// The folders beside task.yaml, and the editable files in the workspace.
void checkFolders(ConfigCheck& check, const Task& t) {
  for (const char* sub : {"workspace", "harness", "solution"}) {
    if (!fs::is_directory(t.dir / sub)) check.fail(sub, std::string("the folder ") + sub + "/ is missing beside task.yaml");
  }
  for (const auto& e : t.editable) {
    if (safeRelativePath(e) && !fs::exists(t.dir / "workspace" / e)) check.fail("editable", "'" + e + "' does not exist in workspace/");
  }
}

}  // namespace

HarnessTraits harnessTraits(const std::string& harness) {
  HarnessTraits t;
  t.driven = harness == "cpp" || harness == "hip" || harness == "python" || harness == "aka-convert";
  t.akaCommands = harness == "aka-wrap";
  t.akaConverted = harness == "aka-convert";
  t.imported = t.akaCommands || t.akaConverted;
  t.graphWindows = harness == "python";
  return t;
}

Result<Task> readTaskFile(const fs::path& dir) {
  const fs::path file = dir / "task.yaml";
  auto doc = loadYamlDocument(file);
  if (!doc) return doc.error();
  const json& root = doc->root;
  if (!root.is_object()) return Error{file.string() + ": the top level must be a map"};

  Task t;
  t.dir = fs::absolute(dir).lexically_normal();
  ConfigCheck check(file.string(), &doc->texts);
  check.onlyKeys(root, "", {"schema", "id", "suite", "title", "prompt", "harness", "image", "gpu", "editable", "exclude",
                            "build", "configs", "tolerances", "timing", "limits"});
  for (void (*read)(ConfigCheck&, const json&, Task&) :
       {readIdentity, readFiles, readBuild, readConfigurations, readTolerances, readTiming, readLimits})
    read(check, root, t);
  checkFolders(check, t);
  if (!check.ok()) return check.error();
  return t;
}

nlohmann::json Task::tolerancesJson() const {
  nlohmann::json t = nlohmann::json::object();
  for (const auto& [dtype, tol] : tolerances) t[dtype] = {{"atol", tol.atol}, {"rtol", tol.rtol}};
  return t;
}

nlohmann::json Task::configsJson(bool withHeldOut) const {
  json list = visible;
  if (withHeldOut)
    for (const json& c : held_out) list.push_back(c);
  const json times = {{"warmup", timing.warmup}, {"samples", timing.samples}, {"rounds", timing.rounds},
                      {"input_sets", timing.input_sets}, {"flush_bytes", timing.flush_bytes},
                      {"window", timing.window}};
  return {{"task", id}, {"configs", list}, {"tolerances", tolerancesJson()}, {"timing", times}};
}

}  // namespace akad
