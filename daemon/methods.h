#pragma once
// The method table: protocol method name -> handler. The server parses a request and
// dispatches it here; each group's file registers its methods with add(), addOffloaded() or
// addStream() at start-up (daemon_methods.cc, run_methods.cc, and the groups
// pipeline_methods.h lists).

#include <sys/types.h>

#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/protocol.h"
#include "common/result.h"

namespace akad {

// The client process, as the kernel reports it through SO_PEERCRED.
struct Peer {
  pid_t pid = 0;
  uid_t uid = 0;
  gid_t gid = 0;
};

// The answer channel of one request. Thread-safe: a streaming handler may keep it and call it
// from any thread. Everything is ignored once finished or once the client has gone.
class Responder {
 public:
  virtual ~Responder() = default;
  // A streamed {"id", "event": ...} message.
  virtual void event(const nlohmann::json& event) = 0;
  // The final {"id", "result"} or {"id", "error"}; only the first call counts.
  virtual void finish(const Result<nlohmann::json>& outcome) = 0;
  // True once finished or the client disconnected: stop producing.
  virtual bool done() const = 0;
  // Keeps `resource` (e.g. an event subscription) alive until the request is finished or the
  // connection closes, whichever comes first.
  virtual void hold(std::shared_ptr<void> resource) = 0;
};

// Plain request/response: runs on the server thread, returns the result or an Error whose code
// is a protocol code (0 becomes kInternalError).
using Handler = std::function<Result<nlohmann::json>(const Peer& peer, const nlohmann::json& params)>;
// Streaming: must eventually call responder->finish() (or see done() turn true).
using StreamHandler =
    std::function<void(const Peer& peer, const nlohmann::json& params, std::shared_ptr<Responder> responder)>;

class AuditLog;

// A few threads for handlers that read files, hash task trees or import them: they run there,
// not on the server's one I/O thread, so a client that sends many of them delays nobody's
// ping. Jobs start in the order they came; stop() drops those not started (the server's
// drain answers their requests) and joins.
class WorkPool {
 public:
  explicit WorkPool(int threads);
  ~WorkPool() { stop(); }
  WorkPool(const WorkPool&) = delete;
  WorkPool& operator=(const WorkPool&) = delete;
  // False once stopping: the job was not taken.
  bool post(std::function<void()> job);
  void stop();

 private:
  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<std::function<void()>> jobs_;
  bool stopping_ = false;
  std::vector<std::thread> threads_;
};

class MethodTable {
 public:
  // Handlers added with addOffloaded run on this pool (inline when none is set).
  void setWorkPool(WorkPool* pool) { pool_ = pool; }
  void addOffloaded(const std::string& method, Handler handler);
  // Requests that change something, and refusals of any, are recorded there (may be null).
  void setAuditLog(AuditLog* log) { audit_ = log; }
  void add(const std::string& method, Handler handler);
  void addStream(const std::string& method, StreamHandler handler);
  bool has(const std::string& method) const { return methods_.count(method) != 0; }
  std::vector<std::string> names() const;

  // Unknown methods get kMethodNotFound; handler errors without a code get kInternalError.
  void dispatch(const protocol::Request& request, const Peer& peer,
                const std::shared_ptr<Responder>& responder) const;

 private:
  std::map<std::string, StreamHandler> methods_;
  AuditLog* audit_ = nullptr;
  WorkPool* pool_ = nullptr;
};

}  // namespace akad
