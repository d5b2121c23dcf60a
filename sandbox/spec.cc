#include "sandbox/spec.h"

#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <string_view>

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

Error fieldError(const std::string& field, const std::string& why) {
  return Error{"spec field '" + field + "': " + why};
}

Result<std::string> asString(const json& v, const std::string& field) {
  if (!v.is_string()) return fieldError(field, "expected a string, got " + v.dump());
  return v.get<std::string>();
}

Result<uint64_t> asCount(const json& v, const std::string& field) {
  if (v.is_number_unsigned()) return v.get<uint64_t>();
  if (v.is_string()) {
    auto r = parseSize(v.get<std::string>());
    if (!r) return fieldError(field, r.error().message);
    return *r;
  }
  return fieldError(field, "expected a non-negative integer or a size string, got " + v.dump());
}

Result<double> asSeconds(const json& v, const std::string& field) {
  double d;
  if (v.is_number()) {
    d = v.get<double>();
  } else if (v.is_string()) {
    try {
      size_t used = 0;
      d = std::stod(v.get<std::string>(), &used);
      if (used != v.get<std::string>().size()) throw std::invalid_argument("trailing");
    } catch (const std::exception&) {
      return fieldError(field, "expected seconds, got " + v.dump());
    }
  } else {
    return fieldError(field, "expected seconds, got " + v.dump());
  }
  if (!std::isfinite(d) || d < 0 || d > 1e7) return fieldError(field, "seconds out of range: " + v.dump());
  return d;
}

Result<uint32_t> asId(const json& v, const std::string& field) {
  if (v.is_string()) {
    const std::string s = v.get<std::string>();
    if (s.empty() || s.find_first_not_of("0123456789") != std::string::npos || s.size() > 10)
      return fieldError(field, "expected an id number, got " + v.dump());
    uint64_t n = std::stoull(s);
    if (n > 0xFFFFFFFEull) return fieldError(field, "id out of range");
    return static_cast<uint32_t>(n);
  }
  if (!v.is_number_unsigned() || v.get<uint64_t>() > 0xFFFFFFFEull)
    return fieldError(field, "expected an id number, got " + v.dump());
  return static_cast<uint32_t>(v.get<uint64_t>());
}

bool isAbsoluteClean(const std::string& p) {
  if (p.empty() || p[0] != '/') return false;
  for (auto part : text::split(p, '/'))
    if (part == "..") return false;
  return true;
}

// "SRC:DST[:MODE[,MODE]]" with MODE ro, rw or dev, or {"src":..,"dst":..,"rw":bool,"dev":bool}
Result<BindMount> parseBind(const json& v) {
  BindMount b;
  if (v.is_object()) {
    if (!v.contains("src") || !v["src"].is_string()) return fieldError("binds", "entry needs a string 'src': " + v.dump());
    b.src = v["src"].get<std::string>();
    b.dst = v.value("dst", b.src);
    if (v.contains("rw") && !v["rw"].is_boolean()) return fieldError("binds", "'rw' must be true or false: " + v.dump());
    b.rw = v.value("rw", false);
    if (v.contains("dev") && !v["dev"].is_boolean()) return fieldError("binds", "'dev' must be true or false: " + v.dump());
    b.dev = v.value("dev", false);
  } else if (v.is_string()) {
    std::string s = v.get<std::string>();
    const auto parts = text::fields(s, ':');
    if (parts.size() < 1 || parts.size() > 3) return fieldError("binds", "expected SRC:DST[:rw|ro][,dev], got '" + s + "'");
    b.src = parts[0];
    b.dst = parts.size() >= 2 ? parts[1] : parts[0];
    if (parts.size() == 3) {
      for (auto mode : text::fields(parts[2], ',')) {
        if (mode == "rw") b.rw = true;
        else if (mode == "dev") b.dev = true;
        else if (mode != "ro") return fieldError("binds", "mode must be rw, ro or dev in '" + s + "'");
      }
    }
  } else {
    return fieldError("binds", "expected \"SRC:DST[:rw]\" or an object, got " + v.dump());
  }
  if (!isAbsoluteClean(b.src)) return fieldError("binds", "source must be an absolute path without '..': '" + b.src + "'");
  if (!isAbsoluteClean(b.dst) || b.dst == "/") return fieldError("binds", "destination must be an absolute path below / without '..': '" + b.dst + "'");
  return b;
}

