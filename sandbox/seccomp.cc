#include "sandbox/seccomp.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/seccomp.h>
#include <seccomp.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "akad/version.h"
#include "common/config_check.h"
#include "common/data_root.h"
#include "common/unique_fd.h"
#include "sandbox/cache_dir.h"
#include "sandbox/files.h"
#include "sandbox/text.h"

namespace akad::box {
namespace {

using nlohmann::json;

constexpr size_t kMaxPolicyBytes = 4 << 20;

struct Action {
  uint32_t value = SCMP_ACT_KILL_PROCESS;
  bool isErrno = false;
  int err = 0;
};

// `actionKey` of `entry` (its errno in `errnoKey` if given and present, else `defaultErrno`); a
// problem is recorded in `check` and leaves the default kill action.
Action readAction(ConfigCheck& check, const json& entry, const std::string& path, const char* actionKey, const char* errnoKey,
                  int defaultErrno) {
  Action act;
  if (!entry.contains(actionKey) || !entry[actionKey].is_string()) {
    check.fail(keyPath(path, actionKey), "must be a string such as \"SCMP_ACT_ALLOW\"");
    return act;
  }
  const std::string a = entry[actionKey].get<std::string>();
  if (a == "SCMP_ACT_ALLOW") act.value = SCMP_ACT_ALLOW;
  else if (a == "SCMP_ACT_KILL" || a == "SCMP_ACT_KILL_THREAD") act.value = SCMP_ACT_KILL_THREAD;
  else if (a == "SCMP_ACT_KILL_PROCESS") act.value = SCMP_ACT_KILL_PROCESS;
  else if (a == "SCMP_ACT_TRAP") act.value = SCMP_ACT_TRAP;
  else if (a == "SCMP_ACT_LOG") act.value = SCMP_ACT_LOG;
  else if (a == "SCMP_ACT_ERRNO") {
    int e = defaultErrno;
    if (errnoKey) check.readNumber(entry, path, errnoKey, e, 0, 4095);
    act.value = SCMP_ACT_ERRNO(e);
    act.isErrno = true;
    act.err = e;
  } else if (a == "SCMP_ACT_TRACE" || a == "SCMP_ACT_NOTIFY") {
    check.fail(keyPath(path, actionKey), "is " + a + ", which is not supported (akabox is not a tracer and owns the notifier)");
  } else {
    check.fail(keyPath(path, actionKey), "is an unknown action '" + a + "'");
  }
  return act;
}

bool readOp(ConfigCheck& check, const json& v, const std::string& path, scmp_compare& out) {
  static const std::map<std::string, scmp_compare> ops = {
      {"SCMP_CMP_NE", SCMP_CMP_NE}, {"SCMP_CMP_LT", SCMP_CMP_LT}, {"SCMP_CMP_LE", SCMP_CMP_LE},
      {"SCMP_CMP_EQ", SCMP_CMP_EQ}, {"SCMP_CMP_GE", SCMP_CMP_GE}, {"SCMP_CMP_GT", SCMP_CMP_GT},
      {"SCMP_CMP_MASKED_EQ", SCMP_CMP_MASKED_EQ}};
  std::string op;
  if (!check.string(v, path, op)) return false;
  auto it = ops.find(op);
  if (it == ops.end()) {
    check.fail(path, "is an unknown argument operator '" + op + "'");
    return false;
  }
  out = it->second;
  return true;
}

// Compat architectures that can run on the native one; a listed architecture that cannot
// (aarch64 in an x86-64 policy) is irrelevant here and ignored.
bool isCompatArch(uint32_t native, uint32_t arch) {
  if (native == SCMP_ARCH_X86_64) return arch == SCMP_ARCH_X86 || arch == SCMP_ARCH_X32;
  if (native == SCMP_ARCH_AARCH64) return arch == SCMP_ARCH_ARM;
  return false;
}

}  // namespace

int SeccompPolicy::errnoFor(int) const { return defaultErrno_; }

int SeccompPolicy::install(int* notifyFd) const {
  *notifyFd = -1;
  sock_fprog prog{static_cast<unsigned short>(program_.size()), const_cast<sock_filter*>(program_.data())};
  unsigned flags = notify_ ? SECCOMP_FILTER_FLAG_NEW_LISTENER : 0;
  long rc = ::syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, flags, &prog);
  if (rc < 0) return errno;
  if (notify_) *notifyFd = static_cast<int>(rc);
  return 0;
}

