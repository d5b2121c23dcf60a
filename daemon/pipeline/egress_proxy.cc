#include "daemon/pipeline/egress_proxy.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <ctime>
#include <optional>

#include "common/log.h"
#include "common/time_text.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace akad {
namespace {

constexpr std::size_t kMaxHead = 16 * 1024;
constexpr int kMaxConnectionsPerAttempt = 10000;

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// host:port, [v6]:port -> (host, port); false when malformed.
bool splitAuthority(const std::string& text, std::string& host, int& port) {
  std::string h, p;
  if (!text.empty() && text[0] == '[') {
    const auto close = text.find(']');
    if (close == std::string::npos || close + 1 >= text.size() || text[close + 1] != ':') return false;
    h = text.substr(1, close - 1);
    p = text.substr(close + 2);
  } else {
    const auto colon = text.rfind(':');
    if (colon == std::string::npos || text.find(':') != colon) return false;
    h = text.substr(0, colon);
    p = text.substr(colon + 1);
  }
  if (h.empty() || p.empty() || p.size() > 5 || p.find_first_not_of("0123456789") != std::string::npos) return false;
  for (char c : h)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == ':' || c == '_')) return false;
  port = std::stoi(p);
  if (port < 1 || port > 65535) return false;
  host = lower(h);
  return true;
}

bool writeAll(int fd, const char* data, std::size_t n) {
  while (n > 0) {
    const ssize_t w = ::send(fd, data, n, MSG_NOSIGNAL);
    if (w < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN) {
        pollfd p{fd, POLLOUT, 0};
        if (::poll(&p, 1, 10000) <= 0) return false;
        continue;
      }
      return false;
    }
    data += w;
    n -= static_cast<std::size_t>(w);
  }
  return true;
}

void deny(int client, int status, const std::string& reason) {
  const std::string body = "akad egress proxy: " + reason + "\n";
  const std::string text = std::to_string(status) + (status == 403 ? " Forbidden" : status == 502 ? " Bad Gateway"
                                                                               : status == 503 ? " Service Unavailable"
                                                                                               : " Bad Request");
  const std::string reply = "HTTP/1.1 " + text + "\r\nContent-Type: text/plain\r\nConnection: close\r\nContent-Length: " +
                            std::to_string(body.size()) + "\r\nX-Akad-Denied: " + reason + "\r\n\r\n" + body;
  writeAll(client, reply.data(), reply.size());
}

// Connects to one address within the timeout; -1 on failure.
int connectWithin(const sockaddr* addr, socklen_t len, std::chrono::seconds timeout) {
  const int fd = ::socket(addr->sa_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return -1;
  if (::connect(fd, addr, len) == 0) return fd;
  if (errno != EINPROGRESS) {
    ::close(fd);
    return -1;
  }
  pollfd p{fd, POLLOUT, 0};
  int err = 0;
  socklen_t el = sizeof err;
  if (::poll(&p, 1, static_cast<int>(timeout.count() * 1000)) != 1 ||
      ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el) != 0 || err != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

std::string numericAddress(const sockaddr* a) {
  char buf[INET6_ADDRSTRLEN] = {};
  if (a->sa_family == AF_INET) ::inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(a)->sin_addr, buf, sizeof buf);
  else ::inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(a)->sin6_addr, buf, sizeof buf);
  return buf;
}

// A request the proxy does not carry: the HTTP status the client gets (0: the client sent
// nothing, so nothing is answered) and the reason logged.
struct Refusal {
  int status;
  std::string reason;
};

// What the client asked for: a tunnel (CONNECT) or one plain http request.
struct ProxyRequest {
  std::string method, host;
  int port = 0;
  bool tunnel = false;
  std::string forwardHead;  // plain http: the head the server gets
};

// Reads up to the end of the request head (kept with its last header's CRLF); `rest` is what
// came after it.
std::optional<Refusal> readRequestHead(int client, int stopFd, std::string& head, std::string& rest) {
  char buf[65536];
  std::size_t headEnd = std::string::npos;
  while (headEnd == std::string::npos) {
    pollfd p[2] = {{client, POLLIN, 0}, {stopFd, POLLIN, 0}};
    if (::poll(p, 2, 10000) <= 0 || p[1].revents != 0) return Refusal{0, "no request"};
    const ssize_t n = ::recv(client, buf, sizeof buf, 0);
    if (n <= 0) return Refusal{0, "no request"};
    head.append(buf, static_cast<std::size_t>(n));
    headEnd = head.find("\r\n\r\n");
    if (headEnd == std::string::npos && head.size() > kMaxHead) return Refusal{400, "request head too large"};
  }
  rest = head.substr(headEnd + 4);
  head.resize(headEnd + 2);
  return std::nullopt;
}

