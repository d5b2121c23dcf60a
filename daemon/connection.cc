#include "daemon/connection.h"

#include <sys/socket.h>

#include <mutex>

#include "common/log.h"

namespace akad {

namespace asio = boost::asio;
using stream = asio::local::stream_protocol;
using nlohmann::json;

namespace {
constexpr std::size_t kKeepBufferBytes = 64 * 1024;
// Requests one connection may have open at once; past it the server reads no more of its lines
// until one is answered, so a client that pipelines thousands gets no bigger share of the work
// pool than this.
constexpr std::size_t kMaxOpenRequests = 32;
}  // namespace

// The Responder handed to method handlers. Callable from any thread: it posts to the io thread.
class Connection::Reply : public Responder {
 public:
  Reply(asio::io_context& io, std::weak_ptr<Connection> conn, json id, std::uint64_t key)
      : io_(io), conn_(std::move(conn)), id_(std::move(id)), key_(key) {}

  void event(const json& event) override {
    if (done()) return;
    post(protocol::toLine(protocol::makeEvent(id_, event)), false);
  }

  void finish(const Result<json>& outcome) override {
    if (finished_.exchange(true)) return;
    json msg;
    if (outcome) {
      msg = protocol::makeResult(id_, *outcome);
    } else {
      int code = outcome.error().code != 0 ? outcome.error().code : protocol::kInternalError;
      if (code == protocol::kInternalError) log::error("request ", id_.dump(), ": ", outcome.error().message);
      msg = protocol::makeError(id_, code, outcome.error().message);
    }
    post(protocol::toLine(msg), true);
  }

  bool done() const override {
    if (finished_) return true;
    auto c = conn_.lock();
    return !c || c->closed();
  }

  void hold(std::shared_ptr<void> resource) override {
    std::lock_guard lock(mutex_);
    held_.push_back(std::move(resource));
  }

  void release() {
    std::vector<std::shared_ptr<void>> held;
    {
      std::lock_guard lock(mutex_);
      held.swap(held_);
    }
  }

 private:
  void post(std::string line, bool last) {
    asio::post(io_, [conn = conn_, line = std::move(line), last, key = key_]() mutable {
      auto c = conn.lock();
      if (!c || c->closed()) return;
      c->send(std::move(line));
      if (last) c->requestFinished(key);
    });
  }

