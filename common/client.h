#pragma once
// A blocking client for akad's JSON-lines protocol, used by akactl and the tests/benchmarks.
// Errors: the daemon's own error (Error::code is its protocol code), or kUnreachable when the
// socket cannot be reached or the connection breaks (message names the socket).

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "common/result.h"
#include "common/unique_fd.h"

namespace akad {

class Client {
 public:
  // Responses can be larger than requests (a long run list); this bounds what we buffer.
  static constexpr std::size_t kMaxResponseBytes = 64 * 1024 * 1024;

  static Result<Client> connect(const std::filesystem::path& socketPath);

  // Sends one request and waits for its response; returns "result" or the daemon's error.
  Result<nlohmann::json> call(std::string_view method, const nlohmann::json& params = {});

  // Like call(), for streaming methods (run.watch): every {"event"} message goes to onEvent
  // until the final response arrives.
  Result<nlohmann::json> stream(std::string_view method, const nlohmann::json& params,
                                const std::function<void(const nlohmann::json& event)>& onEvent);

  const std::filesystem::path& socketPath() const { return path_; }

 private:
  Client(UniqueFd fd, std::filesystem::path path) : fd_(std::move(fd)), path_(std::move(path)) {}
  Status sendLine(const std::string& line);
  Result<nlohmann::json> readMessage();
  Error broken(const std::string& what, int err) const;

  UniqueFd fd_;
  std::filesystem::path path_;
  std::string buffer_;
  std::int64_t nextId_ = 1;
};

}  // namespace akad