Result<TmpfsMount> parseTmpfs(const json& v) {
  TmpfsMount t;
  if (v.is_object()) {
    if (!v.contains("dst") || !v["dst"].is_string()) return fieldError("tmpfs", "entry needs a string 'dst': " + v.dump());
    t.dst = v["dst"].get<std::string>();
    for (const auto& [key, value] : v.items())
      if (key != "dst" && key != "size" && key != "huge") return fieldError("tmpfs", "unknown key '" + key + "' in " + v.dump());
    if (v.contains("size")) {
      auto s = asCount(v["size"], "tmpfs.size");
      if (!s) return s.error();
      t.sizeBytes = *s;
    }
    if (v.contains("huge")) {
      if (!v["huge"].is_boolean()) return fieldError("tmpfs", "'huge' must be true or false: " + v.dump());
      t.hugePages = v["huge"].get<bool>();
    }
  } else if (v.is_string()) {
    std::string s = v.get<std::string>();
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
    if (!rest.empty()) {
      auto size = parseSize(rest);
      if (!size) return fieldError("tmpfs", size.error().message + " in '" + s + "'");
      t.sizeBytes = *size;
    }
  } else {
    return fieldError("tmpfs", "expected \"DST[:SIZE][:huge]\" or an object, got " + v.dump());
  }
  if (!isAbsoluteClean(t.dst) || t.dst == "/") return fieldError("tmpfs", "destination must be an absolute path below / without '..': '" + t.dst + "'");
  return t;
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

Result<uint64_t> parseSize(const std::string& text) {
  if (text.empty()) return Error{"empty size"};
  size_t i = 0;
  while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]))) ++i;
  if (i == 0 || i > 19) return Error{"invalid size '" + text + "' (expected e.g. 512M, 4G or bytes)"};
  uint64_t n = std::stoull(text.substr(0, i));
  std::string unit = text.substr(i);
  unsigned shift = 0;
  if (unit.empty() || unit == "B" || unit == "b") shift = 0;
  else if (unit == "K" || unit == "k" || unit == "KB" || unit == "KiB") shift = 10;
  else if (unit == "M" || unit == "m" || unit == "MB" || unit == "MiB") shift = 20;
  else if (unit == "G" || unit == "g" || unit == "GB" || unit == "GiB") shift = 30;
  else if (unit == "T" || unit == "t" || unit == "TB" || unit == "TiB") shift = 40;
  else return Error{"invalid size unit in '" + text + "' (use K, M, G or T)"};
  if (shift && n > (UINT64_MAX >> shift)) return Error{"size '" + text + "' is too large"};
  return n << shift;
}

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

Status checkKnownFields(const json& j) {
  for (auto it = j.begin(); it != j.end(); ++it)
    if (!listed(kKnownFields, it.key())) return fieldError(it.key(), "unknown field (see docs/akabox.md)");
  return {};
}

Status readString(const json& j, const char* field, std::string& out) {
  if (!j.contains(field)) return {};
  auto r = asString(j[field], field);
  if (!r) return r.error();
  out = *r;
  return {};
}

