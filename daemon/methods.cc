#include "daemon/methods.h"

#include <atomic>

#include "common/log.h"
#include "daemon/audit.h"

namespace akad {

namespace {

// Passes everything through, and writes the request's audit line when it finishes.
class AuditingResponder : public Responder {
 public:
  AuditingResponder(std::shared_ptr<Responder> inner, AuditLog& log, const Peer& peer, std::string method,
                    nlohmann::json params)
      : inner_(std::move(inner)), log_(log), peer_(peer), method_(std::move(method)), params_(std::move(params)) {}
  void event(const nlohmann::json& event) override { inner_->event(event); }
  void finish(const Result<nlohmann::json>& outcome) override {
    if (!recorded_.exchange(true)) {
      const int code = outcome ? 0 : (outcome.error().code != 0 ? outcome.error().code : protocol::kInternalError);
      if (AuditLog::records(method_, code))
        log_.record(peer_, method_, auditTargets(params_, outcome ? &*outcome : nullptr), code,
                    outcome ? std::string() : outcome.error().message);
    }
    inner_->finish(outcome);
  }
  bool done() const override { return inner_->done(); }
  void hold(std::shared_ptr<void> resource) override { inner_->hold(std::move(resource)); }

 private:
  std::shared_ptr<Responder> inner_;
  AuditLog& log_;
  Peer peer_;
  std::string method_;
  nlohmann::json params_;
  std::atomic<bool> recorded_{false};
};

}  // namespace

void MethodTable::add(const std::string& method, Handler handler) {
  methods_[method] = [h = std::move(handler)](const Peer& peer, const nlohmann::json& params,
                                              std::shared_ptr<Responder> responder) {
    responder->finish(h(peer, params));
  };
}

WorkPool::WorkPool(int threads) {
  for (int i = 0; i < threads; ++i)
    threads_.emplace_back([this] {
      for (;;) {
        std::function<void()> job;
        {
          std::unique_lock lock(mutex_);
          wake_.wait(lock, [this] { return stopping_ || !jobs_.empty(); });
          if (stopping_) return;
          job = std::move(jobs_.front());
          jobs_.pop_front();
        }
        job();
      }
    });
}

bool WorkPool::post(std::function<void()> job) {
  {
    std::lock_guard lock(mutex_);
    if (stopping_) return false;
    jobs_.push_back(std::move(job));
  }
  wake_.notify_one();
  return true;
}

void WorkPool::stop() {
  {
    std::lock_guard lock(mutex_);
    if (stopping_ && threads_.empty()) return;
    stopping_ = true;
    jobs_.clear();
  }
  wake_.notify_all();
  for (auto& t : threads_) t.join();
  threads_.clear();
}

void MethodTable::addOffloaded(const std::string& method, Handler handler) {
  methods_[method] = [this, method, h = std::move(handler)](const Peer& peer, const nlohmann::json& params,
                                                            std::shared_ptr<Responder> responder) {
    auto run = [method, h, peer, params, responder] {
      try {
        responder->finish(h(peer, params));
      } catch (const std::exception& e) {
        log::error("method ", method, " threw: ", e.what());
        responder->finish(Error{"internal error in " + method + ": " + e.what(), protocol::kInternalError});
      }
    };
    if (pool_ == nullptr) return run();
    if (!pool_->post(run)) responder->finish(Error{"akad is shutting down", protocol::kShuttingDown});
  };
}

void MethodTable::addStream(const std::string& method, StreamHandler handler) {
  methods_[method] = std::move(handler);
}

std::vector<std::string> MethodTable::names() const {
  std::vector<std::string> out;
  for (const auto& [name, h] : methods_) out.push_back(name);
  return out;
}

void MethodTable::dispatch(const protocol::Request& request, const Peer& peer,
                           const std::shared_ptr<Responder>& responder) const {
  auto it = methods_.find(request.method);
  if (it == methods_.end()) {
    responder->finish(Error{"unknown method \"" + request.method + "\"", protocol::kMethodNotFound});
    return;
  }
  log::debug("request ", request.method, " from uid ", peer.uid, " pid ", peer.pid);
  std::shared_ptr<Responder> r = responder;
  if (audit_ != nullptr) {
    r = std::make_shared<AuditingResponder>(responder, *audit_, peer, request.method, request.params);
    // Streaming handlers keep only a weak reference to their responder: the connection's
    // responder keeps the wrapper alive until the request is finished.
    responder->hold(r);
  }
  // Handlers report errors as Result; this only stops a stray nlohmann/std exception from
  // taking the daemon down with it.
  try {
    it->second(peer, request.params, r);
  } catch (const std::exception& e) {
    log::error("method ", request.method, " threw: ", e.what());
    r->finish(Error{"internal error in " + request.method + ": " + e.what(), protocol::kInternalError});
  }
}

}  // namespace akad