std::string SeccompPolicy::serialize() const {
  std::string out = "akabox-seccomp-3 " + std::to_string(notify_ ? 1 : 0) + " " + std::to_string(defaultErrno_) + " " +
                    std::to_string(program_.size()) + "\n";
  out.append(reinterpret_cast<const char*>(program_.data()), program_.size() * sizeof(sock_filter));
  return out;
}

// Read by the sandbox's init on every spawn (and by akabox from its cache): the header's
// words as string views (text.h), neither a stream nor scanf.
std::unique_ptr<SeccompPolicy> SeccompPolicy::deserialize(std::string_view bytes, const std::string& source) {
  auto nl = bytes.find('\n');
  if (nl == std::string_view::npos || nl > 64) return nullptr;
  const auto head = text::words(bytes.substr(0, nl));
  if (head.size() != 4 || head[0] != "akabox-seccomp-3") return nullptr;
  const auto notify = text::number(head[1]), err = text::number(head[2]), count = text::number(head[3]);
  if (!notify || !err || !count || *notify > 1 || *err > 4095) return nullptr;
  if (*count == 0 || *count > BPF_MAXINSNS || bytes.size() - nl - 1 != *count * sizeof(sock_filter)) return nullptr;
  std::unique_ptr<SeccompPolicy> p(new SeccompPolicy());
  p->notify_ = *notify != 0;
  p->defaultErrno_ = static_cast<int>(*err);
  p->source_ = source;
  p->program_.resize(*count);
  std::memcpy(p->program_.data(), bytes.data() + nl + 1, *count * sizeof(sock_filter));
  return p;
}

