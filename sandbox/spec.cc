#include "sandbox/spec.h"

#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <optional>
#include <string_view>

#include "common/byte_size.h"
#include "common/config_check.h"
#include "sandbox/files.h"
#include "sandbox/text.h"

namespace akad::box {
namespace {

using nlohmann::json;

constexpr uint64_t kMaxSpecBytes = 1 << 20;

template <size_t N>
bool listed(const std::string_view (&table)[N], std::string_view key) {
  return std::find(std::begin(table), std::end(table), key) != std::end(table);
}

// Fields whose flags append to the file's list instead of replacing it.
constexpr std::string_view kListFields[] = {"binds", "tmpfs", "devices", "gpus"};
constexpr std::string_view kKnownFields[] = {
    "root", "binds", "workspace", "tmpfs", "env", "memory", "pids", "cpus", "cpu_time",
    "wall_time", "output_limit", "net", "seccomp", "uid", "gid", "outside_uid", "outside_gid",
    "stdin", "stdout", "stderr", "result", "result_fd", "devices", "gpus", "cgroup_parent",
    "cgroup_backend", "hostname", "cwd", "command_is_pid1", "mount_template", "command"};

// Each reader records its problem in `check` and returns false, leaving `out` as it was.
bool readCount(ConfigCheck& check, const json& v, const std::string& field, uint64_t& out) {
  if (v.is_number_unsigned()) {
    out = v.get<uint64_t>();
    return true;
  }
  if (v.is_string()) {
    auto r = parseSize(v.get<std::string>());
    if (r) out = *r;
    else check.fail(field, r.error().message);
    return r.ok();
  }
  check.fail(field, "expected a non-negative integer or a size string, got " + v.dump());
  return false;
}

bool readSeconds(ConfigCheck& check, const json& v, const std::string& field, double& out) {
  double d = 0;
  bool number = v.is_number();
  if (number) {
    d = v.get<double>();
  } else if (v.is_string()) {
    const std::string text = v.get<std::string>();
    char* end = nullptr;
    d = std::strtod(text.c_str(), &end);
    number = !text.empty() && end == text.c_str() + text.size();
  }
  if (!number) check.fail(field, "expected seconds, got " + v.dump());
  else if (!std::isfinite(d) || d < 0 || d > 1e7) check.fail(field, "seconds out of range: " + v.dump());
  else out = d;
  return number && std::isfinite(d) && d >= 0 && d <= 1e7;
}

std::optional<uint64_t> idNumber(const json& v) {
  if (v.is_number_unsigned()) return v.get<uint64_t>();
  if (!v.is_string()) return std::nullopt;
  const std::string s = v.get<std::string>();
  if (s.empty() || s.find_first_not_of("0123456789") != std::string::npos || s.size() > 10) return std::nullopt;
  return std::stoull(s);
}

template <typename Id>
bool readId(ConfigCheck& check, const json& v, const std::string& field, Id& out) {
  const auto n = idNumber(v);
  if (!n) check.fail(field, "expected an id number, got " + v.dump());
  else if (*n > 0xFFFFFFFEull) check.fail(field, "id out of range");
  else out = static_cast<uint32_t>(*n);
  return n && *n <= 0xFFFFFFFEull;
}

bool isAbsoluteClean(const std::string& p) {
  if (p.empty() || p[0] != '/') return false;
  for (auto part : text::split(p, '/'))
    if (part == "..") return false;
  return true;
}

// A flag of one entry of the list `list` (a bind's rw, a tmpfs's huge): the problem names the
// list and shows the entry, as it does for an entry written as text ("/t:huge").
bool readEntryFlag(ConfigCheck& check, const json& entry, const std::string& list, const char* key, bool& out) {
  if (!entry.contains(key)) return true;
  if (entry[key].is_boolean()) {
    out = entry[key].get<bool>();
    return true;
  }
  check.fail(list, std::string("'") + key + "' must be true or false: " + entry.dump());
  return false;
}

// "SRC:DST[:MODE[,MODE]]" with MODE ro, rw or dev, or {"src":..,"dst":..,"rw":bool,"dev":bool}
bool readBindObject(ConfigCheck& check, const json& v, BindMount& b) {
  check.onlyKeys(v, "binds", {"src", "dst", "rw", "dev"});
  if (!v.contains("src") || !v["src"].is_string()) {
    check.fail("binds", "entry needs a string 'src': " + v.dump());
    return false;
  }
  b.src = v["src"].get<std::string>();
  b.dst = b.src;
  bool good = !v.contains("dst") || check.string(v["dst"], "binds", b.dst);
  good = readEntryFlag(check, v, "binds", "rw", b.rw) && good;
  return readEntryFlag(check, v, "binds", "dev", b.dev) && good;
}

bool readBindText(ConfigCheck& check, const std::string& s, BindMount& b) {
  const auto parts = text::fields(s, ':');
  if (parts.size() < 1 || parts.size() > 3) {
    check.fail("binds", "expected SRC:DST[:rw|ro][,dev], got '" + s + "'");
    return false;
  }
  b.src = parts[0];
  b.dst = parts.size() >= 2 ? parts[1] : parts[0];
  if (parts.size() == 3) {
    for (auto mode : text::fields(parts[2], ',')) {
      if (mode == "rw") b.rw = true;
      else if (mode == "dev") b.dev = true;
      else if (mode != "ro") {
        check.fail("binds", "mode must be rw, ro or dev in '" + s + "'");
        return false;
      }
    }
  }
  return true;
}

void readBind(ConfigCheck& check, const json& v, SandboxSpec& s) {
  BindMount b;
  bool good = false;
  if (v.is_object()) good = readBindObject(check, v, b);
  else if (v.is_string()) good = readBindText(check, v.get<std::string>(), b);
  else check.fail("binds", "expected \"SRC:DST[:rw]\" or an object, got " + v.dump());
  if (!good) return;
  if (!isAbsoluteClean(b.src)) check.fail("binds", "source must be an absolute path without '..': '" + b.src + "'");
  else if (!isAbsoluteClean(b.dst) || b.dst == "/")
    check.fail("binds", "destination must be an absolute path below / without '..': '" + b.dst + "'");
  else s.binds.push_back(b);
}

bool readTmpfsObject(ConfigCheck& check, const json& v, TmpfsMount& t) {
  if (!v.contains("dst") || !v["dst"].is_string()) {
    check.fail("tmpfs", "entry needs a string 'dst': " + v.dump());
    return false;
  }
  t.dst = v["dst"].get<std::string>();
  check.onlyKeys(v, "tmpfs", {"dst", "size", "huge"});
  bool good = !v.contains("size") || readCount(check, v["size"], "tmpfs", t.sizeBytes);
  return readEntryFlag(check, v, "tmpfs", "huge", t.hugePages) && good;
}

// "DST[:SIZE][:huge]"
bool readTmpfsText(ConfigCheck& check, const std::string& s, TmpfsMount& t) {
  auto colon = s.find(':');
  t.dst = s.substr(0, colon);
  std::string rest = colon == std::string::npos ? "" : s.substr(colon + 1);
  if (rest == "huge") {
    t.hugePages = true;
    rest.clear();
  } else if (rest.size() > 5 && rest.ends_with(":huge")) {
    t.hugePages = true;
    rest.resize(rest.size() - 5);
  }
  if (rest.empty()) return true;
  auto size = parseSize(rest);
  if (!size) {
    check.fail("tmpfs", size.error().message + " in '" + s + "'");
    return false;
  }
  t.sizeBytes = *size;
  return true;
}

void readTmpfs(ConfigCheck& check, const json& v, SandboxSpec& s) {
  TmpfsMount t;
  bool good = false;
  if (v.is_object()) good = readTmpfsObject(check, v, t);
  else if (v.is_string()) good = readTmpfsText(check, v.get<std::string>(), t);
  else check.fail("tmpfs", "expected \"DST[:SIZE][:huge]\" or an object, got " + v.dump());
  if (!good) return;
  if (!isAbsoluteClean(t.dst) || t.dst == "/")
    check.fail("tmpfs", "destination must be an absolute path below / without '..': '" + t.dst + "'");
  else s.tmpfs.push_back(t);
}

// env may be given as {"K": "V"} or as ["K=V", ...] (the --env flag's form).
json envAsObject(const json& v) {
  if (!v.is_array()) return v;
  json o = json::object();
  for (const auto& e : v) {
    if (!e.is_string()) return v;  // left for validation to reject
    std::string kv = e.get<std::string>();
    auto eq = kv.find('=');
    if (eq == std::string::npos) return v;
    o[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  return o;
}

json mergeFlags(const json& fileIn, const json& flagsIn) {
  json merged = fileIn.is_object() ? fileIn : json::object();
  json flags = flagsIn.is_object() ? flagsIn : json::object();
  if (merged.contains("env")) merged["env"] = envAsObject(merged["env"]);
  if (flags.contains("env")) flags["env"] = envAsObject(flags["env"]);
  for (auto it = flags.begin(); it != flags.end(); ++it) {
    const std::string& key = it.key();
    if (listed(kListFields, key) && merged.contains(key) && merged[key].is_array() && it->is_array()) {
      for (const auto& e : *it) merged[key].push_back(e);
    } else if (key == "env" && merged.contains("env") && merged["env"].is_object() && it->is_object()) {
      for (auto e = it->begin(); e != it->end(); ++e) merged["env"][e.key()] = e.value();
    } else {
      merged[key] = *it;
    }
  }
  return merged;
}

}  // namespace

Result<json> loadSpecFile(const std::string& path) {
  auto read = readWholeFile(path, kMaxSpecBytes, "spec file");
  if (!read) return read.error();
  const std::string& text = *read;
  json j = json::parse(text, nullptr, false);
  if (j.is_discarded()) {
    try {
      [[maybe_unused]] auto again = json::parse(text);
    } catch (const json::parse_error& e) {
      return Error{"spec file '" + path + "' is not valid JSON: " + e.what()};
    }
    return Error{"spec file '" + path + "' is not valid JSON"};
  }
  if (!j.is_object()) return Error{"spec file '" + path + "' must hold a JSON object"};
  return j;
}

namespace {

// The fields that are plain strings, then the rules each must follow.
void parseStrings(ConfigCheck& check, const json& j, SandboxSpec& s) {
  for (auto [field, out] : {std::pair<const char*, std::string*>{"root", &s.root}, {"workspace", &s.workspace}, {"cpus", &s.cpus},
                            {"seccomp", &s.seccomp}, {"stdin", &s.stdinPath}, {"stdout", &s.stdoutPath}, {"stderr", &s.stderrPath},
                            {"result", &s.resultPath}, {"cgroup_parent", &s.cgroupParent}, {"hostname", &s.hostname}, {"cwd", &s.cwd}})
    check.readString(j, "", field, *out);

  if (s.root != "host" && !isAbsoluteClean(s.root)) check.fail("root", "must be 'host' or an absolute directory path");
  if (!s.workspace.empty() && !isAbsoluteClean(s.workspace)) check.fail("workspace", "must be an absolute path without '..'");
  if (!s.cwd.empty() && !isAbsoluteClean(s.cwd)) check.fail("cwd", "must be an absolute path inside the sandbox");
  if (!s.cpus.empty() && s.cpus.find_first_not_of("0123456789,-") != std::string::npos)
    check.fail("cpus", "expected a CPU list such as 0-3,6, got '" + s.cpus + "'");
  if (s.hostname.empty() || s.hostname.size() > 64) check.fail("hostname", "must be 1 to 64 characters");
  if (s.cgroupParent.empty() || s.cgroupParent[0] == '/' || s.cgroupParent.find("..") != std::string::npos ||
      s.cgroupParent.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./@") != std::string::npos)
    check.fail("cgroup_parent", "must be a relative cgroup path of [A-Za-z0-9-_./@] without '..', got '" + s.cgroupParent + "'");
}

void parseMounts(ConfigCheck& check, const json& j, SandboxSpec& s) {
  if (j.contains("binds")) {
    if (!j["binds"].is_array()) check.fail("binds", "expected a list");
    else
      for (const auto& e : j["binds"]) readBind(check, e, s);
  }
  if (j.contains("tmpfs")) {
    if (!j["tmpfs"].is_array()) check.fail("tmpfs", "expected a list");
    else
      for (const auto& e : j["tmpfs"]) readTmpfs(check, e, s);
  }
}

void parseDevices(ConfigCheck& check, const json& j, SandboxSpec& s) {
  std::vector<std::string> devices, gpus;
  if (j.contains("devices")) {
    if (!j["devices"].is_array()) check.fail("devices", "expected a list of device paths");
    else if (check.strings(j["devices"], "devices", devices))
      for (const auto& d : devices) {
        if (!isAbsoluteClean(d)) check.fail("devices", "device path must be absolute: '" + d + "'");
        else s.devices.push_back(d);
      }
  }
  if (j.contains("gpus")) {
    if (!j["gpus"].is_array()) check.fail("gpus", "expected a list of GPU ids (akactl gpus lists them)");
    else if (check.strings(j["gpus"], "gpus", gpus))
      for (const auto& g : gpus) {
        bool ok = !g.empty() && g.size() <= 32;
        for (char c : g) ok = ok && ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'));
        if (!ok) check.fail("gpus", "'" + g + "' is not a GPU id such as nvidia0 or amd1");
        else s.gpus.push_back(g);
      }
  }
}

void parseEnv(ConfigCheck& check, const json& j, SandboxSpec& s) {
  if (!j.contains("env")) return;
  if (!j["env"].is_object()) {
    check.fail("env", "expected an object of KEY: VALUE strings or a list of \"KEY=VALUE\"");
    return;
  }
  for (auto e = j["env"].begin(); e != j["env"].end(); ++e) {
    if (!e->is_string()) check.fail("env", "value of '" + e.key() + "' must be a string");
    else if (e.key().empty() || e.key().find('=') != std::string::npos || e.key().find('\0') != std::string::npos)
      check.fail("env", "invalid variable name '" + e.key() + "'");
    else s.env[e.key()] = e->get<std::string>();
  }
}

void parseLimits(ConfigCheck& check, const json& j, SandboxSpec& s) {
  for (auto [field, out] : {std::pair<const char*, uint64_t*>{"memory", &s.memoryBytes}, {"pids", &s.pids},
                            {"output_limit", &s.outputLimitBytes}})
    if (j.contains(field)) readCount(check, j[field], field, *out);
  for (auto [field, out] : {std::pair<const char*, double*>{"cpu_time", &s.cpuTimeS}, {"wall_time", &s.wallTimeS}})
    if (j.contains(field)) readSeconds(check, j[field], field, *out);
  if (s.memoryBytes != 0 && s.memoryBytes < (1u << 20)) check.fail("memory", "must be at least 1M");
}

void parseIds(ConfigCheck& check, const json& j, SandboxSpec& s) {
  if (j.contains("uid")) readId(check, j["uid"], "uid", s.uid);
  if (j.contains("gid")) readId(check, j["gid"], "gid", s.gid);
  uid_t ou = 0;
  gid_t og = 0;
  if (j.contains("outside_uid") && readId(check, j["outside_uid"], "outside_uid", ou)) s.outsideUid = ou;
  if (j.contains("outside_gid") && readId(check, j["outside_gid"], "outside_gid", og)) s.outsideGid = og;
  if (j.contains("result_fd")) {
    const auto fd = idNumber(j["result_fd"]);
    if (!fd || *fd > 65535) check.fail("result_fd", "expected a file descriptor number");
    else s.resultFd = static_cast<int>(*fd);
  }
}

// The choices: network, cgroup back-end, who is pid 1, and the mount template.
void parseModes(ConfigCheck& check, const json& j, SandboxSpec& s) {
  std::string net, backend;
  if (j.contains("net") && check.readString(j, "", "net", net)) {
    if (net == "none") s.net = NetMode::None;
    else if (net == "host") s.net = NetMode::Host;
    else check.fail("net", "must be 'none' or 'host', got '" + net + "'");
  }
  if (j.contains("cgroup_backend") && check.readString(j, "", "cgroup_backend", backend)) {
    if (backend == "auto") s.cgroupBackend = CgroupBackendChoice::Auto;
    else if (backend == "v1") s.cgroupBackend = CgroupBackendChoice::V1;
    else if (backend == "v2") s.cgroupBackend = CgroupBackendChoice::V2;
    else check.fail("cgroup_backend", "must be auto, v1 or v2, got '" + backend + "'");
  }
  check.readBool(j, "", "command_is_pid1", s.commandIsPid1);
  check.readBool(j, "", "mount_template", s.mountTemplate);
}

void parseCommand(ConfigCheck& check, const json& j, SandboxSpec& s) {
  if (!j.contains("command") || (j["command"].is_array() && j["command"].empty()))
    check.fail("command", "no command given (akabox run [options] -- COMMAND [ARG...])");
  else if (!j["command"].is_array()) check.fail("command", "expected a list of strings");
  else check.strings(j["command"], "command", s.command);
}

}  // namespace

// Field by field in a fixed order; every problem is reported, in that order.
Result<SandboxSpec> parseSpec(const json& file, const json& flags) {
  const json j = mergeFlags(file, flags);
  ConfigCheck check("akabox spec");
  check.onlyKeys(j, "", kKnownFields);
  SandboxSpec s;
  for (void (*step)(ConfigCheck&, const json&, SandboxSpec&) :
       {parseStrings, parseMounts, parseDevices, parseEnv, parseLimits, parseIds, parseModes, parseCommand})
    step(check, j, s);
  if (!check.ok()) return check.error();
  return s;
}

Result<std::pair<uid_t, gid_t>> outsideIds(const SandboxSpec& spec) {
  uid_t ou = 100000 + spec.uid;
  gid_t og = 100000 + spec.gid;
  if (!spec.workspace.empty()) {
    struct stat st {};
    if (::stat(spec.workspace.c_str(), &st) != 0) return errnoError("cannot stat workspace '" + spec.workspace + "'");
    if (!S_ISDIR(st.st_mode)) return Error{"workspace '" + spec.workspace + "' is not a directory"};
    // The agent must be able to write its workspace, so by default the sandbox uid is whoever
    // the caller made own it; a root-owned workspace falls back to the unprivileged default.
    if (st.st_uid != 0) ou = st.st_uid;
    if (st.st_gid != 0) og = st.st_gid;
  }
  if (spec.outsideUid) ou = *spec.outsideUid;
  if (spec.outsideGid) og = *spec.outsideGid;
  if (ou == 0 || og == 0) return Error{"refusing to map the sandbox to root (uid/gid 0) outside"};
  return std::make_pair(ou, og);
}

}  // namespace akad::box