// Origin form for the server; the proxy's own headers stay here. One request per connection:
// the server is told to close after its answer, so a client's next request comes as a new
// connection, checked against the list and logged on its own (a kept-alive connection would
// carry it to this server unchecked and unlogged).
std::string originFormHead(const std::string& head, std::size_t lineEnd, const std::string& method,
                           const std::string& path, const std::string& version) {
  std::string forward = method + " " + path + " " + version + "\r\nConnection: close\r\n";
  std::size_t pos = lineEnd + 2;
  while (pos < head.size()) {
    const auto e = head.find("\r\n", pos);
    const std::string line = head.substr(pos, e - pos);
    const std::string name = lower(line.substr(0, line.find(':')));
    if (name.rfind("proxy-", 0) != 0 && name != "connection" && name != "keep-alive") forward += line + "\r\n";
    pos = e + 2;
  }
  return forward + "\r\n";
}

std::optional<Refusal> parseRequest(const std::string& head, ProxyRequest& request) {
  const auto lineEnd = head.find("\r\n");
  const std::string requestLine = head.substr(0, lineEnd);
  const auto sp1 = requestLine.find(' '), sp2 = requestLine.rfind(' ');
  if (sp1 == std::string::npos || sp2 == sp1) return Refusal{400, "malformed request line"};
  const std::string target = requestLine.substr(sp1 + 1, sp2 - sp1 - 1), version = requestLine.substr(sp2 + 1);
  request.method = requestLine.substr(0, sp1);
  request.tunnel = request.method == "CONNECT";
  if (request.tunnel) {
    if (!splitAuthority(target, request.host, request.port)) return Refusal{400, "CONNECT needs host:port"};
    return std::nullopt;
  }
  if (lower(target.substr(0, 7)) != "http://")
    return Refusal{400, "only CONNECT and absolute http:// requests are proxied"};
  const auto pathStart = target.find('/', 7);
  const std::string authority = target.substr(7, pathStart == std::string::npos ? std::string::npos : pathStart - 7);
  if (!splitAuthority(authority.find(':') == std::string::npos || authority.back() == ']' ? authority + ":80" : authority,
                      request.host, request.port))
    return Refusal{400, "malformed http:// target"};
  request.forwardHead = originFormHead(head, lineEnd, request.method,
                                       pathStart == std::string::npos ? "/" : target.substr(pathStart), version);
  return std::nullopt;
}

// Resolves the host itself and connects to the first address the rule allows.
std::optional<Refusal> connectUpstream(const ProxyRequest& request, const EgressRule& rule,
                                       std::chrono::seconds timeout, UniqueFd& up, std::string& address) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (::getaddrinfo(request.host.c_str(), std::to_string(request.port).c_str(), &hints, &found) != 0 || found == nullptr)
    return Refusal{502, "cannot resolve " + request.host};
  int upstream = -1;
  std::string why = "cannot connect to " + request.host + ":" + std::to_string(request.port);
  for (addrinfo* ai = found; ai != nullptr && upstream < 0; ai = ai->ai_next) {
    const std::string a = numericAddress(ai->ai_addr);
    if (isNonPublicAddress(a) && !rule.allow_private) {
      why = request.host + " resolves to " + a + ", a private, loopback or link-local address";
      continue;
    }
    upstream = connectWithin(ai->ai_addr, ai->ai_addrlen, timeout);
    if (upstream >= 0) address = a;
  }
  ::freeaddrinfo(found);
  if (upstream < 0) return Refusal{why.find("private") != std::string::npos ? 403 : 502, why};
  up.reset(upstream);
  return std::nullopt;
}

}  // namespace

Result<EgressRule> parseEgressRule(const std::string& text) {
  std::string authority = text;
  EgressRule rule;
  if (const auto space = text.find(' '); space != std::string::npos) {
    if (text.substr(space + 1) != "private")
      return Error{"network allow entry '" + text + "': after host:port only ' private' may follow"};
    rule.allow_private = true;
    authority = text.substr(0, space);
  }
  if (!splitAuthority(authority, rule.host, rule.port))
    return Error{"network allow entry '" + text + "' must be host:port (a name or an address, and a port 1-65535)"};
  return rule;
}

