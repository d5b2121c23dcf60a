#include "daemon/audit.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <set>

#include "common/log.h"
#include "common/protocol.h"
#include "daemon/store.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace akad {

namespace {

// The methods that change state for someone: always recorded.
const std::set<std::string>& mutatingMethods() {
  static const std::set<std::string> m = {"run.submit", "run.cancel", "run.reproduce", "tasks.validate", "tasks.import", "snapshot.gc"};
  return m;
}

}  // namespace

Result<std::unique_ptr<AuditLog>> AuditLog::open(const fs::path& file, Options options) {
  if (options.maxBytes == 0 || options.keep < 1) return Error{"audit log: the size limit and the number kept must be positive"};
  std::unique_ptr<AuditLog> log(new AuditLog(file, options));
  if (auto s = log->reopen(); !s) return s.error();
  return log;
}

Status AuditLog::reopen() {
  // Never through a link: the file is root's, in the (trusted) state dir.
  UniqueFd fd(::open(path_.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600));
  if (!fd.valid()) return errnoError("cannot open the audit log " + path_.string());
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) return errnoError("cannot stat the audit log " + path_.string());
  if (!S_ISREG(st.st_mode)) return Error{"the audit log " + path_.string() + " is not a regular file"};
  fd_ = std::move(fd);
  size_ = static_cast<std::uint64_t>(st.st_size);
  return {};
}

void AuditLog::rotate() {
  std::error_code ec;
  auto numbered = [&](int n) { return fs::path(path_.string() + "." + std::to_string(n)); };
  fs::remove(numbered(options_.keep), ec);
  for (int n = options_.keep - 1; n >= 1; --n)
    if (fs::exists(numbered(n), ec)) fs::rename(numbered(n), numbered(n + 1), ec);
  fs::rename(path_, numbered(1), ec);
  if (ec) log::warn("audit log: cannot rotate ", path_.string(), ": ", ec.message());
  if (auto s = reopen(); !s) log::error(s.error().message);
}

bool AuditLog::records(const std::string& method, int errorCode) {
  return mutatingMethods().count(method) > 0 || errorCode == protocol::kPermissionDenied;
}

void AuditLog::record(const Peer& peer, const std::string& method, const json& targets, int errorCode,
                      const std::string& errorMessage) {
  json line = {{"time", isoTimeUtc()}, {"uid", peer.uid},       {"pid", peer.pid},
               {"method", method},     {"targets", targets},    {"outcome", errorCode == 0 ? "ok" : "error"}};
  if (errorCode != 0) {
    line["code"] = errorCode;
    line["error"] = errorMessage.substr(0, 500);
    if (errorCode == protocol::kPermissionDenied) line["outcome"] = "denied";
  }
  // An error message may repeat the caller's text, cut above in the middle of a character: the
  // broken bytes are replaced, or the dump would throw and the request go unrecorded.
  const std::string text = line.dump(-1, ' ', false, json::error_handler_t::replace) + "\n";
  std::lock_guard lock(mutex_);
  if (size_ + text.size() > options_.maxBytes && size_ > 0) rotate();
  if (!fd_.valid()) return;
  // One write per line: O_APPEND makes it land whole at the end.
  const ssize_t n = ::write(fd_.get(), text.data(), text.size());
  if (n != static_cast<ssize_t>(text.size())) {
    log::warn("audit log: cannot write ", path_.string(), ": ", n < 0 ? std::strerror(errno) : "short write");
    return;
  }
  size_ += text.size();
}

json auditTargets(const json& params, const json* result) {
  json t = json::object();
  if (params.is_object())
    for (const char* k : {"id", "snapshot", "tasks", "agent"})
      if (params.contains(k)) t[k] = params[k];
  if (result != nullptr && result->is_object() && result->contains("run") && (*result)["run"].is_object() &&
      (*result)["run"].contains("id"))
    t["run"] = (*result)["run"]["id"];
  return t;
}

}  // namespace akad
