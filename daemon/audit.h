#pragma once
// The audit log (docs/operations.md, "Audit log"): one JSON line per request that changes
// something (a submission, a cancel, a re-score, a validation, a collection) and per refusal
// of any request (-32003), with time, caller (uid, pid), method, the ids it named or made, and
// the outcome. Append-only: opened O_APPEND in the state dir, never rewritten; when it passes
// its size limit it is renamed to .1 (older ones shift up to .N, the oldest dropped) and a new
// one begun.

#include <cstdint>
#include <filesystem>
#include <mutex>
#include <string>

#include <nlohmann/json.hpp>

#include "common/result.h"
#include "common/unique_fd.h"
#include "daemon/methods.h"

namespace akad {

class AuditLog {
 public:
  struct Options {
    std::uint64_t maxBytes = 64ull << 20;  // rotate past this
    int keep = 5;                          // audit.log.1 .. audit.log.<keep>
  };
  static Result<std::unique_ptr<AuditLog>> open(const std::filesystem::path& file, Options options);
  static Result<std::unique_ptr<AuditLog>> open(const std::filesystem::path& file) { return open(file, Options{}); }

  // Whether a request to `method` that ended with `errorCode` (0: success) is recorded.
  static bool records(const std::string& method, int errorCode);
  // Records one request; thread-safe. Problems writing are logged, never thrown: a full disk
  // must not stop the daemon from answering.
  void record(const Peer& peer, const std::string& method, const nlohmann::json& targets, int errorCode,
              const std::string& errorMessage);

  const std::filesystem::path& path() const { return path_; }

 private:
  AuditLog(std::filesystem::path path, Options options) : path_(std::move(path)), options_(options) {}
  Status reopen();
  void rotate();

  std::filesystem::path path_;
  Options options_;
  std::mutex mutex_;
  UniqueFd fd_;
  std::uint64_t size_ = 0;
};

// The ids a request names or made, for its audit line: from the parameters (id, snapshot,
// tasks) and the result (the new run's id).
nlohmann::json auditTargets(const nlohmann::json& params, const nlohmann::json* result);

}  // namespace akad
