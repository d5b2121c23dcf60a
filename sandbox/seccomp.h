#pragma once
// Seccomp policies in the OCI/Docker JSON format, parsed here and compiled with libseccomp.
//
// Reporting violations: a filter cannot tell anyone which syscall it refused. When the
// policy's default action is "deny with errno", akabox compiles it as SECCOMP_RET_USER_NOTIF:
// the kernel parks the calling thread and hands the syscall (arch, number) to akabox, which
// records its name and answers with the policy's errno. The program sees exactly the policy's
// errno; akabox sees every call the default refused. Explicit errno rules (clone3 -> ENOSYS)
// are answered by the kernel and not reported; kill and trap actions cannot be reported by
// name (the process dies by SIGSYS, reported as "SIGSYS ..."). See docs/akabox.md.

#include <seccomp.h>

#include <map>
#include <memory>
#include <set>
#include <string>

#include <nlohmann/json.hpp>

#include "common/result.h"

namespace akad::box {

class SeccompPolicy {
 public:
  ~SeccompPolicy();
  SeccompPolicy(const SeccompPolicy&) = delete;
  SeccompPolicy& operator=(const SeccompPolicy&) = delete;

  // True when refused calls are reported (see above). False when the default action is not
  // errno, or when the policy does not allow sendmsg and execve unconditionally (the listener
  // fd could not be handed over before exec).
  bool reportsViolations() const { return notify_; }
  const std::string& source() const { return source_; }

  // In the sandboxed process, last step before execve: loads the filter. On success
  // *notifyFd is the listener (or -1). Returns 0 or an errno value.
  int install(int* notifyFd);

  // The errno the policy gives for this syscall when akabox answers a notification.
  int errnoFor(int syscallNr) const;

  static Result<std::unique_ptr<SeccompPolicy>> compile(const nlohmann::json& policy, const std::string& source);

 private:
  SeccompPolicy() = default;
  scmp_filter_ctx ctx_ = nullptr;
  bool notify_ = false;
  int defaultErrno_ = 1;
  std::string source_;
};

// "default" = <data root>/policies/default.json, "none" = no filter (returns nullptr), else
// a file path. Errors name the file and what in it is wrong.
Result<std::unique_ptr<SeccompPolicy>> loadSeccompPolicy(const std::string& nameOrPath);

// The supervisor side: answers notifications and remembers what was refused.
class SeccompViolations {
 public:
  // Reads one pending notification from `fd`, records it and answers it with the policy's
  // errno. Returns false when the listener is gone (no process left under the filter).
  bool handle(int fd, const SeccompPolicy& policy);
  void noteKilledBySigsys() { names_.insert("SIGSYS (killed by a kill/trap action; syscall unknown)"); }
  const std::set<std::string>& names() const { return names_; }
  uint64_t count() const { return count_; }

 private:
  std::set<std::string> names_;
  uint64_t count_ = 0;
};

}  // namespace akad::box