namespace {

// One syscall rule of the policy, resolved for this architecture.
struct Rule {
  std::string name;
  int nr;
  Action act;
  std::vector<scmp_arg_cmp> args;
};

struct ParsedRules {
  std::vector<Rule> rules;
  std::set<std::string> unconditionalAllow;  // allowed with no argument condition
};

// The default action (and its errno, defaultErrnoRet, EPERM if not given).
Action readDefaultAction(ConfigCheck& check, const json& policy) {
  int defaultErrno = EPERM;
  check.readNumber(policy, "", "defaultErrnoRet", defaultErrno, 0, 4095);
  return readAction(check, policy, "", "defaultAction", nullptr, defaultErrno);
}

// A rule's names: `names` (a list), or the older single `name`.
std::vector<std::string> readRuleNames(ConfigCheck& check, const json& entry, const std::string& path) {
  std::vector<std::string> names;
  if (entry.contains("names")) check.strings(entry["names"], keyPath(path, "names"), names);
  else if (entry.contains("name")) check.strings(entry["name"], keyPath(path, "name"), names, /*loneString=*/true);
  else check.fail(path, "needs 'names'");
  return names;
}

// A rule's argument conditions (`args`), none if absent or null.
std::vector<scmp_arg_cmp> readRuleArgs(ConfigCheck& check, const json& entry, const std::string& path) {
  std::vector<scmp_arg_cmp> args;
  if (!entry.contains("args") || entry["args"].is_null()) return args;
  if (!entry["args"].is_array()) {
    check.fail(keyPath(path, "args"), "must be a list");
    return args;
  }
  for (std::size_t i = 0; i < entry["args"].size(); ++i) {
    const json& a = entry["args"][i];
    const std::string at = indexPath(keyPath(path, "args"), i);
    if (!check.map(a, at, "index, value, valueTwo and op")) continue;
    check.onlyKeys(a, at, {"index", "value", "valueTwo", "op"});
    scmp_arg_cmp cmp{0, SCMP_CMP_EQ, 0, 0};
    bool good = true;
    for (auto [key, need] : {std::pair{"index", ConfigCheck::Required}, {"value", ConfigCheck::Required}, {"op", ConfigCheck::Required}})
      good = check.member(a, at, key, need, "index (0-5), op and an unsigned value are needed") != nullptr && good;
    if (!good) continue;
    good = check.number(a["index"], keyPath(at, "index"), cmp.arg, 0u, 5u) && good;
    good = check.number(a["value"], keyPath(at, "value"), cmp.datum_a, uint64_t{0}, UINT64_MAX) && good;
    good = check.readNumber(a, at, "valueTwo", cmp.datum_b, uint64_t{0}, UINT64_MAX) && good;
    good = readOp(check, a["op"], keyPath(at, "op"), cmp.op) && good;
    if (good) args.push_back(cmp);
  }
  return args;
}

// Every rule of `syscalls`, gathered before the filter is built, so that whether the notifier
// can be used is known first. Names that are not syscalls on this architecture are skipped
// (as Docker does).
ParsedRules readRules(ConfigCheck& check, const json& policy) {
  ParsedRules out;
  if (!policy.contains("syscalls")) return out;
  if (!policy["syscalls"].is_array()) {
    check.fail("syscalls", "must be a list");
    return out;
  }
  for (std::size_t i = 0; i < policy["syscalls"].size(); ++i) {
    const json& entry = policy["syscalls"][i];
    const std::string path = indexPath("syscalls", i);
    if (!check.map(entry, path, "names, action, errnoRet and args")) continue;
    // comment, includes and excludes (Docker's conditions on capabilities and kernels) are
    // read by no one here: every rule applies.
    check.onlyKeys(entry, path, {"names", "name", "action", "errnoRet", "args", "comment", "includes", "excludes"});
    const auto names = readRuleNames(check, entry, path);
    const Action act = readAction(check, entry, path, "action", "errnoRet", EPERM);
    const auto args = readRuleArgs(check, entry, path);
    for (const auto& name : names) {
      int nr = seccomp_syscall_resolve_name(name.c_str());
      if (nr == __NR_SCMP_ERROR) continue;
      if (act.value == SCMP_ACT_ALLOW && args.empty()) out.unconditionalAllow.insert(name);
      out.rules.push_back(Rule{name, nr, act, args});
    }
  }
  return out;
}

// The architectures the policy lists that this kernel runs beside the native one (syscalls
// of any other kill, SCMP_FLTATR_ACT_BADARCH).
std::vector<uint32_t> readArchitectures(ConfigCheck& check, const json& policy) {
  std::vector<uint32_t> compat;
  std::vector<std::string> names;
  if (!policy.contains("architectures") || !check.strings(policy["architectures"], "architectures", names)) return compat;
  const uint32_t native = seccomp_arch_native();
  for (std::size_t i = 0; i < names.size(); ++i) {
    const std::string& name = names[i];
    std::string lower = name.rfind("SCMP_ARCH_", 0) == 0 ? name.substr(10) : name;
    for (auto& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    uint32_t arch = seccomp_arch_resolve_name(lower.c_str());
    if (arch == 0) check.fail(indexPath("architectures", i), "is an unknown architecture '" + name + "'");
    else if (isCompatArch(native, arch)) compat.push_back(arch);
  }
  return compat;
}

Status addArchitectures(scmp_filter_ctx ctx, const std::vector<uint32_t>& arches, const std::string& source) {
  for (uint32_t arch : arches) {
    int rc = seccomp_arch_add(ctx, arch);
    if (rc < 0 && rc != -EEXIST) return Error{"seccomp policy " + source + ": cannot add architecture " + std::to_string(arch)};
  }
  return {};
}

Status addRules(scmp_filter_ctx ctx, const std::vector<Rule>& rules, uint32_t defaultAction, const std::string& source) {
  for (const auto& r : rules) {
    const uint32_t action = r.act.value;
    if (action == defaultAction) continue;  // libseccomp refuses rules that repeat the default
    // Several conditions on the same argument cannot be ANDed by libseccomp; like runc, add
    // one rule per condition (OR) in that case.
    bool repeatedIndex = false;
    for (size_t a = 0; a < r.args.size(); ++a)
      for (size_t b = a + 1; b < r.args.size(); ++b)
        if (r.args[a].arg == r.args[b].arg) repeatedIndex = true;
    std::vector<std::vector<scmp_arg_cmp>> sets;
    if (repeatedIndex) {
      for (const auto& a : r.args) sets.push_back({a});
    } else {
      sets.push_back(r.args);
    }
    for (const auto& set : sets) {
      int rc = seccomp_rule_add_array(ctx, action, r.nr, static_cast<unsigned>(set.size()), set.empty() ? nullptr : set.data());
      if (rc < 0 && rc != -EEXIST)
        return Error{"seccomp policy " + source + ": cannot add the rule for '" + r.name + "': " + std::strerror(-rc)};
    }
  }
  return {};
}

// The generated program, exported through a memfd; the sandbox loads it with seccomp(2)
// directly.
Status exportProgram(scmp_filter_ctx ctx, const std::string& source, std::vector<sock_filter>& program) {
  UniqueFd mem(static_cast<int>(::syscall(SYS_memfd_create, "akabox-seccomp", MFD_CLOEXEC)));
  if (!mem.valid()) return errnoError("memfd_create for the seccomp program");
  if (int rc = seccomp_export_bpf(ctx, mem.get()); rc < 0)
    return Error{"seccomp policy " + source + ": cannot generate the filter: " + std::strerror(-rc)};
  off_t size = ::lseek(mem.get(), 0, SEEK_END);
  if (size <= 0 || size % static_cast<off_t>(sizeof(sock_filter)) != 0) return Error{"seccomp policy " + source + ": bad generated filter"};
  program.resize(static_cast<size_t>(size) / sizeof(sock_filter));
  if (::pread(mem.get(), program.data(), static_cast<size_t>(size), 0) != size) return errnoError("reading the seccomp program back");
  if (program.size() > BPF_MAXINSNS) return Error{"seccomp policy " + source + ": the filter is too long (" + std::to_string(program.size()) + " instructions)"};
  return {};
}

struct FilterContext {
  scmp_filter_ctx ctx;
  ~FilterContext() { if (ctx) seccomp_release(ctx); }
};

}  // namespace

Result<std::unique_ptr<SeccompPolicy>> SeccompPolicy::compile(const json& policy, const std::string& source) {
  ConfigCheck check("seccomp policy " + source);
  if (!check.map(policy, "")) return check.error();
  // archMap (Docker's) is read by no one here: the architectures are the native one and those
  // listed in `architectures`.
  check.onlyKeys(policy, "", {"comment", "defaultAction", "defaultErrnoRet", "architectures", "archMap", "syscalls"});
  const Action def = readDefaultAction(check, policy);
  const ParsedRules rules = readRules(check, policy);
  const std::vector<uint32_t> compatArches = readArchitectures(check, policy);
  if (!check.ok()) return check.error();
  std::unique_ptr<SeccompPolicy> p(new SeccompPolicy());
  p->source_ = source;
  p->defaultErrno_ = def.isErrno ? def.err : EPERM;

  // Only the default action is reported: explicit errno rules (clone3 -> ENOSYS so that libc
  // falls back to clone) are expected answers, not violations. The listener fd is handed to
  // akabox with sendmsg after the filter is loaded, so sendmsg and execve must be allowed.
  const std::set<std::string>& allow = rules.unconditionalAllow;
  p->notify_ = def.isErrno && allow.count("sendmsg") && allow.count("execve");

  const uint32_t defaultAction = p->notify_ ? SCMP_ACT_NOTIFY : def.value;
  FilterContext owner{seccomp_init(defaultAction)};
  scmp_filter_ctx ctx = owner.ctx;
  if (!ctx) return Error{"seccomp policy " + source + ": seccomp_init failed"};
  // Syscalls of an architecture the policy does not list (e.g. int 0x80 on x86-64) kill.
  seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS);
  seccomp_attr_set(ctx, SCMP_FLTATR_CTL_NNP, 1);
  // Binary-tree dispatch: a long allow-list costs O(log n) per syscall instead of O(n).
  seccomp_attr_set(ctx, SCMP_FLTATR_CTL_OPTIMIZE, 2);
  if (auto st = addArchitectures(ctx, compatArches, source); !st) return st.error();
  if (auto st = addRules(ctx, rules.rules, defaultAction, source); !st) return st.error();
  if (auto st = exportProgram(ctx, source, p->program_); !st) return st.error();
  return p;
}

