#pragma once
// What a tenant who is not an admin learns of held-out configurations (docs/scoring.md,
// "What a submitter learns"): each one only as an opaque id, `held_out#N` (its place in the
// task's held_out list, so stable per task version), with pass or fail, a failure class and
// a speedup. Names (which spell out shapes), seeds, sizes, timings and the held-out gates' logs
// stay with admins. Applied at the socket, to every answer and event a non-admin gets.

#include <filesystem>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "daemon/store.h"

namespace akad {

class HeldOutView {
 public:
  HeldOutView() = default;
  // The held-out names of the tasks these attempts ran (their stored task versions). A task
  // version the daemon no longer has adds no names; what it cannot map it cannot hide, so
  // such an attempt's held-out gates are still summarised.
  static HeldOutView forAttempts(const std::filesystem::path& stateDir, const std::vector<AttemptRecord>& attempts);
  // What `admin` or not sees: for an admin a view that passes everything through unchanged.
  static HeldOutView forCaller(bool admin, const std::filesystem::path& stateDir,
                               const std::vector<AttemptRecord>& attempts) {
    if (!admin) return forAttempts(stateDir, attempts);
    HeldOutView all;
    all.everything_ = true;
    return all;
  }

  // An attempt's JSON (AttemptRecord::toJson) as a non-admin sees it.
  nlohmann::json attempt(const nlohmann::json& attempt) const;
  // Any other JSON (an event, a report): every name replaced, in keys and strings.
  nlohmann::json names(const nlohmann::json& j) const;
  std::string text(std::string s) const;
  // The held-out gates of a (redacted) result, as a few lines for `akactl logs`.
  static std::string logSummary(const nlohmann::json& redactedResult);
  // "wrong output", "crash", "timeout" or "failed", from a gate's or case's reason.
  static std::string failureClass(const std::string& reason);

 private:
  bool everything_ = false;  // an admin's view: nothing hidden
  std::vector<std::pair<std::string, std::string>> names_;  // name -> id, longest name first
  nlohmann::json result(const nlohmann::json& result) const;
};

}  // namespace akad
