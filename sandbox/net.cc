// A fresh network namespace has only a loopback interface, and it is down.

#include <net/if.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>

#include "common/unique_fd.h"
#include "sandbox/contain.h"

namespace akad::box {

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

}  // namespace akad::box