bool isNonPublicAddress(const std::string& address) {
  in_addr v4{};
  if (::inet_pton(AF_INET, address.c_str(), &v4) == 1) {
    const std::uint32_t a = ntohl(v4.s_addr);
    auto in = [&](std::uint32_t net, int bits) { return (a >> (32 - bits)) == (net >> (32 - bits)); };
    return in(0x00000000, 8) || in(0x0A000000, 8) || in(0x64400000, 10) || in(0x7F000000, 8) || in(0xA9FE0000, 16) ||
           in(0xAC100000, 12) || in(0xC0000000, 24) || in(0xC0A80000, 16) || in(0xC6120000, 15) || in(0xE0000000, 4) ||
           in(0xF0000000, 4);
  }
  in6_addr v6{};
  if (::inet_pton(AF_INET6, address.c_str(), &v6) != 1) return true;  // not an address: not trusted
  const unsigned char* b = v6.s6_addr;
  static const unsigned char zero[16] = {};
  if (std::memcmp(b, zero, 15) == 0 && (b[15] == 0 || b[15] == 1)) return true;  // :: and ::1
  if (IN6_IS_ADDR_V4MAPPED(&v6) || IN6_IS_ADDR_V4COMPAT(&v6)) {
    char v4text[INET_ADDRSTRLEN];
    ::inet_ntop(AF_INET, b + 12, v4text, sizeof v4text);
    return isNonPublicAddress(v4text);
  }
  if ((b[0] & 0xfe) == 0xfc) return true;                  // fc00::/7 unique local (fd00:ec2::254 too)
  if (b[0] == 0xfe && (b[1] & 0xc0) == 0x80) return true;  // fe80::/10 link-local
  if (b[0] == 0xff) return true;                           // multicast
  if (b[0] == 0x20 && b[1] == 0x01 && b[2] == 0x0d && b[3] == 0xb8) return true;  // documentation
  return false;
}

Result<std::unique_ptr<EgressProxy>> EgressProxy::start(const fs::path& socketPath, EgressPolicy policy) {
  UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd.valid()) return errnoError("egress proxy: socket");
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  if (socketPath.native().size() >= sizeof a.sun_path) return Error{"egress proxy: socket path too long: " + socketPath.string()};
  std::memcpy(a.sun_path, socketPath.c_str(), socketPath.native().size() + 1);
  ::unlink(socketPath.c_str());
  if (::bind(fd.get(), reinterpret_cast<const sockaddr*>(&a), sizeof a) != 0)
    return errnoError("egress proxy: cannot bind " + socketPath.string());
  if (::chmod(socketPath.c_str(), 0666) != 0 || ::listen(fd.get(), 64) != 0)
    return errnoError("egress proxy: cannot listen on " + socketPath.string());
  std::unique_ptr<EgressProxy> p(new EgressProxy(socketPath, std::move(fd), std::move(policy)));
  int pipeFds[2];
  if (::pipe2(pipeFds, O_CLOEXEC) != 0) return errnoError("egress proxy: pipe");
  p->stopPipeRead_.reset(pipeFds[0]);
  p->stopPipeWrite_.reset(pipeFds[1]);
  p->acceptor_ = std::thread([raw = p.get()] { raw->acceptLoop(); });
  return p;
}

EgressProxy::EgressProxy(fs::path path, UniqueFd listener, EgressPolicy policy)
    : path_(std::move(path)), listener_(std::move(listener)), policy_(std::move(policy)) {}

EgressProxy::~EgressProxy() { stop(); }

void EgressProxy::stop() {
  if (stopping_.exchange(true)) return;
  if (stopPipeWrite_.valid()) {
    const char c = 1;
    (void)!::write(stopPipeWrite_.get(), &c, 1);  // never read: every poll sees it from now on
  }
  if (acceptor_.joinable()) acceptor_.join();
  std::vector<std::thread> workers;
  {
    std::lock_guard lock(mutex_);
    workers.swap(workers_);
  }
  for (auto& t : workers) t.join();
  ::unlink(path_.c_str());
}

std::vector<json> EgressProxy::log() const {
  std::lock_guard lock(mutex_);
  return log_;
}

json EgressProxy::summary() const {
  std::lock_guard lock(mutex_);
  std::int64_t connections = 0, denied = 0, up = 0, down = 0;
  for (const json& e : log_) {
    if (e.value("allowed", false)) ++connections;
    else ++denied;
    up += e.value("bytes_up", std::int64_t{0});
    down += e.value("bytes_down", std::int64_t{0});
  }
  return {{"connections", connections}, {"denied", denied}, {"bytes_up", up}, {"bytes_down", down}};
}

void EgressProxy::record(json entry) {
  if (!entry.value("allowed", false))
    log::info("egress proxy ", path_.parent_path().string(), ": denied ", entry.value("host", std::string("?")), ":",
              entry.value("port", 0), ": ", entry.value("reason", std::string()));
  std::lock_guard lock(mutex_);
  log_.push_back(std::move(entry));
}

bool EgressProxy::spend(std::uint64_t bytes) {
  return bytes_.fetch_add(bytes) + bytes <= policy_.max_bytes;
}

