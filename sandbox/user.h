#pragma once
// The sandbox's user namespace. The command drops to its unprivileged outside ids first and
// then creates the user namespace itself, mapping only "uid inside -> uid outside". So the
// namespace owns no other namespace (mount, pid, net stay owned by the host's, set up by the
// real-root init), its capabilities there open nothing, and uid 0 inside is unmapped.

#include <sys/types.h>

#include "common/result.h"

namespace akad::box {

// Clears supplementary groups, switches to (outUid, outGid), unshares a user namespace and
// writes setgroups=deny and the one-line uid/gid maps through /proc/self.
Status enterUserNamespace(uid_t inUid, gid_t inGid, uid_t outUid, gid_t outGid);

}  // namespace akad::box
