#include "daemon/methods.h"

#include "common/log.h"

namespace akad {

void MethodTable::add(const std::string& method, Handler handler) {
  methods_[method] = [h = std::move(handler)](const Peer& peer, const nlohmann::json& params,
                                              std::shared_ptr<Responder> responder) {
    responder->finish(h(peer, params));
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
  // Handlers report errors as Result; this only stops a stray nlohmann/std exception from
  // taking the daemon down with it.
  try {
    it->second(peer, request.params, responder);
  } catch (const std::exception& e) {
    log::error("method ", request.method, " threw: ", e.what());
    responder->finish(Error{"internal error in " + request.method + ": " + e.what(), protocol::kInternalError});
  }
}

}  // namespace akad
