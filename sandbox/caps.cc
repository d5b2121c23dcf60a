// Drops every capability the sandboxed process could hold in its user namespace, in every
// set, and sets no_new_privs so no exec (setuid binary, file capabilities) can add any back.

#include <linux/capability.h>
#include <linux/securebits.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "sandbox/contain.h"

namespace akad::box {

Status dropCapabilities() {
  for (int cap = 0; cap < 64; ++cap) {
    if (::prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0) {
      if (errno == EINVAL) break;  // past the kernel's last capability
      return errnoError("prctl(PR_CAPBSET_DROP, " + std::to_string(cap) + ")");
    }
  }
  if (::prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) != 0) return errnoError("prctl(PR_CAP_AMBIENT_CLEAR_ALL)");
  // With these bits a uid 0 gains no capabilities on exec and the bits cannot be undone.
  if (::prctl(PR_SET_SECUREBITS, SECBIT_NOROOT | SECBIT_NOROOT_LOCKED | SECBIT_NO_SETUID_FIXUP_LOCKED |
                                     SECBIT_KEEP_CAPS_LOCKED | SECBIT_NO_CAP_AMBIENT_RAISE | SECBIT_NO_CAP_AMBIENT_RAISE_LOCKED,
              0, 0, 0) != 0)
    return errnoError("prctl(PR_SET_SECUREBITS)");
  __user_cap_header_struct hdr{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[2] = {};
  if (::syscall(SYS_capset, &hdr, data) != 0) return errnoError("capset(all zero)");
  if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return errnoError("prctl(PR_SET_NO_NEW_PRIVS)");
  return {};
}

}  // namespace akad::box
