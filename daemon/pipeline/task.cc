#include "daemon/pipeline/task.h"

#include <sys/stat.h>

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <ctime>
#include <fstream>
#include <map>
#include <mutex>
#include <regex>
#include <set>

#include <yaml-cpp/yaml.h>

#include "common/sha256.h"
#include "daemon/pipeline/files.h"
#include "daemon/pipeline/task_scan.h"
#include "daemon/yaml_file.h"

namespace fs = std::filesystem;

namespace akad {
namespace {

// Collects validation problems so a task author sees all of them at once.
class TaskChecker {
 public:
  explicit TaskChecker(fs::path file) : file_(std::move(file)) {}

  void fail(const std::string& field, const std::string& what) {
    problems_.push_back(file_.string() + ": " + field + ": " + what);
  }
  bool ok() const { return problems_.empty(); }
  Error error() const {
    std::string msg;
    for (const auto& p : problems_) msg += (msg.empty() ? "" : "\n") + p;
    return Error{msg};
  }

  std::string string(const YAML::Node& root, const std::string& key, bool required = true) {
    const YAML::Node n = root[key];
    if (!n) {
      if (required) fail(key, "missing (a string is required)");
      return {};
    }
    if (!n.IsScalar()) {
      fail(key, "must be a string");
      return {};
    }
    return n.as<std::string>();
  }

  std::vector<std::string> strings(const YAML::Node& root, const std::string& key, bool required) {
    std::vector<std::string> out;
    const YAML::Node n = root[key];
    if (!n) {
      if (required) fail(key, "missing (a list of strings is required)");
      return out;
    }
    if (n.IsScalar()) return {n.as<std::string>()};
    if (!n.IsSequence()) {
      fail(key, "must be a list of strings");
      return out;
    }
    for (std::size_t i = 0; i < n.size(); ++i) {
      if (!n[i].IsScalar()) {
        fail(key + "[" + std::to_string(i) + "]", "must be a string");
        continue;
      }
      out.push_back(n[i].as<std::string>());
    }
    return out;
  }

  template <class T>
  void number(const YAML::Node& map, const std::string& path, const std::string& key, T& out,
              T min, T max) {
    const YAML::Node n = map[key];
    if (!n) return;  // defaults apply
    try {
      T v = n.as<T>();
      if (v < min || v > max) {
        fail(path + "." + key, "must be between " + std::to_string(min) + " and " +
                                   std::to_string(max));
        return;
      }
      out = v;
    } catch (const YAML::Exception&) {
      fail(path + "." + key, "must be a number");
    }
  }