  asio::io_context& io_;
  std::weak_ptr<Connection> conn_;
  json id_;
  std::uint64_t key_;
  std::atomic<bool> finished_{false};
  std::mutex mutex_;
  std::vector<std::shared_ptr<void>> held_;
};

void Connection::start() {
  boost::system::error_code ec;
  socket_.non_blocking(true, ec);
  waitReadable();
}

void Connection::waitReadable() {
  if (closed_ || draining_ || closeAfterFlush_) return;
  socket_.async_wait(stream::socket::wait_read,
                     [self = shared_from_this()](const boost::system::error_code& ec) { self->onReadable(ec); });
}

void Connection::onReadable(const boost::system::error_code& ec) {
  if (closed_) return;
  if (ec) {
    if (ec != asio::error::operation_aborted) close();
    return;
  }
  if (draining_) return;
  std::string& scratch = server_.scratch_;
  boost::system::error_code rec;
  std::size_t n = socket_.read_some(asio::buffer(scratch.data(), scratch.size()), rec);
  if (rec == asio::error::would_block || rec == asio::error::try_again) {
    waitReadable();
    return;
  }
  if (rec) {
    // EOF or reset: the client went away, possibly mid-line; a partial request is dropped.
    if (!inbox_.empty()) log::debug("client pid ", peer_.pid, " disconnected mid-request");
    close();
    return;
  }
  inbox_.append(scratch.data(), n);
  processInbox();
}

void Connection::processInbox() {
  std::size_t start = 0;
  for (;;) {
    if (open_.size() >= kMaxOpenRequests) {
      paused_ = true;
      break;
    }
    std::size_t nl = inbox_.find('\n', std::max(scanned_, start));
    if (nl == std::string::npos) break;
    std::string_view line(inbox_.data() + start, nl - start);
    start = nl + 1;
    scanned_ = start;
    if (line.size() > server_.options_.maxLineBytes) {
      send(protocol::toLine(protocol::makeError(
          nullptr, protocol::kRequestTooLarge,
          "request line is " + std::to_string(line.size()) + " bytes; the limit is " +
              std::to_string(server_.options_.maxLineBytes) + " (closing the connection)")));
      closeAfterFlush_ = true;
      break;
    }
    handleLine(line);
    if (closed_) return;
  }
  inbox_.erase(0, start);
  if (paused_) {
    scanned_ = 0;  // whole lines may wait behind the pause
    return;         // resumed by requestFinished
  }
  scanned_ = inbox_.size();
  if (!closeAfterFlush_ && inbox_.size() > server_.options_.maxLineBytes) {
    log::warn("client pid ", peer_.pid, " uid ", peer_.uid, " sent a line over ",
              server_.options_.maxLineBytes, " bytes; dropping it");
    send(protocol::toLine(protocol::makeError(
        nullptr, protocol::kRequestTooLarge,
        "request line exceeds " + std::to_string(server_.options_.maxLineBytes) +
            " bytes (closing the connection)")));
    closeAfterFlush_ = true;
  }
  if (closeAfterFlush_) {
    inbox_.clear();
    inbox_.shrink_to_fit();
    closeIfDrained();
    return;
  }
  if (inbox_.capacity() > kKeepBufferBytes && inbox_.size() < kKeepBufferBytes / 2) inbox_.shrink_to_fit();
  waitReadable();
}

void Connection::handleLine(std::string_view line) {
  while (!line.empty() && (line.back() == '\r' || line.back() == ' ' || line.back() == '\t')) {
    line.remove_suffix(1);
  }
  if (line.empty()) return;
  ++server_.requests_;
  json id;
  auto req = protocol::parseRequest(line, id);
  if (!req) {
    send(protocol::toLine(protocol::makeError(id, req.error().code, req.error().message)));
    return;
  }
  if (draining_) {
    send(protocol::toLine(protocol::makeError(req->id, protocol::kShuttingDown, "akad is shutting down")));
    return;
  }
  if (!server_.admitRequest(peer_.uid)) {
    send(protocol::toLine(protocol::makeError(
        req->id, protocol::kRateLimited,
        "uid " + std::to_string(peer_.uid) + " sent more requests per second than its limit; slow down (akactl quota)")));
    return;
  }
  std::uint64_t key = nextKey_++;
  auto reply = std::make_shared<Reply>(server_.io_, weak_from_this(), req->id, key);
  open_[key] = reply;
  server_.methods_.dispatch(*req, peer_, reply);
}

void Connection::send(std::string line) {
  if (closed_) return;
  // The bound is on what is still unwritten when a new line comes: a client that has stopped
  // reading is dropped, while one reply larger than the bound still reaches a client that reads
  // it (the queue then holds at most the bound and one line).
  if (queuedBytes_ > server_.options_.maxQueuedOutputBytes) {
    log::warn("client pid ", peer_.pid, " uid ", peer_.uid, " is not reading its replies (",
              queuedBytes_, " bytes queued); dropping it");
    close();
    return;
  }
  queuedBytes_ += line.size();
  outbox_.push_back(std::move(line));
  if (!writing_) writeQueued();
}

void Connection::writeQueued() {
  if (outbox_.empty() || closed_) return;
  writing_ = true;
  inFlightWrite_.clear();
  while (!outbox_.empty()) {
    inFlightWrite_.push_back(std::move(outbox_.front()));
    outbox_.pop_front();
  }
  std::vector<asio::const_buffer> buffers;
  buffers.reserve(inFlightWrite_.size());
  for (const auto& s : inFlightWrite_) buffers.emplace_back(asio::buffer(s));
  asio::async_write(socket_, buffers,
                    [self = shared_from_this()](const boost::system::error_code& ec, std::size_t n) {
                      self->writing_ = false;
                      self->queuedBytes_ -= std::min(self->queuedBytes_, n);
                      self->inFlightWrite_.clear();
                      if (ec) {
                        self->close();
                        return;
                      }
                      if (!self->outbox_.empty()) self->writeQueued();
                      else self->closeIfDrained();
                    });
}

void Connection::requestFinished(std::uint64_t key) {
  auto it = open_.find(key);
  if (it == open_.end()) return;
  auto reply = it->second;
  open_.erase(it);
  reply->release();
  if (paused_ && !closed_ && !draining_ && open_.size() < kMaxOpenRequests) {
    paused_ = false;
    processInbox();
  }
  closeIfDrained();
}

void Connection::drain() {
  draining_ = true;
  for (auto& [key, reply] : open_) {
    reply->finish(Error{"akad is shutting down", protocol::kShuttingDown});
  }
  closeIfDrained();
}

void Connection::closeIfDrained() {
  if (closed_ || writing_ || !outbox_.empty()) return;
  if (closeAfterFlush_ || (draining_ && open_.empty())) close();
}

void Connection::close() {
  if (closed_.exchange(true)) return;
  boost::system::error_code ec;
  socket_.shutdown(stream::socket::shutdown_both, ec);
  socket_.close(ec);
  auto open = std::move(open_);
  open_.clear();
  for (auto& [key, reply] : open) reply->release();
  outbox_.clear();
  server_.forget(shared_from_this());
}

}  // namespace akad
