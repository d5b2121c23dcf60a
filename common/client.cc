#include "common/client.h"

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "common/protocol.h"

namespace akad {

using nlohmann::json;

Error Client::broken(const std::string& what, int err) const {
  std::string msg = what + " akad at " + path_.string();
  if (err != 0) msg += std::string(": ") + std::strerror(err);
  return Error{msg, protocol::kUnreachable};
}

Result<Client> Client::connect(const std::filesystem::path& socketPath) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  const std::string& p = socketPath.native();
  if (p.size() >= sizeof addr.sun_path) {
    return Error{"socket path " + p + " is longer than " + std::to_string(sizeof addr.sun_path - 1) +
                     " bytes",
                 protocol::kUnreachable};
  }
  std::memcpy(addr.sun_path, p.c_str(), p.size() + 1);
  UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd.valid()) return Error{errnoError("socket(AF_UNIX)").message, protocol::kUnreachable};
  int rc;
  do {
    rc = ::connect(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  } while (rc != 0 && errno == EINTR);
  if (rc != 0) {
    Client probe(UniqueFd(), socketPath);
    return probe.broken("cannot connect to", errno);
  }
  // Whoever listens on the path gets the requests, credentials included: only root's daemon
  // (or one the caller runs itself) may. Another user could have bound the path first.
  ucred peer{};
  socklen_t len = sizeof peer;
  if (::getsockopt(fd.get(), SOL_SOCKET, SO_PEERCRED, &peer, &len) != 0)
    return Error{errnoError("cannot tell who serves " + p).message, protocol::kUnreachable};
  if (peer.uid != 0 && peer.uid != ::geteuid())
    return Error{"refusing to talk to " + p + ": it is served by uid " + std::to_string(peer.uid) +
                     " (pid " + std::to_string(peer.pid) + "), neither root nor you, so it is not an akad to trust",
                 protocol::kUnreachable};
  return Client(std::move(fd), socketPath);
}

Status Client::sendLine(const std::string& line) {
  std::size_t off = 0;
  while (off < line.size()) {
    ssize_t n = ::send(fd_.get(), line.data() + off, line.size() - off, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      return broken("lost the connection to", errno);
    }
    off += static_cast<std::size_t>(n);
  }
  return {};
}

Result<json> Client::readMessage() {
  for (;;) {
    auto nl = buffer_.find('\n');
    if (nl != std::string::npos) {
      json msg = json::parse(buffer_.begin(), buffer_.begin() + static_cast<std::ptrdiff_t>(nl),
                             nullptr, false);
      buffer_.erase(0, nl + 1);
      if (msg.is_discarded() || !msg.is_object()) {
        return Error{"akad at " + path_.string() + " sent a line that is not a JSON object",
                     protocol::kUnreachable};
      }
      return msg;
    }
    if (buffer_.size() > kMaxResponseBytes) {
      return Error{"akad at " + path_.string() + " sent a response over " +
                       std::to_string(kMaxResponseBytes) + " bytes",
                   protocol::kUnreachable};
    }
    char chunk[65536];
    ssize_t n = ::recv(fd_.get(), chunk, sizeof chunk, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      return broken("lost the connection to", errno);
    }
    if (n == 0) return broken("connection closed by", 0);
    buffer_.append(chunk, static_cast<std::size_t>(n));
  }
}

Result<json> Client::call(std::string_view method, const json& params) {
  return stream(method, params, [](const json&) {});
}

Result<json> Client::stream(std::string_view method, const json& params,
                            const std::function<void(const json&)>& onEvent) {
  if (!fd_.valid()) return broken("not connected to", 0);
  json id = nextId_++;
  auto sent = sendLine(protocol::toLine(
      protocol::makeRequest(id, method, params.is_null() ? json::object() : params)));
  if (!sent) return sent.error();
  for (;;) {
    auto msg = readMessage();
    if (!msg) return msg.error();
    const json& m = *msg;
    // Errors about unreadable requests carry id null; they still answer us.
    auto mid = m.find("id");
    if (mid == m.end() || (*mid != id && !mid->is_null())) continue;
    if (auto ev = m.find("event"); ev != m.end()) {
      onEvent(*ev);
      continue;
    }
    if (auto res = m.find("result"); res != m.end()) return *res;
    if (auto err = m.find("error"); err != m.end() && err->is_object()) {
      auto c = err->find("code");
      auto t = err->find("message");
      int code = (c != err->end() && c->is_number_integer()) ? c->get<int>() : protocol::kInternalError;
      std::string message = (t != err->end() && t->is_string()) ? t->get<std::string>() : "(no message)";
      return Error{message, code};
    }
    return Error{"akad at " + path_.string() + " sent a response without result or error",
                 protocol::kUnreachable};
  }
}

}  // namespace akad