// The fields that are plain strings, then the rules each must follow.
Status parseStrings(const json& j, SandboxSpec& s) {
  for (auto [field, out] : {std::pair<const char*, std::string*>{"root", &s.root}, {"workspace", &s.workspace}, {"cpus", &s.cpus},
                            {"seccomp", &s.seccomp}, {"stdin", &s.stdinPath}, {"stdout", &s.stdoutPath}, {"stderr", &s.stderrPath},
                            {"result", &s.resultPath}, {"cgroup_parent", &s.cgroupParent}, {"hostname", &s.hostname}, {"cwd", &s.cwd}})
    if (auto st = readString(j, field, *out); !st) return st;

  if (s.root != "host" && !isAbsoluteClean(s.root)) return fieldError("root", "must be 'host' or an absolute directory path");
  if (!s.workspace.empty() && !isAbsoluteClean(s.workspace)) return fieldError("workspace", "must be an absolute path without '..'");
  if (!s.cwd.empty() && !isAbsoluteClean(s.cwd)) return fieldError("cwd", "must be an absolute path inside the sandbox");
  if (!s.cpus.empty() && s.cpus.find_first_not_of("0123456789,-") != std::string::npos)
    return fieldError("cpus", "expected a CPU list such as 0-3,6, got '" + s.cpus + "'");
  if (s.hostname.empty() || s.hostname.size() > 64) return fieldError("hostname", "must be 1 to 64 characters");
  if (s.cgroupParent.empty() || s.cgroupParent[0] == '/' || s.cgroupParent.find("..") != std::string::npos ||
      s.cgroupParent.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./@") != std::string::npos)
    return fieldError("cgroup_parent", "must be a relative cgroup path of [A-Za-z0-9-_./@] without '..', got '" + s.cgroupParent + "'");
  return {};
}

Status parseMounts(const json& j, SandboxSpec& s) {
  if (j.contains("binds")) {
    if (!j["binds"].is_array()) return fieldError("binds", "expected a list");
    for (const auto& e : j["binds"]) {
      auto b = parseBind(e);
      if (!b) return b.error();
      s.binds.push_back(*b);
    }
  }
  if (j.contains("tmpfs")) {
    if (!j["tmpfs"].is_array()) return fieldError("tmpfs", "expected a list");
    for (const auto& e : j["tmpfs"]) {
      auto t = parseTmpfs(e);
      if (!t) return t.error();
      s.tmpfs.push_back(*t);
    }
  }
  return {};
}

Status parseDevices(const json& j, SandboxSpec& s) {
  if (j.contains("devices")) {
    if (!j["devices"].is_array()) return fieldError("devices", "expected a list of device paths");
    for (const auto& e : j["devices"]) {
      auto d = asString(e, "devices");
      if (!d) return d.error();
      if (!isAbsoluteClean(*d)) return fieldError("devices", "device path must be absolute: '" + *d + "'");
      s.devices.push_back(*d);
    }
  }
  if (j.contains("gpus")) {
    if (!j["gpus"].is_array()) return fieldError("gpus", "expected a list of GPU ids (akactl gpus lists them)");
    for (const auto& e : j["gpus"]) {
      auto g = asString(e, "gpus");
      if (!g) return g.error();
      bool ok = !g->empty() && g->size() <= 32;
      for (char c : *g) ok = ok && ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'));
      if (!ok) return fieldError("gpus", "'" + *g + "' is not a GPU id such as nvidia0 or amd1");
      s.gpus.push_back(*g);
    }
  }
  return {};
}

Status parseEnv(const json& j, SandboxSpec& s) {
  if (!j.contains("env")) return {};
  if (!j["env"].is_object()) return fieldError("env", "expected an object of KEY: VALUE strings or a list of \"KEY=VALUE\"");
  for (auto e = j["env"].begin(); e != j["env"].end(); ++e) {
    if (!e->is_string()) return fieldError("env", "value of '" + e.key() + "' must be a string");
    if (e.key().empty() || e.key().find('=') != std::string::npos || e.key().find('\0') != std::string::npos)
      return fieldError("env", "invalid variable name '" + e.key() + "'");
    s.env[e.key()] = e->get<std::string>();
  }
  return {};
}

// `field`, if given, read with `parse` into `out`.
template <typename T, typename Parse, typename Out>
Status readOptional(const json& j, const char* field, Parse parse, Out& out) {
  if (!j.contains(field)) return {};
  Result<T> r = parse(j[field], field);
  if (!r) return r.error();
  out = *r;
  return {};
}

Status parseLimits(const json& j, SandboxSpec& s) {
  if (auto st = readOptional<uint64_t>(j, "memory", asCount, s.memoryBytes); !st) return st;
  if (auto st = readOptional<uint64_t>(j, "pids", asCount, s.pids); !st) return st;
  if (auto st = readOptional<uint64_t>(j, "output_limit", asCount, s.outputLimitBytes); !st) return st;
  if (auto st = readOptional<double>(j, "cpu_time", asSeconds, s.cpuTimeS); !st) return st;
  if (auto st = readOptional<double>(j, "wall_time", asSeconds, s.wallTimeS); !st) return st;
  if (s.memoryBytes != 0 && s.memoryBytes < (1u << 20)) return fieldError("memory", "must be at least 1M");
  return {};
}

Status parseIds(const json& j, SandboxSpec& s) {
  if (auto st = readOptional<uint32_t>(j, "uid", asId, s.uid); !st) return st;
  if (auto st = readOptional<uint32_t>(j, "gid", asId, s.gid); !st) return st;
  if (auto st = readOptional<uint32_t>(j, "outside_uid", asId, s.outsideUid); !st) return st;
  if (auto st = readOptional<uint32_t>(j, "outside_gid", asId, s.outsideGid); !st) return st;
  if (j.contains("result_fd")) {
    auto r = asId(j["result_fd"], "result_fd");
    if (!r || *r > 65535) return fieldError("result_fd", "expected a file descriptor number");
    s.resultFd = static_cast<int>(*r);
  }
  return {};
}

Status readFlag(const json& j, const char* field, bool& out) {
  if (!j.contains(field)) return {};
  if (!j[field].is_boolean()) return fieldError(field, "must be true or false");
  out = j[field].get<bool>();
  return {};
}

// The choices: network, cgroup back-end, who is pid 1, and the mount template.
Status parseModes(const json& j, SandboxSpec& s) {
  if (j.contains("net")) {
    auto r = asString(j["net"], "net");
    if (!r) return r.error();
    if (*r == "none") s.net = NetMode::None;
    else if (*r == "host") s.net = NetMode::Host;
    else return fieldError("net", "must be 'none' or 'host', got '" + *r + "'");
  }
  if (j.contains("cgroup_backend")) {
    auto r = asString(j["cgroup_backend"], "cgroup_backend");
    if (!r) return r.error();
    if (*r == "auto") s.cgroupBackend = CgroupBackendChoice::Auto;
    else if (*r == "v1") s.cgroupBackend = CgroupBackendChoice::V1;
    else if (*r == "v2") s.cgroupBackend = CgroupBackendChoice::V2;
    else return fieldError("cgroup_backend", "must be auto, v1 or v2, got '" + *r + "'");
  }
  if (auto st = readFlag(j, "command_is_pid1", s.commandIsPid1); !st) return st;
  return readFlag(j, "mount_template", s.mountTemplate);
}

Status parseCommand(const json& j, SandboxSpec& s) {
  if (j.contains("command")) {
    if (!j["command"].is_array()) return fieldError("command", "expected a list of strings");
    for (const auto& e : j["command"]) {
      auto a = asString(e, "command");
      if (!a) return a.error();
      s.command.push_back(*a);
    }
  }
  if (s.command.empty()) return fieldError("command", "no command given (akabox run [options] -- COMMAND [ARG...])");
  return {};
}

}  // namespace

// Field by field in a fixed order, so that of several mistakes the same one is reported first.
Result<SandboxSpec> parseSpec(const json& file, const json& flags) {
  const json j = mergeFlags(file, flags);
  if (auto st = checkKnownFields(j); !st) return st.error();
  SandboxSpec s;
  for (Status (*step)(const json&, SandboxSpec&) :
       {parseStrings, parseMounts, parseDevices, parseEnv, parseLimits, parseIds, parseModes, parseCommand})
    if (auto st = step(j, s); !st) return st.error();
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
