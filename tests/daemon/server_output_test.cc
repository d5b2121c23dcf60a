// The socket server's output queue (daemon/connection.cc): its bound keeps a client that stops
// reading from holding the daemon's memory, and must not cut off a client that reads a reply
// larger than the bound. A real Server on a real Unix socket, its bound made small.
#include <gtest/gtest.h>

#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <boost/asio.hpp>
#include <chrono>
#include <string>
#include <thread>

#include "common/unique_fd.h"
#include "daemon/methods.h"
#include "daemon/server.h"
#include "tests/daemon/harness.h"

namespace akad::test {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

constexpr std::size_t kBound = 64 << 10;
constexpr std::size_t kBlob = 256 << 10;  // one reply: four times the bound

class ServerOutputTest : public ::testing::Test {
 protected:
  void SetUp() override {
    methods_.add("blob", [](const Peer&, const json&) -> Result<json> { return json{{"blob", std::string(kBlob, 'x')}}; });
    ServerOptions o;
    o.socketPath = dir_ / "s.sock";
    o.maxQueuedOutputBytes = kBound;
    o.drainTimeout = 1s;
    server_ = std::make_unique<Server>(io_, methods_, o);
    ASSERT_TRUE(server_->listen());
    server_->start();
    thread_ = std::thread([this] { io_.run(); });
  }
  // The server stopped on its own thread; run() returns once its connections are gone (the
  // clients have closed theirs by now, and the drain closes the rest within a second).
  void TearDown() override {
    if (server_) boost::asio::post(io_, [this] { server_->stop(); });
    if (thread_.joinable()) thread_.join();
  }

  UniqueFd connectClient() {
    UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    const std::string path = (dir_ / "s.sock").string();
    path.copy(addr.sun_path, sizeof(addr.sun_path) - 1);
    EXPECT_EQ(::connect(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
    return fd;
  }
  static void sendAll(int fd, const std::string& s) {
    for (std::size_t off = 0; off < s.size();) {
      ssize_t n = ::send(fd, s.data() + off, s.size() - off, MSG_NOSIGNAL);
      ASSERT_GT(n, 0);
      off += static_cast<std::size_t>(n);
    }
  }
  // Reads until `lines` newlines or end of stream; what came, and whether the stream ended.
  static std::pair<std::string, bool> readLines(int fd, int lines, std::chrono::milliseconds timeout) {
    std::string got;
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    char buf[65536];
    while (std::count(got.begin(), got.end(), '\n') < lines) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      if (left <= 0ms) break;
      pollfd p{fd, POLLIN, 0};
      if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) break;
      ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
      if (n <= 0) return {got, true};
      got.append(buf, static_cast<std::size_t>(n));
    }
    return {got, false};
  }

  TempDir dir_;
  boost::asio::io_context io_;  // declared before the server: it outlives it
  MethodTable methods_;
  std::unique_ptr<Server> server_;
  std::thread thread_;
};

TEST_F(ServerOutputTest, AReplyLargerThanTheBoundReachesAClientThatReadsIt) {
  UniqueFd c = connectClient();
  sendAll(c.get(), R"({"id":1,"method":"blob","params":{}})" "\n");
  auto [got, ended] = readLines(c.get(), 1, 10s);
  ASSERT_FALSE(ended) << "the server hung up on a client that was reading its reply";
  json reply = json::parse(got);
  EXPECT_EQ(reply.at("result").at("blob").get<std::string>().size(), kBlob);
  // And a second one on the same connection.
  sendAll(c.get(), R"({"id":2,"method":"blob","params":{}})" "\n");
  auto [again, endedAgain] = readLines(c.get(), 1, 10s);
  ASSERT_FALSE(endedAgain);
  EXPECT_EQ(json::parse(again).at("id"), 2);
}

TEST_F(ServerOutputTest, AClientThatStopsReadingIsDroppedOnceItsBacklogPassesTheBound) {
  UniqueFd c = connectClient();
  // Many requests and no reads: the replies pile up in the socket and then in the server's
  // queue, which must not grow past the bound and one reply.
  std::string requests;
  for (int i = 0; i < 200; ++i) requests += R"({"id":)" + std::to_string(i) + R"(,"method":"blob","params":{}})" "\n";
  sendAll(c.get(), requests);
  std::this_thread::sleep_for(1s);
  // Reading now drains what the kernel held and ends with the server's hang-up, well short of
  // the 200 replies asked for.
  std::string all;
  bool ended = false;
  for (int i = 0; i < 400 && !ended; ++i) {
    auto [got, e] = readLines(c.get(), 200, 100ms);
    all += got;
    ended = e;
  }
  EXPECT_TRUE(ended) << "the server kept a client that did not read";
  EXPECT_LT(std::count(all.begin(), all.end(), '\n'), 200);
}

}  // namespace
}  // namespace akad::test
