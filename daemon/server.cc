#include "daemon/server.h"

#include <fcntl.h>
#include <grp.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <mutex>
#include <system_error>

#include "common/log.h"
#include "common/trusted_dir.h"
#include "daemon/connection.h"

namespace akad {

namespace asio = boost::asio;
using stream = asio::local::stream_protocol;
using nlohmann::json;

namespace {
constexpr std::size_t kReadChunk = 64 * 1024;

Status makeSocketAddress(const std::filesystem::path& path, sockaddr_un& addr) {
  addr = {};
  addr.sun_family = AF_UNIX;
  if (path.native().size() >= sizeof addr.sun_path) {
    return Error{"socket path " + path.string() + " is longer than " +
                     std::to_string(sizeof addr.sun_path - 1) + " bytes",
                 0};
  }
  std::memcpy(addr.sun_path, path.c_str(), path.native().size() + 1);
  return {};
}
}  // namespace

Server::Server(asio::io_context& io, const MethodTable& methods, ServerOptions options)
    : io_(io), methods_(methods), options_(std::move(options)), acceptor_(io), retryTimer_(io),
      drainTimer_(io), scratch_(kReadChunk, '\0') {}

Server::~Server() {
  for (const auto& c : std::set<std::shared_ptr<Connection>>(connections_)) c->close();
  removeSocketFile();
}

Status Server::listen() {
  namespace fs = std::filesystem;
  const fs::path& path = options_.socketPath;
  sockaddr_un addr{};
  if (auto s = makeSocketAddress(path, addr); !s) return s;
  std::error_code ec;
  fs::path dir = path.parent_path().empty() ? fs::path(".") : path.parent_path();
  if (!fs::exists(dir, ec)) {
    fs::create_directories(dir, ec);
    if (ec) return errorCodeError("cannot create socket directory " + dir.string(), ec);
    // Clients of every uid must reach the socket through it, whatever umask akad runs with.
    if (::chmod(dir.c_str(), 0755) != 0) return errnoError("chmod 0755 " + dir.string());
  }
  // The lock file and the socket are made here as root: nobody else may be able to plant or
  // swap entries in this directory.
  if (auto s = checkTrustedDirectory(dir); !s) return Error{"refusing socket directory: " + s.error().message, 0};
  // The lock settles races between two daemons starting at once; the probe below handles a
  // daemon that predates the lock file or runs elsewhere in the mount namespace.
  std::string lockPath = path.string() + ".lock";
  lockFd_.reset(::open(lockPath.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600));
  if (!lockFd_.valid()) return errnoError("cannot open lock file " + lockPath);
  if (::flock(lockFd_.get(), LOCK_EX | LOCK_NB) != 0) {
    if (errno == EWOULDBLOCK) {
      return Error{"another akad holds " + lockPath + " (is one already serving " + path.string() + "?)", 0};
    }
    return errnoError("flock " + lockPath);
  }
  struct stat st {};
  if (::lstat(path.c_str(), &st) == 0) {
    if (!S_ISSOCK(st.st_mode)) {
      return Error{path.string() + " exists and is not a socket; refusing to replace it", 0};
    }
    UniqueFd probe(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (!probe.valid()) return errnoError("socket(AF_UNIX)");
    if (::connect(probe.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0) {
      return Error{"another akad is already serving " + path.string() + "; refusing to start", 0};
    }
    if (errno != ECONNREFUSED && errno != ENOENT) {
      return errnoError("cannot probe existing socket " + path.string());
    }
    log::info("removing stale socket ", path.string());
    if (::unlink(path.c_str()) != 0 && errno != ENOENT) return errnoError("unlink stale socket " + path.string());
  } else if (errno != ENOENT) {
    return errnoError("lstat " + path.string());
  }
  UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!fd.valid()) return errnoError("socket(AF_UNIX)");
  // umask so the socket is never briefly wider than 0660 between bind and chmod.
  mode_t old = ::umask(0117);
  int rc = ::bind(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  int bindErr = errno;
  ::umask(old);
  if (rc != 0) return errnoError("bind " + path.string(), bindErr);
  bound_ = true;
  if (::chmod(path.c_str(), 0660) != 0) return errnoError("chmod 0660 " + path.string());
  if (!options_.socketGroup.empty()) {
    group* g = ::getgrnam(options_.socketGroup.c_str());
    if (g == nullptr) return Error{"socket group \"" + options_.socketGroup + "\" does not exist", 0};
    if (::chown(path.c_str(), static_cast<uid_t>(-1), g->gr_gid) != 0) {
      return errnoError("chown :" + options_.socketGroup + " " + path.string());
    }
  }
  if (::lstat(path.c_str(), &st) != 0) return errnoError("lstat " + path.string());
  socketDev_ = st.st_dev;
  socketIno_ = st.st_ino;
  if (::listen(fd.get(), SOMAXCONN) != 0) return errnoError("listen on " + path.string());
  boost::system::error_code aec;
  acceptor_.assign(stream(), fd.release(), aec);
  if (aec) return Error{"cannot use listening socket: " + aec.message(), 0};
  return {};
}

void Server::start() { accept(); }

void Server::accept() {
  if (stopping_) return;
  acceptor_.async_accept([this](const boost::system::error_code& ec, stream::socket socket) {
    if (stopping_ || ec == asio::error::operation_aborted) return;
    if (ec) {
      // EMFILE/ENFILE and friends: the backlog keeps the client waiting; try again shortly
      // instead of spinning on the error.
      log::warn("accept on ", options_.socketPath.string(), ": ", ec.message());
      acceptLater();
      return;
    }
    ++accepted_;
    Peer peer{};
    ucred cred{};
    socklen_t len = sizeof cred;
    if (::getsockopt(socket.native_handle(), SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0)
      peer = Peer{cred.pid, cred.uid, cred.gid};
    else
      peer.uid = static_cast<uid_t>(-1);  // unknown: owns nothing, and is no admin
    std::string refusal;
    if (connections_.size() >= options_.maxConnections) {
      refusal = "akad has " + std::to_string(connections_.size()) + " connections, its limit; try again later";
    } else if (options_.peerLimits) {
      const std::size_t limit = options_.peerLimits(peer.uid).connections;
      const std::size_t open = connectionsOf(peer.uid);
      if (limit > 0 && open >= limit)
        refusal = "uid " + std::to_string(peer.uid) + " has " + std::to_string(open) +
                  " connections open, its limit (akactl quota); close one and try again";
    }
    if (!refusal.empty()) {
      ++rejected_;
      std::string line = protocol::toLine(protocol::makeError(nullptr, protocol::kOverloaded, refusal));
      ::send(socket.native_handle(), line.data(), line.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
      boost::system::error_code cec;
      socket.close(cec);
    } else {
      auto conn = std::make_shared<Connection>(*this, std::move(socket), peer);
      connections_.insert(conn);
      {
        std::lock_guard lock(uidMutex_);
        ++connectionsByUid_[peer.uid];
      }
      conn->start();
    }
    accept();
  });
}

void Server::acceptLater() {
  retryTimer_.expires_after(std::chrono::milliseconds(50));
  retryTimer_.async_wait([this](const boost::system::error_code& ec) {
    if (!ec) accept();
  });
}

std::size_t Server::connectionsOf(uid_t uid) const {
  std::lock_guard lock(uidMutex_);
  auto it = connectionsByUid_.find(uid);
  return it == connectionsByUid_.end() ? 0 : it->second;
}

bool Server::admitRequest(uid_t uid) {
  if (!options_.peerLimits) return true;
  const double rate = options_.peerLimits(uid).requestsPerSecond;
  if (rate <= 0) return true;
  const double burst = std::max(10.0, 2 * rate);
  const auto now = std::chrono::steady_clock::now();
  auto [it, fresh] = buckets_.try_emplace(uid, Bucket{burst, now});
  Bucket& b = it->second;
  if (!fresh) {
    b.tokens = std::min(burst, b.tokens + rate * std::chrono::duration<double>(now - b.last).count());
    b.last = now;
  }
  if (b.tokens < 1) {
    ++rateLimited_;
    return false;
  }
  b.tokens -= 1;
  return true;
}

void Server::forget(const std::shared_ptr<Connection>& connection) {
  if (connections_.erase(connection) != 0) {
    std::lock_guard lock(uidMutex_);
    auto it = connectionsByUid_.find(connection->peer().uid);
    // The uid's request allowance stays: reconnecting must not refill it.
    if (it != connectionsByUid_.end() && --it->second == 0) connectionsByUid_.erase(it);
  }
  if (stopping_ && connections_.empty()) drainTimer_.cancel();
}

void Server::stop() {
  if (stopping_) return;
  stopping_ = true;
  boost::system::error_code ec;
  acceptor_.close(ec);
  retryTimer_.cancel();
  // No new client may connect to a daemon that is going away.
  removeSocketFile();
  log::info("stopping: draining ", connections_.size(), " connection(s)");
  for (const auto& c : std::set<std::shared_ptr<Connection>>(connections_)) c->drain();
  if (connections_.empty()) return;
  drainTimer_.expires_after(options_.drainTimeout);
  drainTimer_.async_wait([this](const boost::system::error_code& tec) {
    if (tec) return;
    log::warn("drain timed out; closing ", connections_.size(), " connection(s)");
    for (const auto& c : std::set<std::shared_ptr<Connection>>(connections_)) c->close();
  });
}

void Server::removeSocketFile() {
  if (!bound_) return;
  bound_ = false;
  struct stat st {};
  // Only our own socket: a successor daemon may already have bound a new one at this path.
  if (::lstat(options_.socketPath.c_str(), &st) == 0 && st.st_dev == socketDev_ && st.st_ino == socketIno_) {
    ::unlink(options_.socketPath.c_str());
  }
}

json Server::stats() const {
  return json{{"open", connections_.size()},
              {"accepted", accepted_},
              {"rejected", rejected_},
              {"requests", requests_},
              {"rate_limited", rateLimited_}};
}

}  // namespace akad
