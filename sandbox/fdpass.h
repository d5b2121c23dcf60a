#pragma once
// Descriptors handed over the sandbox's Unix sockets (SCM_RIGHTS): akabox to its init (the
// release message), the command to akabox (its seccomp listener). One way to attach them and
// one way to collect them.

#include <sys/socket.h>
#include <sys/uio.h>

#include <cstddef>
#include <vector>

#include "common/unique_fd.h"

namespace akad::box {

// The most descriptors one message carries: the release's template, network namespace and
// cgroup files.
constexpr size_t kMaxPassedFds = 8;

// Room for kMaxPassedFds descriptors in a received message's control data.
struct RightsBuffer {
  alignas(cmsghdr) char bytes[CMSG_SPACE(sizeof(int) * kMaxPassedFds)];
};

// sendmsg of `iov` with `fds` attached (none: a plain message). Returns sendmsg's result;
// more than kMaxPassedFds descriptors fail with EINVAL.
ssize_t sendWithRights(int sock, const iovec* iov, size_t iovCount, const std::vector<int>& fds, int flags);

// Every descriptor a received message carries, in the order they were sent; closed when the
// caller drops them.
std::vector<UniqueFd> takeRights(const msghdr& msg);

}  // namespace akad::box
