// The agents' egress proxy (daemon/pipeline/egress_proxy.h) on real sockets: an upstream
// server on the host's loopback, the proxy on a Unix socket, a client speaking HTTP proxy
// requests as an agent's tools do. What is not on the allow list, what resolves to a private
// address without the entry saying so, and what passes the byte budget is refused or cut, and
// every connection and refusal is in the log.
#include <gtest/gtest.h>

#include <chrono>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <string>
#include <thread>

#include "daemon/pipeline/egress_proxy.h"
#include "tests/pipeline/loopback.h"

namespace akad {
namespace {

namespace fs = std::filesystem;

// A TCP server on 127.0.0.1: echoes what it gets, or sends `bulk` bytes, and keeps the first
// request head it saw.
class Upstream {
 public:
  explicit Upstream(std::size_t bulk = 0) : bulk_(bulk) {
    fd_ = test::listenOnLoopback(port_);
    EXPECT_GE(fd_, 0);
    thread_ = std::thread([this] { loop(); });
  }
  ~Upstream() {
    stop_ = true;
    ::shutdown(fd_, SHUT_RDWR);
    thread_.join();
    ::close(fd_);
  }
  int port() const { return port_; }
  std::string firstRequest() const { return first_; }

 private:
  void loop() {
    while (!stop_) {
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, 100) <= 0) continue;
      const int c = ::accept(fd_, nullptr, nullptr);
      if (c < 0) continue;
      char buf[4096];
      if (bulk_ > 0) {
        std::string chunk(65536, 'x');
        for (std::size_t sent = 0; sent < bulk_;) {
          const ssize_t n = ::send(c, chunk.data(), std::min(chunk.size(), bulk_ - sent), MSG_NOSIGNAL);
          if (n <= 0) break;
          sent += static_cast<std::size_t>(n);
        }
      } else {
        for (;;) {
          const ssize_t n = ::recv(c, buf, sizeof buf, 0);
          if (n <= 0) break;
          if (first_.empty()) first_.assign(buf, static_cast<std::size_t>(n));
          ::send(c, buf, static_cast<std::size_t>(n), MSG_NOSIGNAL);
        }
      }
      ::close(c);
    }
  }
  int fd_ = -1;
  int port_ = 0;
  std::size_t bulk_;
  std::atomic<bool> stop_{false};
  std::string first_;
  std::thread thread_;
};

class EgressProxyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("akad-egress-" + std::to_string(::getpid()) + "-" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  void startProxy(const std::vector<std::string>& allow, std::uint64_t maxBytes = 1 << 20,
                  std::chrono::seconds idle = std::chrono::seconds(120)) {
    EgressPolicy policy;
    policy.idle_timeout = idle;
    for (const auto& a : allow) {
      auto r = parseEgressRule(a);
      ASSERT_TRUE(r) << r.error().message;
      policy.allow.push_back(*r);
    }
    policy.max_bytes = maxBytes;
    auto p = EgressProxy::start(dir_ / "proxy.sock", policy);
    ASSERT_TRUE(p) << p.error().message;
    proxy_ = std::move(*p);
  }
  // A client connection to the proxy that has sent `request`.
  int client(const std::string& request) {
    const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    std::strcpy(a.sun_path, (dir_ / "proxy.sock").c_str());
    EXPECT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    ::send(fd, request.data(), request.size(), MSG_NOSIGNAL);
    return fd;
  }
  // Reads until `want` bytes came, the peer closed or 5 s passed.
  static std::string readSome(int fd, std::size_t want = 1 << 30) {
    std::string out;
    char buf[65536];
    while (out.size() < want) {
      pollfd p{fd, POLLIN, 0};
      if (::poll(&p, 1, 5000) <= 0) break;
      const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
      if (n <= 0) break;
      out.append(buf, static_cast<std::size_t>(n));
    }
    return out;
  }

  fs::path dir_;
  std::unique_ptr<EgressProxy> proxy_;
};