void EgressProxy::acceptLoop() {
  int accepted = 0;
  for (;;) {
    pollfd p[2] = {{listener_.get(), POLLIN, 0}, {stopPipeRead_.get(), POLLIN, 0}};
    if (::poll(p, 2, -1) < 0) {
      if (errno == EINTR) continue;
      return;
    }
    if (p[1].revents != 0) return;
    const int client = ::accept4(listener_.get(), nullptr, nullptr, SOCK_CLOEXEC);
    if (client < 0) continue;
    if (open_.load() >= policy_.max_connections || ++accepted > kMaxConnectionsPerAttempt) {
      deny(client, 503, "too many connections");
      record({{"allowed", false}, {"reason", "too many connections"}, {"started_at", isoTimeUtc()}});
      ::close(client);
      continue;
    }
    ++open_;
    std::lock_guard lock(mutex_);
    workers_.emplace_back([this, client] {
      serve(client);
      ::close(client);
      --open_;
    });
  }
}

void EgressProxy::serve(int client) {
  const auto started = std::chrono::steady_clock::now();
  json entry = {{"started_at", isoTimeUtc()}, {"allowed", false}};
  auto finish = [&](json extra) {
    for (auto& [k, v] : extra.items()) entry[k] = v;
    entry["duration_s"] = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    record(std::move(entry));
  };
  auto refuse = [&](const Refusal& refusal) {
    if (refusal.status != 0) deny(client, refusal.status, refusal.reason);
    finish({{"reason", refusal.reason}});
  };

  std::string head, rest;
  if (auto refusal = readRequestHead(client, stopPipeRead_.get(), head, rest)) return refuse(*refusal);
  ProxyRequest request;
  if (auto refusal = parseRequest(head, request)) return refuse(*refusal);
  entry["host"] = request.host;
  entry["port"] = request.port;
  entry["method"] = request.method;

  const EgressRule* rule = nullptr;
  for (const auto& r : policy_.allow)
    if (r.host == request.host && r.port == request.port) rule = &r;
  if (rule == nullptr)
    return refuse({403, request.host + ":" + std::to_string(request.port) + " is not on the agent's allow list"});
  UniqueFd up;
  std::string address;
  if (auto refusal = connectUpstream(request, *rule, policy_.connect_timeout, up, address)) return refuse(*refusal);
  entry["address"] = address;
  entry["allowed"] = true;

  if (request.tunnel) {
    const std::string ok = "HTTP/1.1 200 Connection Established\r\n\r\n";
    writeAll(client, ok.data(), ok.size());
  } else {
    rest = request.forwardHead + rest;
  }
  if (!rest.empty()) {
    if (!spend(rest.size())) return finish({{"reason", "byte limit"}, {"bytes_up", 0}, {"bytes_down", 0}});
    writeAll(up.get(), rest.data(), rest.size());
  }
  const Relayed relayed = relay(client, up.get());
  finish({{"bytes_up", rest.size() + relayed.bytes_up}, {"bytes_down", relayed.bytes_down}, {"end", relayed.end}});
}

// Both ways until either side closes, the stream idles past the limit, the attempt's bytes are
// spent or the proxy stops.
EgressProxy::Relayed EgressProxy::relay(int client, int upstream) {
  Relayed relayed;
  char buf[65536];
  bool clientOpen = true, upOpen = true;
  while (clientOpen && upOpen) {
    pollfd p[3] = {{client, POLLIN, 0}, {upstream, POLLIN, 0}, {stopPipeRead_.get(), POLLIN, 0}};
    const int r = ::poll(p, 3, static_cast<int>(policy_.idle_timeout.count() * 1000));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) {
      relayed.end = "idle timeout";
      break;
    }
    if (p[2].revents != 0) {
      relayed.end = "the attempt's agent stage ended";
      break;
    }
    for (int side = 0; side < 2; ++side) {
      if (p[side].revents == 0) continue;
      const int from = side == 0 ? client : upstream, to = side == 0 ? upstream : client;
      const ssize_t n = ::recv(from, buf, sizeof buf, MSG_DONTWAIT);
      if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
        (side == 0 ? clientOpen : upOpen) = false;
        ::shutdown(to, SHUT_WR);
        continue;
      }
      if (n < 0) continue;
      if (!spend(static_cast<std::uint64_t>(n))) {
        relayed.end = "byte limit";
        return relayed;
      }
      if (!writeAll(to, buf, static_cast<std::size_t>(n))) {
        clientOpen = upOpen = false;
        break;
      }
      (side == 0 ? relayed.bytes_up : relayed.bytes_down) += static_cast<std::uint64_t>(n);
    }
  }
  return relayed;
}

}  // namespace akad
