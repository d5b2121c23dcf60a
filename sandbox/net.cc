#include "sandbox/net.h"

#include <fcntl.h>
#include <net/if.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>

namespace akad::box {
namespace {

// A fresh network namespace has only a loopback interface, and it is down.
Status bringUpLoopback() {
  UniqueFd s(::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  if (!s.valid()) return errnoError("socket(AF_INET) for configuring lo");
  ifreq ifr{};
  std::strncpy(ifr.ifr_name, "lo", IFNAMSIZ - 1);
  if (::ioctl(s.get(), SIOCGIFFLAGS, &ifr) != 0) return errnoError("ioctl(SIOCGIFFLAGS, lo)");
  ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
  if (::ioctl(s.get(), SIOCSIFFLAGS, &ifr) != 0) return errnoError("ioctl(SIOCSIFFLAGS, lo up)");
  return {};
}

}  // namespace

Result<UniqueFd> createNetworkNamespace() {
  UniqueFd own(::open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC));
  if (!own.valid()) return errnoError("open /proc/thread-self/ns/net (akabox's own network namespace)");
  Status up = enterNewNetworkNamespace();
  UniqueFd created(::open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC));
  int openErr = errno;
  // Back home first, whatever happened: akabox must not stay in the sandbox's namespace.
  if (::setns(own.get(), CLONE_NEWNET) != 0) return errnoError("setns back to akabox's own network namespace");
  if (!up) return up.error();
  if (!created.valid()) return errnoError("open /proc/thread-self/ns/net (the sandbox's network namespace)", openErr);
  return created;
}

Status enterNewNetworkNamespace() {
  if (::unshare(CLONE_NEWNET) != 0) return errnoError("unshare(CLONE_NEWNET)");
  return bringUpLoopback();
}

}  // namespace akad::box