TEST_F(EgressProxyTest, AnAllowedTunnelCarriesBytesBothWaysAndIsLogged) {
  Upstream up;
  startProxy({"127.0.0.1:" + std::to_string(up.port()) + " private"});
  const int c = client("CONNECT 127.0.0.1:" + std::to_string(up.port()) + " HTTP/1.1\r\nHost: x\r\n\r\n");
  const std::string hello = readSome(c, 39);
  EXPECT_EQ(hello, "HTTP/1.1 200 Connection Established\r\n\r\n");
  ::send(c, "ping over tls", 13, MSG_NOSIGNAL);
  EXPECT_EQ(readSome(c, 13), "ping over tls");
  ::close(c);
  proxy_->stop();
  const auto log = proxy_->log();
  ASSERT_EQ(log.size(), 1u);
  EXPECT_EQ(log[0].at("allowed"), true);
  EXPECT_EQ(log[0].at("host"), "127.0.0.1");
  EXPECT_EQ(log[0].at("address"), "127.0.0.1");
  EXPECT_EQ(log[0].at("bytes_up"), 13);
  EXPECT_EQ(log[0].at("bytes_down"), 13);
  EXPECT_EQ(proxy_->summary().at("connections"), 1);
}

TEST_F(EgressProxyTest, WhatIsNotOnTheListOrResolvesToAPrivateAddressIsRefused) {
  Upstream up, other;
  // Listed without "private": loopback is refused all the same.
  startProxy({"127.0.0.1:" + std::to_string(up.port()), "localhost:" + std::to_string(other.port())});
  int c = client("CONNECT 127.0.0.1:" + std::to_string(other.port()) + " HTTP/1.1\r\n\r\n");
  std::string reply = readSome(c);
  EXPECT_EQ(reply.rfind("HTTP/1.1 403", 0), 0u) << reply;
  EXPECT_NE(reply.find("not on the agent's allow list"), std::string::npos) << reply;
  ::close(c);
  c = client("CONNECT 127.0.0.1:" + std::to_string(up.port()) + " HTTP/1.1\r\n\r\n");
  reply = readSome(c);
  EXPECT_EQ(reply.rfind("HTTP/1.1 403", 0), 0u) << reply;
  EXPECT_NE(reply.find("a private, loopback or link-local address"), std::string::npos) << reply;
  ::close(c);
  // A name that resolves to loopback is no way around it.
  c = client("CONNECT localhost:" + std::to_string(other.port()) + " HTTP/1.1\r\n\r\n");
  reply = readSome(c);
  EXPECT_EQ(reply.rfind("HTTP/1.1 403", 0), 0u) << reply;
  ::close(c);
  // Neither are https:// targets without CONNECT, nor garbage.
  c = client("GET https://example.com/ HTTP/1.1\r\n\r\n");
  EXPECT_EQ(readSome(c).rfind("HTTP/1.1 400", 0), 0u);
  ::close(c);
  proxy_->stop();
  const auto log = proxy_->log();
  ASSERT_EQ(log.size(), 4u);
  for (const auto& e : log) EXPECT_EQ(e.at("allowed"), false) << e.dump();
  EXPECT_EQ(proxy_->summary().at("denied"), 4);
  EXPECT_EQ(up.firstRequest(), "");  // nothing reached either server
  EXPECT_EQ(other.firstRequest(), "");
}

TEST_F(EgressProxyTest, PlainHttpIsForwardedInOriginFormWithoutTheProxysHeaders) {
  Upstream up;
  startProxy({"127.0.0.1:" + std::to_string(up.port()) + " private"});
  const std::string target = "127.0.0.1:" + std::to_string(up.port());
  const int c = client("GET http://" + target + "/v1/models?x=1 HTTP/1.1\r\nHost: " + target +
                       "\r\nProxy-Authorization: Basic c2VjcmV0\r\nProxy-Connection: keep-alive\r\nConnection: keep-alive\r\n"
                       "Accept: */*\r\n\r\n");
  const std::string echoed = readSome(c, 40);
  ::close(c);
  proxy_->stop();
  EXPECT_EQ(up.firstRequest().rfind("GET /v1/models?x=1 HTTP/1.1\r\n", 0), 0u) << up.firstRequest();
  EXPECT_EQ(up.firstRequest().find("Proxy-"), std::string::npos) << up.firstRequest();
  EXPECT_NE(up.firstRequest().find("Accept: */*\r\n\r\n"), std::string::npos) << up.firstRequest();
  // One request per connection: the server is told to close, and the client's keep-alive is
  // not passed on, so every request is checked and logged on a connection of its own.
  EXPECT_NE(up.firstRequest().find("\r\nConnection: close\r\n"), std::string::npos) << up.firstRequest();
  EXPECT_EQ(up.firstRequest().find("keep-alive"), std::string::npos) << up.firstRequest();
  EXPECT_EQ(echoed.rfind("GET /v1/models", 0), 0u);
}

