// The executor's writes to the store (claims, stages, ends, requeues, recovery) and the
// snapshot references the snapshot store's collection asks for.
#include "daemon/store.h"

#include "common/protocol.h"
#include "common/time_text.h"
#include "daemon/store_internal.h"

namespace akad {

using nlohmann::json;

Result<EventRecord> Store::attemptStateEvent(const AttemptRecord& a, const std::string& state, const json& extra) {
  json data = {{"state", state}, {"task", a.taskId}, {"attempt_index", a.attemptIndex}};
  for (auto& [k, v] : extra.items()) data[k] = v;
  return insertEvent(a.runId, a.id, "attempt.state", data);
}

// A run whose attempts have all ended is done (unless it was cancelled, which already ended it).
Result<std::vector<EventRecord>> Store::completeRunIfDone(const std::string& runId) {
  auto run = loadRun(runId);
  if (!run) return run.error();
  if (isTerminalRunState(run->state)) return std::vector<EventRecord>{};
  if (run->counts.queued + run->counts.running > 0) return std::vector<EventRecord>{};
  const std::string now = isoTimeUtc();
  auto up = db_.prepare("UPDATE runs SET state = 'done', updated_at = ?, ended_at = ? WHERE id = ?");
  if (!up) return up.error();
  if (auto s = up->bind(1, now).bind(2, now).bind(3, runId).run(); !s) return s.error();
  auto ev = insertEvent(runId, std::nullopt, "run.state", json{{"state", "done"}, {"previous", run->state}});
  if (!ev) return ev.error();
  return std::vector<EventRecord>{*ev};
}

Result<std::pair<std::optional<AttemptRecord>, std::vector<EventRecord>>> Store::claimNextAttempt(
    const std::function<bool(const AttemptRecord&)>& eligible) {
  return claimAttempt([&](const std::vector<QueuedAttempt>& queued) -> std::optional<std::size_t> {
    for (std::size_t i = 0; i < queued.size(); ++i)
      if (eligible(queued[i].attempt)) return i;
    return std::nullopt;
  });
}

Result<std::pair<std::optional<AttemptRecord>, std::vector<EventRecord>>> Store::claimAttempt(
    const AttemptChooser& choose) {
  std::lock_guard lock(mutex_);
  auto tx = sqlite::Transaction::begin(db_);
  if (!tx) return tx.error();
  auto queuedRecords = queryAttempts(
      "state = 'queued' AND run_id IN (SELECT id FROM runs WHERE state IN ('queued','running')) ORDER BY id", "");
  if (!queuedRecords) return queuedRecords.error();
  std::vector<QueuedAttempt> queued;
  queued.reserve(queuedRecords->size());
  {
    std::map<std::string, std::int64_t> owners;  // run id -> submitter
    auto st = db_.prepare("SELECT id, submitter_uid FROM runs WHERE state IN ('queued','running')");
    if (!st) return st.error();
    for (;;) {
      auto row = st->step();
      if (!row) return row.error();
      if (!*row) break;
      owners[st->text(0)] = st->integer(1);
    }
    for (AttemptRecord& a : *queuedRecords) {
      const std::int64_t uid = owners.count(a.runId) ? owners[a.runId] : -1;
      queued.push_back(QueuedAttempt{std::move(a), uid});
    }
  }
  if (auto chosen = choose(queued); chosen && *chosen < queued.size()) {
    AttemptRecord& a = queued[*chosen].attempt;
    const std::string now = isoTimeUtc();
    auto up = db_.prepare("UPDATE attempts SET state = 'running', started_at = ?, error = NULL WHERE id = ?");
    if (!up) return up.error();
    if (auto s = up->bind(1, now).bind(2, a.id).run(); !s) return s.error();
    std::vector<EventRecord> events;
    auto run = loadRun(a.runId);
    if (!run) return run.error();
    if (run->state == "queued") {
      auto r = db_.prepare("UPDATE runs SET state = 'running', updated_at = ? WHERE id = ?");
      if (!r) return r.error();
      if (auto s = r->bind(1, now).bind(2, a.runId).run(); !s) return s.error();
      auto ev = insertEvent(a.runId, std::nullopt, "run.state", json{{"state", "running"}, {"previous", "queued"}});
      if (!ev) return ev.error();
      events.push_back(*ev);
    }
    auto ev = attemptStateEvent(a, "running", json::object());
    if (!ev) return ev.error();
    events.push_back(*ev);
    if (auto s = tx->commit(); !s) return s.error();
    a.state = "running";
    a.startedAt = now;
    return std::make_pair(std::optional<AttemptRecord>(a), events);
  }
  return std::make_pair(std::optional<AttemptRecord>(), std::vector<EventRecord>{});
}

Result<std::map<std::int64_t, TenantUsage>> Store::tenantUsage(const std::string& sinceIso) {
  std::lock_guard lock(mutex_);
  std::map<std::int64_t, TenantUsage> out;
  const std::string now = isoTimeUtc();
  // Times are ISO 8601 in one format, so text order is time order; julianday reads them.
  auto st = db_.prepare(
      "SELECT r.submitter_uid, SUM(a.state = 'queued'), SUM(a.state = 'running'), "
      "CAST(SUM(CASE WHEN a.started_at IS NULL THEN 0 ELSE "
      "  MAX(0, julianday(COALESCE(a.ended_at, ?1)) - julianday(MAX(a.started_at, ?2))) END) * 86400000 AS INTEGER) "
      "FROM attempts a JOIN runs r ON r.id = a.run_id "
      "WHERE a.state IN ('queued','running') OR a.ended_at > ?2 GROUP BY r.submitter_uid");
  if (!st) return st.error();
  st->bind(1, now).bind(2, sinceIso);
  for (;;) {
    auto row = st->step();
    if (!row) return row.error();
    if (!*row) break;
    TenantUsage& u = out[st->integer(0)];
    u.queued = st->integer(1);
    u.running = st->integer(2);
    u.attempt_seconds = static_cast<double>(st->integer(3)) / 1000;
  }
  auto gpu = db_.prepare("SELECT uid, SUM(ms) FROM gpu_usage WHERE ended_at > ? GROUP BY uid");
  if (!gpu) return gpu.error();
  gpu->bind(1, sinceIso);
  for (;;) {
    auto row = gpu->step();
    if (!row) return row.error();
    if (!*row) break;
    out[gpu->integer(0)].gpu_seconds = static_cast<double>(gpu->integer(1)) / 1000;
  }
  return out;
}

Status Store::recordGpuUsage(std::int64_t attemptId, std::int64_t uid, double seconds) {
  std::lock_guard lock(mutex_);
  auto ins = db_.prepare("INSERT INTO gpu_usage (attempt_id, uid, ended_at, ms) VALUES (?, ?, ?, ?)");
  if (!ins) return ins.error();
  return ins->bind(1, attemptId).bind(2, uid).bind(3, isoTimeUtc())
      .bind(4, static_cast<std::int64_t>(seconds * 1000)).run();
}

// Callers hold the mutex.
Result<AttemptRecord> Store::loadAttempt(std::int64_t attemptId) {
  auto found = queryAttempts("id = ?", std::to_string(attemptId));
  if (!found) return found.error();
  if (found->empty()) return Error{"no attempt with id " + std::to_string(attemptId), protocol::kNotFound};
  return found->front();
}

Result<AttemptRecord> Store::getAttempt(std::int64_t attemptId) {
  std::lock_guard lock(mutex_);
  return loadAttempt(attemptId);
}

// One column of a running attempt changes, with the event that says so, in one transaction.
// `column` is one of the callers' fixed names, never user input.
Result<RunChange> Store::setAttemptColumn(std::int64_t attemptId, const char* column, const std::string& value,
                                          const std::string& eventKind, const std::string& eventKey) {
  std::lock_guard lock(mutex_);
  auto tx = sqlite::Transaction::begin(db_);
  if (!tx) return tx.error();
  auto found = loadAttempt(attemptId);
  if (!found) return found.error();
  auto up = db_.prepare(std::string("UPDATE attempts SET ") + column + " = ? WHERE id = ?");
  if (!up) return up.error();
  if (auto s = up->bind(1, value).bind(2, attemptId).run(); !s) return s.error();
  const AttemptRecord& a = *found;
  auto ev = insertEvent(a.runId, a.id, eventKind, json{{eventKey, value}, {"task", a.taskId}});
  if (!ev) return ev.error();
  auto run = loadRun(a.runId);
  if (!run) return run.error();
  if (auto s = tx->commit(); !s) return s.error();
  return RunChange{std::move(*run), {*ev}};
}

Result<RunChange> Store::setAttemptStage(std::int64_t attemptId, const std::string& stage) {
  return setAttemptColumn(attemptId, "stage", stage, "attempt.stage", "stage");
}

Result<RunChange> Store::setAttemptExecutor(std::int64_t attemptId, const std::string& job, const std::string& node) {
  std::lock_guard lock(mutex_);
  auto tx = sqlite::Transaction::begin(db_);
  if (!tx) return tx.error();
  auto found = loadAttempt(attemptId);
  if (!found) return found.error();
  auto up = db_.prepare("UPDATE attempts SET executor_job = ?, executor_node = ? WHERE id = ?");
  if (!up) return up.error();
  std::optional<std::string> nodeText;
  if (!node.empty()) nodeText = node;
  if (auto s = up->bind(1, job).bind(2, nodeText).bind(3, attemptId).run(); !s) return s.error();
  auto ev = insertEvent(found->runId, found->id, "attempt.executor",
                        json{{"job", job}, {"node", nodeText ? json(*nodeText) : json(nullptr)}, {"task", found->taskId}});
  if (!ev) return ev.error();
  auto run = loadRun(found->runId);
  if (!run) return run.error();
  if (auto s = tx->commit(); !s) return s.error();
  return RunChange{std::move(*run), {*ev}};
}

Result<RunChange> Store::setAttemptSnapshot(std::int64_t attemptId, const std::string& sha256) {
  return setAttemptColumn(attemptId, "snapshot_sha256", sha256, "attempt.snapshot", "snapshot");
}

Result<RunChange> Store::finishAttempt(std::int64_t attemptId, const std::string& state,
                                       const std::optional<json>& result, const std::optional<std::string>& error) {
  if (state != "scored" && state != "failed" && state != "cancelled")
    return Error{"an attempt cannot finish as \"" + state + "\"", protocol::kInvalidParams};
  std::lock_guard lock(mutex_);
  auto tx = sqlite::Transaction::begin(db_);
  if (!tx) return tx.error();
  auto found = loadAttempt(attemptId);
  if (!found) return found.error();
  const AttemptRecord& a = *found;
  std::vector<EventRecord> events;
  if (a.state == "running") {
    const std::string now = isoTimeUtc();
    auto up = db_.prepare("UPDATE attempts SET state = ?, result = ?, error = ?, ended_at = ? WHERE id = ?");
    if (!up) return up.error();
    std::optional<std::string> resultText;
    if (result) resultText = dumpJson(*result);
    if (auto s = up->bind(1, state).bind(2, resultText).bind(3, error).bind(4, now).bind(5, attemptId).run(); !s)
      return s.error();
    json extra = json::object();
    if (error) extra["error"] = *error;
    if (result && result->is_object()) {
      for (const char* k : {"compiled", "correct", "speedup", "held_out_correct", "held_out_speedup", "score", "failure"})
        if (result->contains(k)) extra[k] = (*result)[k];
    }
    auto ev = attemptStateEvent(a, state, extra);
    if (!ev) return ev.error();
    events.push_back(*ev);
    auto done = completeRunIfDone(a.runId);
    if (!done) return done.error();
    events.insert(events.end(), done->begin(), done->end());
  }
  auto run = loadRun(a.runId);
  if (!run) return run.error();
  if (auto s = tx->commit(); !s) return s.error();
  return RunChange{std::move(*run), events};
}

Result<RunChange> Store::requeueAttempt(std::int64_t attemptId, const std::string& why) {
  std::lock_guard lock(mutex_);
  auto tx = sqlite::Transaction::begin(db_);
  if (!tx) return tx.error();
  auto found = loadAttempt(attemptId);
  if (!found) return found.error();
  const AttemptRecord& a = *found;
  std::vector<EventRecord> events;
  if (a.state == "running") {
    auto up = db_.prepare("UPDATE attempts SET state = 'queued', stage = NULL, started_at = NULL WHERE id = ?");
    if (!up) return up.error();
    if (auto s = up->bind(1, attemptId).run(); !s) return s.error();
    auto ev = attemptStateEvent(a, "queued", json{{"reason", why}});
    if (!ev) return ev.error();
    events.push_back(*ev);
  }
  auto run = loadRun(a.runId);
  if (!run) return run.error();
  if (auto s = tx->commit(); !s) return s.error();
  return RunChange{std::move(*run), events};
}

Result<std::vector<AttemptRecord>> Store::runningAttempts() {
  std::lock_guard lock(mutex_);
  return queryAttempts("state = 'running' ORDER BY id", "");
}

Result<std::vector<EventRecord>> Store::recoverAttempts(bool requeue, const std::set<std::int64_t>& followed) {
  std::lock_guard lock(mutex_);
  auto tx = sqlite::Transaction::begin(db_);
  if (!tx) return tx.error();
  auto running = queryAttempts("state = 'running' ORDER BY id", "");
  if (!running) return running.error();
  std::vector<EventRecord> events;
  const std::string now = isoTimeUtc();
  std::set<std::string> runs;
  for (const AttemptRecord& a : *running) {
    if (followed.count(a.id)) continue;
    runs.insert(a.runId);
    std::string state;
    json extra = json::object();
    if (a.snapshotSha256) {
      // The agent's work is safe in the snapshot: score it (again) from there, never re-run it.
      state = "queued";
      extra["reason"] = "the daemon restarted while scoring; it is scored from snapshot " + *a.snapshotSha256;
    } else {
      auto mark = db_.prepare("UPDATE attempts SET state = 'interrupted', ended_at = ? WHERE id = ?");
      if (!mark) return mark.error();
      if (auto s = mark->bind(1, now).bind(2, a.id).run(); !s) return s.error();
      auto ev = attemptStateEvent(a, "interrupted", json{{"reason", "the daemon restarted during stage " +
                                                                         a.stage.value_or("prepare")}});
      if (!ev) return ev.error();
      events.push_back(*ev);
      if (!requeue) continue;
      state = "queued";
      extra["reason"] = "re-queued after the interruption";
    }
    auto up = db_.prepare(
        "UPDATE attempts SET state = 'queued', stage = NULL, started_at = NULL, ended_at = NULL WHERE id = ?");
    if (!up) return up.error();
    if (auto s = up->bind(1, a.id).run(); !s) return s.error();
    auto ev = attemptStateEvent(a, state, extra);
    if (!ev) return ev.error();
    events.push_back(*ev);
  }
  for (const auto& runId : runs) {
    auto done = completeRunIfDone(runId);
    if (!done) return done.error();
    events.insert(events.end(), done->begin(), done->end());
  }
  if (auto s = tx->commit(); !s) return s.error();
  return events;
}

Result<std::optional<AttemptRecord>> Store::attemptWithSnapshot(const std::string& sha256,
                                                                std::optional<std::int64_t> submitterUid) {
  std::lock_guard lock(mutex_);
  const std::string mine = submitterUid ? " AND run_id IN (SELECT id FROM runs WHERE submitter_uid = ?)" : "";
  auto found = queryAttempts("snapshot_sha256 = ?" + mine + " ORDER BY id LIMIT 1", sha256, submitterUid);
  if (!found) return found.error();
  if (found->empty()) return std::optional<AttemptRecord>();
  return std::optional<AttemptRecord>(found->front());
}

namespace {

// The first column of every row the statement gives.
Result<std::set<std::string>> firstColumn(sqlite::Statement& st) {
  std::set<std::string> out;
  for (;;) {
    auto row = st.step();
    if (!row) return row.error();
    if (!*row) break;
    out.insert(st.text(0));
  }
  return out;
}

}  // namespace

Result<std::set<std::string>> Store::referencedSnapshots() {
  std::lock_guard lock(mutex_);
  auto st = db_.prepare("SELECT DISTINCT snapshot_sha256 FROM attempts WHERE snapshot_sha256 IS NOT NULL");
  if (!st) return st.error();
  return firstColumn(*st);
}

Result<std::set<std::string>> Store::snapshotsOf(std::int64_t uid) {
  std::lock_guard lock(mutex_);
  auto st = db_.prepare(
      "SELECT DISTINCT a.snapshot_sha256 FROM attempts a JOIN runs r ON r.id = a.run_id "
      "WHERE a.snapshot_sha256 IS NOT NULL AND r.submitter_uid = ?");
  if (!st) return st.error();
  st->bind(1, uid);
  return firstColumn(*st);
}

Result<std::set<std::int64_t>> Store::attemptIdsOf(std::int64_t uid) {
  std::lock_guard lock(mutex_);
  auto st = db_.prepare("SELECT a.id FROM attempts a JOIN runs r ON r.id = a.run_id WHERE r.submitter_uid = ?");
  if (!st) return st.error();
  st->bind(1, uid);
  std::set<std::int64_t> out;
  for (;;) {
    auto row = st->step();
    if (!row) return row.error();
    if (!*row) break;
    out.insert(st->integer(0));
  }
  return out;
}

}  // namespace akad
