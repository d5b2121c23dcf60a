#include "sandbox/seccomp.h"

#include <errno.h>
#include <sys/ioctl.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <vector>

#include "common/paths.h"

namespace akad::box {
namespace {

using nlohmann::json;

constexpr size_t kMaxPolicyBytes = 4 << 20;

struct Action {
  uint32_t value = SCMP_ACT_KILL_PROCESS;
  bool isErrno = false;
  int err = 0;
};

Result<Action> parseAction(const json& entry, const char* actionKey, const char* errnoKey, int defaultErrno,
                           const std::string& where) {
  if (!entry.contains(actionKey) || !entry[actionKey].is_string())
    return Error{where + ": '" + actionKey + "' must be a string such as \"SCMP_ACT_ALLOW\""};
  const std::string a = entry[actionKey].get<std::string>();
  Action act;
  if (a == "SCMP_ACT_ALLOW") act.value = SCMP_ACT_ALLOW;
  else if (a == "SCMP_ACT_KILL" || a == "SCMP_ACT_KILL_THREAD") act.value = SCMP_ACT_KILL_THREAD;
  else if (a == "SCMP_ACT_KILL_PROCESS") act.value = SCMP_ACT_KILL_PROCESS;
  else if (a == "SCMP_ACT_TRAP") act.value = SCMP_ACT_TRAP;
  else if (a == "SCMP_ACT_LOG") act.value = SCMP_ACT_LOG;
  else if (a == "SCMP_ACT_ERRNO") {
    int e = defaultErrno;
    if (entry.contains(errnoKey)) {
      if (!entry[errnoKey].is_number_unsigned() || entry[errnoKey].get<uint64_t>() > 4095)
        return Error{where + ": '" + errnoKey + "' must be an errno number (0-4095)"};
      e = entry[errnoKey].get<int>();
    }
    act.value = SCMP_ACT_ERRNO(e);
    act.isErrno = true;
    act.err = e;
  } else if (a == "SCMP_ACT_TRACE" || a == "SCMP_ACT_NOTIFY") {
    return Error{where + ": action " + a + " is not supported (akabox is not a tracer and owns the notifier)"};
  } else {
    return Error{where + ": unknown action '" + a + "'"};
  }
  return act;
}

Result<scmp_compare> parseOp(const std::string& op, const std::string& where) {
  static const std::map<std::string, scmp_compare> ops = {
      {"SCMP_CMP_NE", SCMP_CMP_NE}, {"SCMP_CMP_LT", SCMP_CMP_LT}, {"SCMP_CMP_LE", SCMP_CMP_LE},
      {"SCMP_CMP_EQ", SCMP_CMP_EQ}, {"SCMP_CMP_GE", SCMP_CMP_GE}, {"SCMP_CMP_GT", SCMP_CMP_GT},
      {"SCMP_CMP_MASKED_EQ", SCMP_CMP_MASKED_EQ}};
  auto it = ops.find(op);
  if (it == ops.end()) return Error{where + ": unknown argument operator '" + op + "'"};
  return it->second;
}

// Compat architectures that can run on the native one; a listed architecture that cannot
// (aarch64 in an x86-64 policy) is irrelevant here and ignored.
bool isCompatArch(uint32_t native, uint32_t arch) {
  if (native == SCMP_ARCH_X86_64) return arch == SCMP_ARCH_X86 || arch == SCMP_ARCH_X32;
  if (native == SCMP_ARCH_AARCH64) return arch == SCMP_ARCH_ARM;
  return false;
}

}  // namespace

SeccompPolicy::~SeccompPolicy() {
  if (ctx_) seccomp_release(ctx_);
}

int SeccompPolicy::errnoFor(int) const { return defaultErrno_; }

int SeccompPolicy::install(int* notifyFd) {
  *notifyFd = -1;
  int rc = seccomp_load(ctx_);
  if (rc < 0) return -rc;
  if (notify_) *notifyFd = seccomp_notify_fd(ctx_);
  return 0;
}

Result<std::unique_ptr<SeccompPolicy>> SeccompPolicy::compile(const json& policy, const std::string& source) {
  if (!policy.is_object()) return Error{"seccomp policy " + source + ": expected a JSON object"};
  std::unique_ptr<SeccompPolicy> p(new SeccompPolicy());
  p->source_ = source;

  int defaultErrno = EPERM;
  if (policy.contains("defaultErrnoRet")) {
    if (!policy["defaultErrnoRet"].is_number_unsigned()) return Error{"seccomp policy " + source + ": 'defaultErrnoRet' must be an errno number"};
    defaultErrno = policy["defaultErrnoRet"].get<int>();
  }
  auto def = parseAction(policy, "defaultAction", "defaultErrnoRet", defaultErrno, "seccomp policy " + source);
  if (!def) return def.error();
  p->defaultErrno_ = def->isErrno ? def->err : EPERM;

  // First pass: gather rules, so we know whether the notifier can be used before building.
  struct Rule {
    std::string name;
    int nr;
    Action act;
    std::vector<scmp_arg_cmp> args;
  };
  std::vector<Rule> rules;
  std::set<std::string> unconditionalAllow;
  if (policy.contains("syscalls")) {
    if (!policy["syscalls"].is_array()) return Error{"seccomp policy " + source + ": 'syscalls' must be a list"};
    size_t i = 0;
    for (const auto& entry : policy["syscalls"]) {
      std::string where = "seccomp policy " + source + ", syscalls[" + std::to_string(i++) + "]";
      if (!entry.is_object()) return Error{where + ": expected an object"};
      std::vector<std::string> names;
      if (entry.contains("names")) {
        if (!entry["names"].is_array()) return Error{where + ": 'names' must be a list of syscall names"};
        for (const auto& n : entry["names"]) {
          if (!n.is_string()) return Error{where + ": syscall names must be strings"};
          names.push_back(n.get<std::string>());
        }
      } else if (entry.contains("name") && entry["name"].is_string()) {
        names.push_back(entry["name"].get<std::string>());
      } else {
        return Error{where + ": needs 'names'"};
      }
      auto act = parseAction(entry, "action", "errnoRet", EPERM, where);
      if (!act) return act.error();
      std::vector<scmp_arg_cmp> args;
      if (entry.contains("args") && !entry["args"].is_null()) {
        if (!entry["args"].is_array()) return Error{where + ": 'args' must be a list"};
        for (const auto& a : entry["args"]) {
          if (!a.is_object() || !a.contains("index") || !a["index"].is_number_unsigned() || a["index"].get<unsigned>() > 5 ||
              !a.contains("op") || !a["op"].is_string() || !a.contains("value") || !a["value"].is_number_unsigned())
            return Error{where + ": each argument needs index (0-5), op and an unsigned value"};
          auto op = parseOp(a["op"].get<std::string>(), where);
          if (!op) return op.error();
          uint64_t v2 = a.contains("valueTwo") && a["valueTwo"].is_number_unsigned() ? a["valueTwo"].get<uint64_t>() : 0;
          args.push_back(scmp_arg_cmp{a["index"].get<unsigned>(), *op, a["value"].get<uint64_t>(), v2});
        }
      }
      for (const auto& name : names) {
        int nr = seccomp_syscall_resolve_name(name.c_str());
        if (nr == __NR_SCMP_ERROR) continue;  // not a syscall on this architecture (as Docker does)
        if (act->value == SCMP_ACT_ALLOW && args.empty()) unconditionalAllow.insert(name);
        rules.push_back(Rule{name, nr, *act, args});
      }
    }
  }
  // Only the default action is reported: explicit errno rules (clone3 -> ENOSYS so that libc
  // falls back to clone) are expected answers, not violations. The listener fd is handed to
  // akabox with sendmsg after the filter is loaded, so sendmsg and execve must be allowed.
  p->notify_ = def->isErrno && unconditionalAllow.count("sendmsg") && unconditionalAllow.count("execve");
  const uint32_t defaultAction = p->notify_ ? SCMP_ACT_NOTIFY : def->value;
  p->ctx_ = seccomp_init(defaultAction);
  if (!p->ctx_) return Error{"seccomp policy " + source + ": seccomp_init failed"};
  // Syscalls of an architecture the policy does not list (e.g. int 0x80 on x86-64) kill.
  seccomp_attr_set(p->ctx_, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS);
  seccomp_attr_set(p->ctx_, SCMP_FLTATR_CTL_NNP, 1);
  // Binary-tree dispatch: a long allow-list costs O(log n) per syscall instead of O(n).
  seccomp_attr_set(p->ctx_, SCMP_FLTATR_CTL_OPTIMIZE, 2);
  if (policy.contains("architectures") && policy["architectures"].is_array()) {
    const uint32_t native = seccomp_arch_native();
    for (const auto& a : policy["architectures"]) {
      if (!a.is_string()) return Error{"seccomp policy " + source + ": architectures must be strings"};
      std::string name = a.get<std::string>();
      std::string lower = name.rfind("SCMP_ARCH_", 0) == 0 ? name.substr(10) : name;
      for (auto& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      uint32_t arch = seccomp_arch_resolve_name(lower.c_str());
      if (arch == 0) return Error{"seccomp policy " + source + ": unknown architecture '" + name + "'"};
      if (isCompatArch(native, arch)) {
        int rc = seccomp_arch_add(p->ctx_, arch);
        if (rc < 0 && rc != -EEXIST) return Error{"seccomp policy " + source + ": cannot add architecture " + name};
      }
    }
  }
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
      int rc = seccomp_rule_add_array(p->ctx_, action, r.nr, static_cast<unsigned>(set.size()), set.empty() ? nullptr : set.data());
      if (rc < 0 && rc != -EEXIST)
        return Error{"seccomp policy " + source + ": cannot add the rule for '" + r.name + "': " + std::strerror(-rc)};
    }
  }
  return p;
}

Result<std::unique_ptr<SeccompPolicy>> loadSeccompPolicy(const std::string& nameOrPath) {
  if (nameOrPath == "none") return std::unique_ptr<SeccompPolicy>();
  std::string path = nameOrPath == "default" ? (dataRoot() / "policies" / "default.json").string() : nameOrPath;
  std::ifstream in(path, std::ios::binary);
  if (!in) return errnoError("cannot open seccomp policy '" + path + "'");
  std::string text(kMaxPolicyBytes + 1, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<size_t>(in.gcount()));
  if (text.size() > kMaxPolicyBytes) return Error{"seccomp policy '" + path + "' is larger than 4 MiB"};
  try {
    return SeccompPolicy::compile(json::parse(text), "'" + path + "'");
  } catch (const json::parse_error& e) {
    return Error{"seccomp policy '" + path + "' is not valid JSON: " + e.what()};
  }
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
