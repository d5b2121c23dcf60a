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

#include <linux/filter.h>

#include <map>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/result.h"

namespace akad::box {

// A compiled policy: the classic-BPF program libseccomp generated, plus what akabox needs to
// answer notifications. Compiling costs milliseconds per spawn, so compiled programs are cached
// by the policy's content hash in a root-only directory (see loadSeccompPolicy).
class SeccompPolicy {
 public:
  // True when refused calls are reported (see above). False when the default action is not
  // errno, or when the policy does not allow sendmsg and execve unconditionally (the listener
  // fd could not be handed over before exec).
  bool reportsViolations() const { return notify_; }
  const std::string& source() const { return source_; }

  size_t instructionCount() const { return program_.size(); }

  // In the sandboxed process, last step before execve: loads the filter (no_new_privs must be
  // set). On success *notifyFd is the listener (or -1). Returns 0 or an errno value.
  int install(int* notifyFd) const;

  // The errno akabox answers a notified (refused) syscall with.
  int errnoFor(int syscallNr) const;

  static Result<std::unique_ptr<SeccompPolicy>> compile(const nlohmann::json& policy, const std::string& source);

  // Cache file form: a header line and the raw program.
  std::string serialize() const;
  static std::unique_ptr<SeccompPolicy> deserialize(std::string_view bytes, const std::string& source);

 private:
  SeccompPolicy() = default;
  std::vector<sock_filter> program_;
  bool notify_ = false;
  int defaultErrno_ = 1;
  std::string source_;
};

// "default" = <data root>/policies/default.json, "none" = no filter (returns nullptr), else
// a file path. Errors name the file and what in it is wrong. Compiled programs are cached in
// $AKABOX_CACHE_DIR or /run/akabox/seccomp, only if that directory is owned by root and
// writable by nobody else (a planted program would be a sandbox bypass).
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
