#include "sandbox/net.h"

#include <net/if.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace akad::box {

const char* bringLoopbackUp() {
  int s = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (s < 0) return "socket(AF_INET) for configuring lo";
  ifreq ifr{};
  std::memcpy(ifr.ifr_name, "lo", 3);
  bool up = ::ioctl(s, SIOCGIFFLAGS, &ifr) == 0;
  if (up) {
    ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
    up = ::ioctl(s, SIOCSIFFLAGS, &ifr) == 0;
  }
  int err = errno;
  ::close(s);
  if (!up) {
    errno = err;
    return "ioctl(SIOCSIFFLAGS, lo up)";
  }
  return nullptr;
}

}  // namespace akad::box