TEST_F(EgressProxyTest, AHugeDownloadIsCutAtTheAttemptsByteLimit) {
  Upstream up(8u << 20);  // 8 MiB
  startProxy({"127.0.0.1:" + std::to_string(up.port()) + " private"}, 256u << 10);
  const int c = client("CONNECT 127.0.0.1:" + std::to_string(up.port()) + " HTTP/1.1\r\n\r\n");
  const std::string got = readSome(c);
  ::close(c);
  proxy_->stop();
  EXPECT_LE(got.size(), (256u << 10) + 100) << "the proxy passed more than the attempt's bytes";
  EXPECT_GT(got.size(), 1000u);
  const auto log = proxy_->log();
  ASSERT_EQ(log.size(), 1u);
  EXPECT_EQ(log[0].at("end"), "byte limit") << log[0].dump();
}

// A download that stalls (the server sends nothing more) is cut at the idle limit instead of
// holding one of the attempt's connections for the rest of the agent stage.
TEST_F(EgressProxyTest, AStalledDownloadIsCutAtTheIdleLimit) {
  Upstream up;  // echoes, so it says nothing until spoken to
  startProxy({"127.0.0.1:" + std::to_string(up.port()) + " private"}, 1 << 20, std::chrono::seconds(1));
  const int c = client("CONNECT 127.0.0.1:" + std::to_string(up.port()) + " HTTP/1.1\r\n\r\n");
  const auto t0 = std::chrono::steady_clock::now();
  const std::string got = readSome(c);  // ends when the proxy closes (or after 5 s of nothing)
  const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ::close(c);
  proxy_->stop();
  EXPECT_EQ(got.rfind("HTTP/1.1 200", 0), 0u) << got;
  EXPECT_LT(waited, 4.0) << "the stalled connection was not cut at the 1 s idle limit";
  const auto log = proxy_->log();
  ASSERT_EQ(log.size(), 1u);
  EXPECT_EQ(log[0].at("end"), "idle timeout") << log[0].dump();
}

// The cloud metadata service is refused even when an allow entry names it, unless the entry
// says " private": an agent's list cannot open it by accident.
TEST_F(EgressProxyTest, TheMetadataAddressIsRefusedEvenWhenListed) {
  startProxy({"169.254.169.254:80"});
  const int c = client("CONNECT 169.254.169.254:80 HTTP/1.1\r\n\r\n");
  const std::string got = readSome(c, 12);
  ::close(c);
  proxy_->stop();
  EXPECT_EQ(got.rfind("HTTP/1.1 403", 0), 0u) << got;
  const auto log = proxy_->log();
  ASSERT_EQ(log.size(), 1u);
  EXPECT_EQ(log[0].at("allowed"), false) << log[0].dump();
  EXPECT_NE(log[0].dump().find("link-local"), std::string::npos) << log[0].dump();
}

TEST(EgressRules, EntriesAndAddressClassesAreRead) {
  auto r = parseEgressRule("API.Anthropic.com:443");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->host, "api.anthropic.com");
  EXPECT_EQ(r->port, 443);
  EXPECT_FALSE(r->allow_private);
  auto v6 = parseEgressRule("[::1]:8080 private");
  ASSERT_TRUE(v6);
  EXPECT_EQ(v6->host, "::1");
  EXPECT_TRUE(v6->allow_private);
  for (const char* bad : {"", "host", "host:0", "host:70000", ":443", "a b:1", "host:443 public", "h/x:1"})
    EXPECT_FALSE(parseEgressRule(bad)) << bad;
  for (const char* a : {"127.0.0.1", "10.1.2.3", "172.20.0.1", "192.168.1.1", "169.254.169.254", "100.64.0.1", "0.0.0.0",
                        "::1", "::", "fe80::1", "fd00:ec2::254", "::ffff:10.0.0.1", "224.0.0.1", "not-an-address"})
    EXPECT_TRUE(isNonPublicAddress(a)) << a;
  for (const char* a : {"8.8.8.8", "1.1.1.1", "160.79.104.10", "2606:4700::1111", "::ffff:8.8.8.8"})
    EXPECT_FALSE(isNonPublicAddress(a)) << a;
}

}  // namespace
}  // namespace akad
