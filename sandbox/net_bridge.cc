// akanet-bridge: runs inside an agent's sandbox whose network is `allow` (docs/agents.md,
// "Network"). The sandbox's network namespace has loopback only; akad's egress proxy listens on
// a Unix socket bound into the sandbox. The bridge listens on a TCP port of the sandbox's
// loopback (what HTTPS_PROXY names), carries each connection to the proxy's socket unchanged,
// and runs the agent's command as its child, ending with the command's status. It decides
// nothing: the proxy outside the sandbox checks every request, so an agent that kills or
// replaces the bridge only loses its own way out.
//
//   akanet-bridge --listen PORT --proxy SOCKET -- COMMAND [ARG...]
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

int fail(const char* what) {
  std::fprintf(stderr, "akanet-bridge: %s: %s\n", what, std::strerror(errno));
  return 125;
}

int connectProxy(const char* path) {
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  std::snprintf(a.sun_path, sizeof a.sun_path, "%s", path);
  if (fd < 0 || ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    if (fd >= 0) ::close(fd);
    return -1;
  }
  return fd;
}

struct Pair {
  int a, b;  // the agent's connection, the proxy's
};

constexpr char kUsage[] = "usage: akanet-bridge --listen PORT --proxy SOCKET -- COMMAND [ARG...]\n";

struct BridgeArgs {
  int port = 0;
  const char* proxy = nullptr;
  int command = 0;  // argv index of the command
};

// False (after the usage) when the command line is not --listen PORT --proxy SOCKET -- COMMAND.
bool parseArgs(int argc, char** argv, BridgeArgs& args) {
  int i = 1;
  for (; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--listen" && i + 1 < argc) args.port = std::atoi(argv[++i]);
    else if (arg == "--proxy" && i + 1 < argc) args.proxy = argv[++i];
    else if (arg == "--") {
      ++i;
      break;
    } else {
      std::fputs(kUsage, stderr);
      return false;
    }
  }
  args.command = i;
  if (args.port <= 0 || args.port > 65535 || args.proxy == nullptr || i >= argc) {
    std::fputs(kUsage, stderr);
    return false;
  }
  return true;
}

// The TCP listener on the sandbox's loopback; -1 on failure (errno says why).
int listenOnLoopback(int port) {
  const int listener = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  const int one = 1;
  ::setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (listener < 0 || ::bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      ::listen(listener, 64) != 0)
    return -1;
  return listener;
}

int wakeWrite = -1;  // SIGCHLD's end of the wake pipe

// Forks the command; SIGCHLD then wakes the loop through the pipe whose write end is
// `wakeFd`. -1 on failure.
pid_t startCommand(char** command, int wakeFd) {
  wakeWrite = wakeFd;
  struct sigaction sa {};
  sa.sa_handler = [](int) {
    const int saved = errno;
    (void)!::write(wakeWrite, "c", 1);
    errno = saved;
  };
  sa.sa_flags = SA_RESTART | SA_NOCLDSTOP;
  ::sigaction(SIGCHLD, &sa, nullptr);
  ::signal(SIGPIPE, SIG_IGN);
  const pid_t child = ::fork();
  if (child == 0) {
    ::signal(SIGPIPE, SIG_DFL);
    ::execvp(command[0], command);
    std::fprintf(stderr, "akanet-bridge: cannot run %s: %s\n", command[0], std::strerror(errno));
    ::_exit(127);
  }
  return child;
}

// A new agent connection, paired with a fresh one to the proxy; a proxy that cannot be reached
// is answered 502.
void acceptConnection(int listener, const char* proxy, std::vector<Pair>& pairs) {
  const int c = ::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
  if (c < 0) return;
  const int up = connectProxy(proxy);
  if (up < 0) {
    static const char kDown[] = "HTTP/1.1 502 Bad Gateway\r\nConnection: close\r\nContent-Length: 0\r\n\r\n";
    (void)!::send(c, kDown, sizeof kDown - 1, MSG_NOSIGNAL);
    ::close(c);
  } else {
    pairs.push_back({c, up});
  }
}

// Carries one read from `from` to `to`; false when either side is done.
bool carry(int from, int to, char* buf, std::size_t size) {
  const ssize_t n = ::recv(from, buf, size, 0);
  if (n <= 0) return false;
  for (ssize_t off = 0; off < n;) {
    const ssize_t w = ::send(to, buf + off, static_cast<std::size_t>(n - off), MSG_NOSIGNAL);
    if (w <= 0) {
      if (w < 0 && errno == EINTR) continue;
      return false;
    }
    off += w;
  }
  return true;
}

// Carries what arrived (`polled` holds each pair's two entries, in order); a side that closes
// ends its pair (the proxy ends tunnels whole).
void carryTraffic(std::vector<Pair>& pairs, const pollfd* polled, char* buf, std::size_t size) {
  std::vector<Pair> kept;
  for (std::size_t k = 0; k < pairs.size(); ++k) {
    const Pair pr = pairs[k];
    bool open = true;
    for (int side = 0; side < 2 && open; ++side) {
      if (polled[2 * k + side].revents == 0) continue;
      open = side == 0 ? carry(pr.a, pr.b, buf, size) : carry(pr.b, pr.a, buf, size);
    }
    if (open) {
      kept.push_back(pr);
    } else {
      ::close(pr.a);
      ::close(pr.b);
    }
  }
  pairs.swap(kept);
}

}  // namespace

int main(int argc, char** argv) {
  BridgeArgs args;
  if (!parseArgs(argc, argv, args)) return 125;
  const int listener = listenOnLoopback(args.port);
  if (listener < 0) return fail("cannot listen on 127.0.0.1");
  int wake[2];
  if (::pipe2(wake, O_CLOEXEC | O_NONBLOCK) != 0) return fail("pipe");
  const pid_t child = startCommand(argv + args.command, wake[1]);
  if (child < 0) return fail("fork");

  std::vector<Pair> pairs;
  char buf[65536];
  for (;;) {
    std::vector<pollfd> p = {{wake[0], POLLIN, 0}, {listener, POLLIN, 0}};
    for (const Pair& pr : pairs) {
      p.push_back({pr.a, POLLIN, 0});
      p.push_back({pr.b, POLLIN, 0});
    }
    if (::poll(p.data(), p.size(), -1) < 0 && errno != EINTR) return fail("poll");
    if (p[0].revents != 0) {
      while (::read(wake[0], buf, sizeof buf) > 0) {
      }
      int status = 0;
      if (::waitpid(child, &status, WNOHANG) == child) {
        if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
        return WEXITSTATUS(status);
      }
    }
    if (p[1].revents != 0) acceptConnection(listener, args.proxy, pairs);
    carryTraffic(pairs, p.data() + 2, buf, sizeof buf);
  }
}