 private:
  fs::path file_;
  std::vector<std::string> problems_;
};

nlohmann::json yamlToJson(const YAML::Node& n) {
  if (n.IsMap()) {
    nlohmann::json o = nlohmann::json::object();
    for (const auto& kv : n) o[kv.first.as<std::string>()] = yamlToJson(kv.second);
    return o;
  }
  if (n.IsSequence()) {
    nlohmann::json a = nlohmann::json::array();
    for (const auto& e : n) a.push_back(yamlToJson(e));
    return a;
  }
  if (n.IsScalar()) {
    const std::string s = n.Scalar();
    // Keep numbers numbers: a config's sizes are read as integers by the harness.
    if (n.Tag() != "!" && !s.empty()) {
      try {
        std::size_t used = 0;
        long long i = std::stoll(s, &used, 10);
        if (used == s.size()) return i;
      } catch (...) {
      }
      try {
        std::size_t used = 0;
        double d = std::stod(s, &used);
        if (used == s.size()) return d;
      } catch (...) {
      }
      if (s == "true") return true;
      if (s == "false") return false;
    }
    return s;
  }
  return nullptr;
}

std::vector<nlohmann::json> loadConfigs(TaskChecker& check, const YAML::Node& configs,
                                        const std::string& key, std::set<std::string>& names,
                                        bool mayBeEmpty = false) {
  std::vector<nlohmann::json> out;
  const YAML::Node list = configs[key];
  const std::string field = "configs." + key;
  if (mayBeEmpty && list && list.IsSequence() && list.size() == 0) return out;
  if (!list || !list.IsSequence() || list.size() == 0) {
    check.fail(field, "must be a non-empty list of configurations");
    return out;
  }
  static const std::regex nameRe("[A-Za-z0-9][A-Za-z0-9_.x-]{0,63}");
  for (std::size_t i = 0; i < list.size(); ++i) {
    const std::string at = field + "[" + std::to_string(i) + "]";
    if (!list[i].IsMap()) {
      check.fail(at, "must be a map of parameters");
      continue;
    }
    nlohmann::json c = yamlToJson(list[i]);
    for (auto& [k, v] : c.items()) {
      if (v.is_object() || v.is_array() || v.is_null())
        check.fail(at + "." + k, "must be a number, string or boolean");
    }
    if (!c.contains("name") || !c["name"].is_string()) {
      check.fail(at + ".name", "missing (every configuration needs a unique name)");
      continue;
    }
    const std::string name = c["name"];
    if (!std::regex_match(name, nameRe))
      check.fail(at + ".name", "'" + name + "' must match [A-Za-z0-9][A-Za-z0-9_.x-]*");
    if (!names.insert(name).second) check.fail(at + ".name", "'" + name + "' is used twice");
    out.push_back(std::move(c));
  }
  return out;
}

bool safeRelativePath(const std::string& p) {
  if (p.empty() || p.front() == '/') return false;
  for (const auto& part : fs::path(p)) {
    if (part == ".." || part == ".") return false;
  }
  return true;
}

}  // namespace

bool parseSize(const std::string& text, uint64_t& out) {
  if (text.empty()) return false;
  std::size_t used = 0;
  unsigned long long v = 0;
  try {
    v = std::stoull(text, &used, 10);
  } catch (...) {
    return false;
  }
  std::string unit = text.substr(used);
  uint64_t mul = 1;
  if (unit.empty() || unit == "B") mul = 1;
  else if (unit == "K" || unit == "KiB") mul = 1ull << 10;
  else if (unit == "M" || unit == "MiB") mul = 1ull << 20;
  else if (unit == "G" || unit == "GiB") mul = 1ull << 30;
  else return false;
  out = v * mul;
  return true;
}

nlohmann::json Task::tolerancesJson() const {
  nlohmann::json t = nlohmann::json::object();
  for (const auto& [dtype, tol] : tolerances) t[dtype] = {{"atol", tol.atol}, {"rtol", tol.rtol}};
  return t;
}

Result<Task> loadTask(const fs::path& dir) {
  const fs::path file = dir / "task.yaml";
  TaskChecker check(file);
  auto loaded = loadYamlFile(file);
  if (!loaded) return loaded.error();
  YAML::Node root = *loaded;
  if (!root.IsMap()) return Error{file.string() + ": the top level must be a map"};

  Task t;
  t.dir = fs::absolute(dir).lexically_normal();
  const std::string suiteDir = t.dir.parent_path().filename().string();

  if (root["schema"] && root["schema"].Scalar() != "1") check.fail("schema", "only schema 1 is known");
  static const std::regex idRe("[a-z0-9][a-z0-9_-]{0,63}");
  const std::string id = check.string(root, "id");
  if (!id.empty() && !std::regex_match(id, idRe)) check.fail("id", "'" + id + "' must match [a-z0-9][a-z0-9_-]*");
  if (!id.empty() && id != t.dir.filename().string())
    check.fail("id", "'" + id + "' must equal the folder name '" + t.dir.filename().string() + "'");
  t.suite = check.string(root, "suite");
  if (!t.suite.empty() && t.suite != suiteDir)
    check.fail("suite", "'" + t.suite + "' must equal the suite folder '" + suiteDir + "'");
  t.id = t.suite + "/" + id;
  t.title = check.string(root, "title");
  t.prompt = check.string(root, "prompt");
  t.harness = check.string(root, "harness");
  t.image = check.string(root, "image", false);
  if (t.image.empty()) t.image = "host";
  if (root["gpu"]) {
    try {
      t.gpu = root["gpu"].as<bool>();
    } catch (const YAML::Exception&) {
      check.fail("gpu", "must be true or false");
    }
  }

  t.editable = check.strings(root, "editable", true);
  if (t.editable.empty()) check.fail("editable", "must name at least one file the agent may edit");
  for (const auto& e : t.editable)
    if (!safeRelativePath(e)) check.fail("editable", "'" + e + "' must be a relative path inside the workspace");
  t.exclude = check.strings(root, "exclude", false);

  const YAML::Node build = root["build"];
  if (!build || !build.IsMap()) {
    check.fail("build", "missing (a map with 'reference' and 'candidate' command lists)");
  } else {
    t.build_reference = check.strings(build, "reference", true);
    t.build_candidate = check.strings(build, "candidate", true);
  }

  const YAML::Node configs = root["configs"];
  if (!configs || !configs.IsMap()) {
    check.fail("configs", "missing (a map with 'visible' and 'held_out' lists)");
  } else {
    std::set<std::string> names;
    t.visible = loadConfigs(check, configs, "visible", names);
    // An imported AgentKernelArena task (daemon/aka/) keeps its held-out shapes, if it has any,
    // where only its wrap scorer reads them (aka.json; docs/aka.md), not as configurations.
    t.held_out = loadConfigs(check, configs, "held_out", names, /*mayBeEmpty=*/t.harness == "aka-wrap");
  }

  const YAML::Node tol = root["tolerances"];
  // An empty map is valid: integer outputs are always compared exactly.
  if (!tol || !tol.IsMap()) {
    check.fail("tolerances", "missing (a map from dtype to {atol, rtol}; {} when every output is an integer)");
  } else {
    static const std::set<std::string> dtypes = {"f32", "f64", "f16", "bf16", "i32", "i64", "u8", "i8"};
    for (const auto& kv : tol) {
      const std::string dt = kv.first.as<std::string>();
      if (!dtypes.count(dt)) check.fail("tolerances." + dt, "unknown dtype (known: f32 f64 f16 bf16 i32 i64 u8 i8)");
      Tolerance x;
      check.number(kv.second, "tolerances." + dt, "atol", x.atol, 0.0, 1e9);
      check.number(kv.second, "tolerances." + dt, "rtol", x.rtol, 0.0, 1e9);
      t.tolerances[dt] = x;
    }
  }

  if (const YAML::Node timing = root["timing"]) {
    if (!timing.IsMap()) check.fail("timing", "must be a map");
    else {
      check.number(timing, "timing", "warmup", t.timing.warmup, 0, 1000);
      check.number(timing, "timing", "samples", t.timing.samples, 5, 100000);
      check.number(timing, "timing", "rounds", t.timing.rounds, 1, 100);
      check.number(timing, "timing", "input_sets", t.timing.input_sets, 1, 64);
      check.number(timing, "timing", "flush_bytes", t.timing.flush_bytes, uint64_t{0}, uint64_t{1} << 34);
    }
  }
  if (const YAML::Node limits = root["limits"]) {
    if (!limits.IsMap()) check.fail("limits", "must be a map");
    else {
      check.number(limits, "limits", "agent_s", t.limits.agent_s, 1.0, 86400.0);
      check.number(limits, "limits", "compile_s", t.limits.compile_s, 1.0, 86400.0);
      check.number(limits, "limits", "correctness_s", t.limits.correctness_s, 1.0, 86400.0);
      check.number(limits, "limits", "performance_s", t.limits.performance_s, 1.0, 86400.0);
      check.number(limits, "limits", "pids", t.limits.pids, 8, 1 << 20);
      if (limits["memory"]) {
        if (!limits["memory"].IsScalar() || !parseSize(limits["memory"].Scalar(), t.limits.memory_bytes))
          check.fail("limits.memory", "must be a size such as 512M or 4G");
      }
    }
  }

  static const std::regex harnessRe("[a-z0-9_-]{1,32}");
  if (!t.harness.empty() && !std::regex_match(t.harness, harnessRe))
    check.fail("harness", "'" + t.harness + "' must be the name of a folder in tasks/common/");
  for (const char* sub : {"workspace", "harness", "solution"}) {
    if (!fs::is_directory(t.dir / sub)) check.fail(sub, std::string("the folder ") + sub + "/ is missing beside task.yaml");
  }
  for (const auto& e : t.editable) {
    if (safeRelativePath(e) && !fs::exists(t.dir / "workspace" / e))
      check.fail("editable", "'" + e + "' does not exist in workspace/");
  }
  if (!check.ok()) return check.error();

  // The common harness is part of what a result was scored with, so it is part of the identity.
  auto hash = taskContentHash(t.dir);
  if (!hash) return hash.error();
  std::string commonHash;
  for (const std::string& part : harnessLayers(t.dir.parent_path().parent_path(), t.harness)) {
    const fs::path common = t.dir.parent_path().parent_path() / "common" / part;
    if (!fs::is_directory(common)) continue;
    auto ch = taskContentHash(common);
    if (!ch) return ch.error();
    commonHash += part + "=" + *ch + ";";
  }
  t.content_hash = sha256Hex(*hash + ":" + commonHash);
  return t;
}

namespace {
std::atomic<std::uint64_t> g_treesHashed{0};
}  // namespace

std::uint64_t taskTreesHashed() { return g_treesHashed.load(); }

Result<std::string> taskContentHash(const fs::path& dir) {
  std::vector<std::pair<std::string, fs::path>> files;
  std::error_code ec;
  for (fs::recursive_directory_iterator it(dir, fs::directory_options::none, ec), end; it != end;
       it.increment(ec)) {
    if (ec) break;
    const auto st = it->symlink_status(ec);
    if (fs::is_regular_file(st) || fs::is_symlink(st))
      files.emplace_back(fs::relative(it->path(), dir).generic_string(), it->path());
  }
  if (ec) return Error{"cannot walk task folder " + dir.string() + ": " + ec.message()};
  std::sort(files.begin(), files.end());
  // What each file is now, short of its bytes. The status-change time (ctime) moves with every
  // write, rename and chmod, and no one can set it back, so an unchanged stamp means unchanged
  // files: the hash of the last call stands, and tasks.list and run.submit read no file again.
  // File times are coarse (a clock tick): a stamp is kept only once every file in it is more
  // than a second old, so a write in the same tick as the stamp cannot hide behind it.
  std::vector<struct stat> stats(files.size());
  std::string stamp;
  time_t newest = 0;
  for (std::size_t i = 0; i < files.size(); ++i) {
    struct stat& st = stats[i];
    if (::lstat(files[i].second.c_str(), &st) != 0) return errnoError("cannot stat " + files[i].second.string());
    newest = std::max({newest, st.st_mtim.tv_sec, st.st_ctim.tv_sec});
    stamp += files[i].first + '\0' + std::to_string(st.st_dev) + ':' + std::to_string(st.st_ino) + ':' +
             std::to_string(st.st_mode) + ':' + std::to_string(st.st_size) + ':' + std::to_string(st.st_mtim.tv_sec) +
             '.' + std::to_string(st.st_mtim.tv_nsec) + ':' + std::to_string(st.st_ctim.tv_sec) + '.' +
             std::to_string(st.st_ctim.tv_nsec) + '\n';
  }
  static std::mutex cacheMutex;
  static std::map<std::string, std::pair<std::string, std::string>> cache;  // dir -> (stamp, hash)
  const std::string key = fs::absolute(dir).lexically_normal().string();
  {
    std::lock_guard lock(cacheMutex);
    if (auto it = cache.find(key); it != cache.end() && it->second.first == stamp) return it->second.second;
  }
  ++g_treesHashed;
  Sha256 h;
  for (std::size_t i = 0; i < files.size(); ++i) {
    const auto& [rel, path] = files[i];
    const struct stat& st = stats[i];
    std::string content;
    if (S_ISLNK(st.st_mode)) {
      content = "link:" + fs::read_symlink(path, ec).string();
    } else {
      auto fh = sha256File(path);
      if (!fh) return fh.error();
      content = ((st.st_mode & 0111) ? "exec:" : "file:") + *fh;
    }
    h.update(rel);
    h.update("\0", 1);
    h.update(content);
    h.update("\n", 1);
  }
  std::string hash = h.hexDigest();
  if (newest >= ::time(nullptr) - 1) return hash;
  std::lock_guard lock(cacheMutex);
  if (cache.size() > 4096) cache.clear();  // task folders come and go; keep it bounded
  cache[key] = {std::move(stamp), hash};
  return hash;
}

}  // namespace akad