namespace {

std::string cacheDir() {
  const char* d = std::getenv("AKABOX_CACHE_DIR");
  return (d && *d) ? d : "/run/akabox/seccomp";
}

std::string readSmall(const std::string& path, size_t limit) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
  if (!fd.valid()) return {};
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0 || st.st_uid != 0 || (st.st_mode & 022) || static_cast<size_t>(st.st_size) > limit) return {};
  std::string out(static_cast<size_t>(st.st_size), '\0');
  if (::read(fd.get(), out.data(), out.size()) != static_cast<ssize_t>(out.size())) return {};
  return out;
}

void writeCache(const std::string& dir, const std::string& key, const std::string& bytes) {
  if (!trustedCacheDir(dir, true)) return;
  std::string tmp = dir + "/." + key + "." + std::to_string(::getpid());
  UniqueFd fd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600));
  if (!fd.valid()) return;
  bool ok = ::write(fd.get(), bytes.data(), bytes.size()) == static_cast<ssize_t>(bytes.size());
  fd.reset();
  if (!ok || ::rename(tmp.c_str(), (dir + "/" + key).c_str()) != 0) ::unlink(tmp.c_str());
}

}  // namespace

Result<std::unique_ptr<SeccompPolicy>> loadSeccompPolicy(const std::string& nameOrPath) {
  if (nameOrPath == "none") return std::unique_ptr<SeccompPolicy>();
  const std::string root = akad::dataRoot().string();
  std::string path = nameOrPath == "default" ? root + "/policies/default.json" : nameOrPath;
  auto read = readWholeFile(path, kMaxPolicyBytes, "seccomp policy");
  if (!read) return read.error();
  const std::string& text = *read;

  const std::string source = "'" + path + "'";
  // The key covers everything the program depends on: the policy's bytes, libseccomp's
  // version (it generates the code) and the architecture.
  // The cache file also holds these exact bytes and is used only if they match, so the
  // (fast, non-cryptographic) key only has to spread entries, not resist collisions.
  const scmp_version* v = seccomp_version();
  const std::string identity = text + "|libseccomp " + std::to_string(v->major) + "." + std::to_string(v->minor) + "." +
                               std::to_string(v->micro) + "|arch " + std::to_string(seccomp_arch_native()) + "|format 3";
  const std::string key = fnv1aHex(identity) + ".bpf";
  const std::string dir = cacheDir();
  if (::geteuid() == 0 && trustedCacheDir(dir, false)) {
    std::string bytes = readSmall(dir + "/" + key, 8 << 20);
    if (bytes.size() > identity.size() + 1 && bytes.compare(0, identity.size(), identity) == 0 && bytes[identity.size()] == '\0')
      if (auto cached = SeccompPolicy::deserialize(std::string_view(bytes).substr(identity.size() + 1), source)) return cached;
  }
  json parsed;
  try {
    parsed = json::parse(text);
  } catch (const json::parse_error& e) {
    return Error{"seccomp policy '" + path + "' is not valid JSON: " + e.what()};
  }
  auto compiled = SeccompPolicy::compile(parsed, source);
  if (!compiled) return compiled.error();
  if (::geteuid() == 0) writeCache(dir, key, identity + '\0' + (*compiled)->serialize());
  return compiled;
}

bool SeccompViolations::handle(int fd, const SeccompPolicy& policy) {
  struct seccomp_notif* req = nullptr;
  struct seccomp_notif_resp* resp = nullptr;
  if (seccomp_notify_alloc(&req, &resp) != 0) return false;
  bool alive = true;
  int rc = seccomp_notify_receive(fd, req);
  if (rc == 0) {
    ++count_;
    char* name = seccomp_syscall_resolve_num_arch(req->data.arch, req->data.nr);
    names_.insert(name ? std::string(name) : "syscall " + std::to_string(req->data.nr));
    std::free(name);
    resp->id = req->id;
    resp->val = 0;
    resp->flags = 0;
    resp->error = -policy.errnoFor(req->data.nr);
    (void)seccomp_notify_respond(fd, resp);  // ENOENT: the caller died meanwhile
  } else if (rc != -ENOENT && rc != -EINTR) {
    alive = false;
  }
  seccomp_notify_free(req, resp);
  return alive;
}

}  // namespace akad::box
