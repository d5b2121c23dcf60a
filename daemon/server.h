#pragma once
// The socket side of akad: a Unix stream socket speaking JSON lines (docs/protocol.md).
// One io_context thread serves every connection; a request line is read whole (up to
// protocol::kMaxLineBytes), parsed, and dispatched to the MethodTable.
//
// Start-up: listen() takes <socket>.lock (flock), refuses if a live daemon answers on the socket,
// removes a stale socket file, binds with mode 0660. Shut-down: stop() closes the listener,
// answers still-open streams with kShuttingDown, flushes every reply, then closes connections;
// io_context::run() returns once they are gone. One client's connection (reading its lines,
// writing its replies) is daemon/connection.h.

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>

#include <utility>  // Boost 1.74 asio/awaitable.hpp uses std::exchange without it under C++20
#include <boost/asio.hpp>
#include <nlohmann/json.hpp>

#include "common/protocol.h"
#include "common/result.h"
#include "common/unique_fd.h"
#include "daemon/methods.h"

namespace akad {

struct ServerOptions {
  std::filesystem::path socketPath;
  // Group that may use the socket (mode 0660); empty keeps the daemon's own group.
  std::string socketGroup;
  std::size_t maxConnections = 4096;
  std::size_t maxLineBytes = protocol::kMaxLineBytes;
  // A client that stops reading its replies is dropped when a reply comes while more than this
  // is still unwritten (one reply may be larger: it reaches a client that reads).
  std::size_t maxQueuedOutputBytes = 16 * 1024 * 1024;
  std::chrono::milliseconds drainTimeout{5000};
  // Per caller (uid): open connections and requests per second; 0 is no limit. Unset: none.
  struct PeerLimits {
    std::size_t connections = 0;
    double requestsPerSecond = 0;
  };
  std::function<PeerLimits(uid_t)> peerLimits;
};

class Connection;

class Server {
 public:
  Server(boost::asio::io_context& io, const MethodTable& methods, ServerOptions options);
  ~Server();  // removes the socket file if it is still the one we bound
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  Status listen();
  void start();
  void stop();

  nlohmann::json stats() const;
  // Connections `uid` has open now (any thread).
  std::size_t connectionsOf(uid_t uid) const;
  const std::filesystem::path& socketPath() const { return options_.socketPath; }

 private:
  friend class Connection;
  void accept();
  void acceptLater();
  void forget(const std::shared_ptr<Connection>& connection);
  void removeSocketFile();
  // Takes one request from `uid`'s allowance (a token bucket); false when it is spent.
  bool admitRequest(uid_t uid);

  boost::asio::io_context& io_;
  const MethodTable& methods_;
  ServerOptions options_;
  boost::asio::local::stream_protocol::acceptor acceptor_;
  boost::asio::steady_timer retryTimer_;
  boost::asio::steady_timer drainTimer_;
  UniqueFd lockFd_;
  bool bound_ = false;
  dev_t socketDev_ = 0;
  ino_t socketIno_ = 0;
  bool stopping_ = false;
  std::set<std::shared_ptr<Connection>> connections_;
  // Shared read buffer: the io thread reads one connection at a time, so idle connections hold
  // no buffer of their own (1000 idle clients cost kilobytes, not 64 MiB).
  std::string scratch_;
  std::uint64_t accepted_ = 0;
  std::uint64_t rejected_ = 0;
  std::uint64_t requests_ = 0;
  std::uint64_t rateLimited_ = 0;
  mutable std::mutex uidMutex_;  // connectionsByUid_ is read by handlers on other threads
  std::map<uid_t, std::size_t> connectionsByUid_;
  struct Bucket {
    double tokens = 0;
    std::chrono::steady_clock::time_point last;
  };
  std::map<uid_t, Bucket> buckets_;
};

}  // namespace akad