namespace akad {

std::vector<std::string> harnessLayers(const fs::path& tasksRoot, const std::string& harness) {
  static const std::regex nameRe("[a-z0-9_-]{1,32}");
  std::vector<std::string> layers;
  std::ifstream base(tasksRoot / "common" / harness / "BASE");
  std::string line;
  while (std::getline(base, line))
    if (std::regex_match(line, nameRe) && line != harness && line != "checker") layers.push_back(line);
  layers.push_back(harness);
  layers.push_back("checker");
  return layers;
}

Result<fs::path> importTask(const Task& task, const fs::path& stateDir) {
  const fs::path root = taskVersionRoot(stateDir / "tasks", task.content_hash);
  if (fs::exists(root / ".complete")) return root;
  std::error_code ec;
  const fs::path tmp = stateDir / "tasks" / task.content_hash / ("def.tmp-" + std::to_string(::getpid()) + "-" +
                                                                  std::to_string(reinterpret_cast<uintptr_t>(&task)));
  const std::string into = "cannot import task " + task.id + " into " + tmp.string();
  fs::remove_all(tmp, ec);
  if (ec) return errorCodeError(into + ": removing what an earlier import left", ec);
  fs::create_directories(tmp / task.suite, ec);
  if (ec) return errorCodeError(into, ec);
  fs::copy(task.dir, tmp / task.suite / task.dir.filename(), fs::copy_options::recursive | fs::copy_options::copy_symlinks, ec);
  if (ec) return errorCodeError(into, ec);
  for (const std::string& part : harnessLayers(task.dir.parent_path().parent_path(), task.harness)) {
    const fs::path common = task.dir.parent_path().parent_path() / "common" / part;
    if (!fs::is_directory(common)) continue;
    fs::create_directories(tmp / "common", ec);
    if (!ec) fs::copy(common, tmp / "common" / part, fs::copy_options::recursive | fs::copy_options::copy_symlinks, ec);
    if (ec) return errorCodeError("cannot import the common harness of " + task.id, ec);
  }
  // The marker says the tree is whole; a tree without it is imported again.
  if (auto s = writeFile(tmp / ".complete", task.content_hash + "\n"); !s) return Error{into + ": " + s.error().message, 0, s.error().sysErrno};
  fs::rename(tmp, root, ec);
  // Another import of the same version may have moved its tree into place first.
  if (ec && !fs::exists(root / ".complete")) return errorCodeError("cannot move imported task into " + root.string(), ec);
  fs::remove_all(tmp, ec);
  return root;
}

}  // namespace akad
