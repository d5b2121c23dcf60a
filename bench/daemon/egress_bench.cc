// The latency the agents' egress proxy (daemon/pipeline/egress_proxy.h) adds on loopback:
// request/response round trips of 200 bytes against an echo server on 127.0.0.1, directly and
// through the proxy, (a) on one kept connection (a TLS tunnel after CONNECT, as an agent's CLI
// keeps to its model API) and (b) with a new connection per request (CONNECT included).
//
//   build/bench/daemon/akad_bench_egress [ROUNDS]      (default 2000)
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "common/quantile.h"
#include "daemon/pipeline/egress_proxy.h"

namespace {

using Clock = std::chrono::steady_clock;

int tcpConnect(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  const int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  return fd;
}

int unixConnect(const std::string& path) {
  const int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  std::snprintf(a.sun_path, sizeof a.sun_path, "%s", path.c_str());
  ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  return fd;
}

bool readExactly(int fd, char* buf, std::size_t n) {
  for (std::size_t got = 0; got < n;) {
    const ssize_t r = ::recv(fd, buf + got, n - got, 0);
    if (r <= 0) return false;
    got += static_cast<std::size_t>(r);
  }
  return true;
}

// Reads the proxy's "HTTP/1.1 200 Connection Established\r\n\r\n".
bool readEstablished(int fd) {
  char buf[39];
  return readExactly(fd, buf, sizeof buf) && std::memcmp(buf, "HTTP/1.1 200", 12) == 0;
}

using akad::median;
double p99(std::vector<double> v) { return akad::quantile(std::move(v), 0.99); }

constexpr std::size_t kMessageBytes = 200;

// The echo server on an ephemeral loopback port, one thread per connection; returns the port.
int startEchoServer() {
  const int server = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(server, reinterpret_cast<sockaddr*>(&a), sizeof a);
  socklen_t len = sizeof a;
  ::getsockname(server, reinterpret_cast<sockaddr*>(&a), &len);
  const int port = ntohs(a.sin_port);
  ::listen(server, 128);
  std::thread([server] {
    for (;;) {
      const int c = ::accept(server, nullptr, nullptr);
      if (c < 0) return;
      std::thread([c] {
        const int one = 1;
        ::setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        char buf[4096];
        for (ssize_t n; (n = ::recv(c, buf, sizeof buf, 0)) > 0;) ::send(c, buf, static_cast<std::size_t>(n), MSG_NOSIGNAL);
        ::close(c);
      }).detach();
    }
  }).detach();
  return port;
}

std::string connectRequest(int port) {
  return "CONNECT 127.0.0.1:" + std::to_string(port) + " HTTP/1.1\r\nHost: x\r\n\r\n";
}

// Round trips on one kept connection, in microseconds.
std::vector<double> keptConnection(int fd, int rounds) {
  const std::string msg(kMessageBytes, 'm');
  char buf[256];
  std::vector<double> us;
  for (int i = 0; i < rounds; ++i) {
    const auto t0 = Clock::now();
    ::send(fd, msg.data(), msg.size(), MSG_NOSIGNAL);
    if (!readExactly(fd, buf, msg.size())) break;
    us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
  }
  return us;
}

// A new connection per round trip, directly and through the proxy (CONNECT included), in turn.
void newConnections(int port, const std::string& proxySocket, int rounds, std::vector<double>& directUs,
                    std::vector<double>& proxyUs) {
  const std::string msg(kMessageBytes, 'm'), connect = connectRequest(port);
  char buf[256];
  for (int i = 0; i < rounds; ++i) {
    auto t0 = Clock::now();
    int fd = tcpConnect(port);
    ::send(fd, msg.data(), msg.size(), MSG_NOSIGNAL);
    readExactly(fd, buf, msg.size());
    ::close(fd);
    directUs.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
    t0 = Clock::now();
    fd = unixConnect(proxySocket);
    ::send(fd, connect.data(), connect.size(), MSG_NOSIGNAL);
    readEstablished(fd);
    ::send(fd, msg.data(), msg.size(), MSG_NOSIGNAL);
    readExactly(fd, buf, msg.size());
    ::close(fd);
    proxyUs.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
  }
}

}  // namespace

int main(int argc, char** argv) {
  const int rounds = argc > 1 ? std::atoi(argv[1]) : 2000;
  const int port = startEchoServer();
  const auto dir = std::filesystem::temp_directory_path() / ("akad-egress-bench-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  akad::EgressPolicy policy;
  policy.allow.push_back(*akad::parseEgressRule("127.0.0.1:" + std::to_string(port) + " private"));
  policy.max_bytes = 1ull << 40;
  policy.max_connections = 1024;
  auto proxy = akad::EgressProxy::start(dir / "proxy.sock", policy);
  if (!proxy) {
    std::fprintf(stderr, "%s\n", proxy.error().message.c_str());
    return 1;
  }
  const std::string sock = (dir / "proxy.sock").string();

  const int direct = tcpConnect(port);
  const auto directUs = keptConnection(direct, rounds);
  ::close(direct);
  const int tunnel = unixConnect(sock);
  const std::string connect = connectRequest(port);
  ::send(tunnel, connect.data(), connect.size(), MSG_NOSIGNAL);
  if (!readEstablished(tunnel)) {
    std::fprintf(stderr, "the proxy refused the tunnel\n");
    return 1;
  }
  const auto tunnelUs = keptConnection(tunnel, rounds);
  ::close(tunnel);
  std::vector<double> directNew, proxyNew;
  newConnections(port, sock, rounds / 4, directNew, proxyNew);
  (*proxy)->stop();
  std::filesystem::remove_all(dir);

  std::printf("egress proxy on loopback, %d round trips of %zu bytes (%u CPU(s))\n", rounds, kMessageBytes,
              std::thread::hardware_concurrency());
  std::printf("  kept connection:  direct median %.1f us p99 %.1f us; through the proxy median %.1f us p99 %.1f us; "
              "added %.1f us\n",
              median(directUs), p99(directUs), median(tunnelUs), p99(tunnelUs), median(tunnelUs) - median(directUs));
  std::printf("  new connection per request (CONNECT included): direct median %.1f us; through the proxy median "
              "%.1f us p99 %.1f us; added %.1f us\n",
              median(directNew), median(proxyNew), p99(proxyNew), median(proxyNew) - median(directNew));
  return 0;
}
