#pragma once
// One client connection of the socket server (server.h): reads request lines, dispatches them
// to the method table, queues and writes the replies. Lives while an async operation or the
// server's set holds it; runs on the server's io thread, except its replies' Responder, which
// any thread may call.

#include <atomic>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "daemon/server.h"

namespace akad {

class Connection : public std::enable_shared_from_this<Connection> {
 public:
  Connection(Server& server, boost::asio::local::stream_protocol::socket socket, Peer peer)
      : server_(server), socket_(std::move(socket)), peer_(peer) {}
  const Peer& peer() const { return peer_; }

  void start();
  void send(std::string line);
  void requestFinished(std::uint64_t key);
  // Server stop: no more reading; open requests are answered kShuttingDown; close once flushed.
  void drain();
  void close();
  bool closed() const { return closed_; }

 private:
  class Reply;
  void waitReadable();
  void onReadable(const boost::system::error_code& ec);
  void processInbox();
  void handleLine(std::string_view line);
  void writeQueued();
  void closeIfDrained();

  Server& server_;
  boost::asio::local::stream_protocol::socket socket_;
  Peer peer_;
  std::string inbox_;
  std::size_t scanned_ = 0;  // bytes of inbox_ already searched for '\n'
  std::deque<std::string> outbox_;
  std::vector<std::string> inFlightWrite_;
  std::size_t queuedBytes_ = 0;
  bool writing_ = false;
  bool draining_ = false;
  bool closeAfterFlush_ = false;
  bool paused_ = false;  // kMaxOpenRequests open: lines wait in inbox_, the socket is not read
  std::atomic<bool> closed_{false};
  std::uint64_t nextKey_ = 1;
  std::map<std::uint64_t, std::shared_ptr<Reply>> open_;
};

}  // namespace akad
