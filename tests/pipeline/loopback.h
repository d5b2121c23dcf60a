#pragma once
// A TCP listening socket on 127.0.0.1 at a port the kernel picks, for tests' servers.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

namespace akad::test {

// Returns the socket (listening, backlog 8) and sets `port`; -1 on failure.
inline int listenOnLoopback(int& port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0 || ::listen(fd, 8) != 0)
    return -1;
  port = ntohs(a.sin_port);
  return fd;
}

}  // namespace akad::test
