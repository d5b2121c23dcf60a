#include "sandbox/user.h"

#include <fcntl.h>
#include <grp.h>
#include <sched.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <string>

namespace akad::box {
namespace {

Status writeProcSelf(const char* file, const std::string& text) {
  const std::string path = std::string("/proc/self/") + file;
  int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) return errnoError("cannot open " + path);
  ssize_t n = ::write(fd, text.data(), text.size());
  int err = errno;
  ::close(fd);
  if (n != static_cast<ssize_t>(text.size())) return errnoError("cannot write '" + text + "' to " + path, n < 0 ? err : EIO);
  return {};
}

}  // namespace

Status enterUserNamespace(uid_t inUid, gid_t inGid, uid_t outUid, gid_t outGid) {
  // The system calls themselves, not glibc's wrappers: those apply the change to every thread
  // glibc knows of, and the sandbox's processes come from a raw clone3 of akabox, whose
  // threads (ns_thread.h, init_lender.h) are on glibc's list there but are not threads of this process
  // (in a copy of akabox's memory they do not exist, in akabox's own they are akabox's); the
  // wrapper would wait for them for ever. This process has one thread, so the call is enough.
  if (::syscall(SYS_setgroups, 0, nullptr) != 0) return errnoError("setgroups(0) (clearing supplementary groups)");
  if (::syscall(SYS_setresgid, outGid, outGid, outGid) != 0) return errnoError("setresgid(" + std::to_string(outGid) + ")");
  if (::syscall(SYS_setresuid, outUid, outUid, outUid) != 0) return errnoError("setresuid(" + std::to_string(outUid) + ")");
  // Changing uid made the process non-dumpable, which makes /proc/self/*_map root-owned and
  // unwritable for us; exec recomputes dumpability anyway.
  if (::prctl(PR_SET_DUMPABLE, 1, 0, 0, 0) != 0) return errnoError("prctl(PR_SET_DUMPABLE)");
  if (::unshare(CLONE_NEWUSER) != 0) return errnoError("unshare(CLONE_NEWUSER) (are user namespaces enabled? see user.max_user_namespaces)");
  if (auto st = writeProcSelf("setgroups", "deny"); !st) return st;
  if (auto st = writeProcSelf("uid_map", std::to_string(inUid) + " " + std::to_string(outUid) + " 1\n"); !st) return st;
  if (auto st = writeProcSelf("gid_map", std::to_string(inGid) + " " + std::to_string(outGid) + " 1\n"); !st) return st;
  return {};
}

}  // namespace akad::box
