#include "daemon/store.h"

#include <sys/random.h>
#include <sys/time.h>

#include <cstdio>
#include <ctime>
#include <string_view>

#include "common/protocol.h"
#include "common/time_text.h"
#include "daemon/store_internal.h"

namespace akad {

using nlohmann::json;

namespace {

Error notFound(const std::string& runId) {
  return Error{"no run with id \"" + runId + "\"", protocol::kNotFound};
}

json parseStoredJson(const std::string& text) {
  json j = json::parse(text, nullptr, false);
  return j.is_discarded() ? json(text) : j;
}

Result<std::string> newRunId() {
  unsigned char bytes[4];
  if (::getrandom(bytes, sizeof bytes, 0) != static_cast<ssize_t>(sizeof bytes)) {
    return errnoError("getrandom for a run id");
  }
  char id[16];
  std::snprintf(id, sizeof id, "r-%02x%02x%02x%02x", bytes[0], bytes[1], bytes[2], bytes[3]);
  return std::string(id);
}

constexpr const char* kRunColumns =
    "id, label, agent, agent_command, state, params, submitter_uid, submitter_gid, created_at, "
    "updated_at, ended_at";
// The same row without the agent command and the params (read as none and {}).
constexpr const char* kRunSummaryColumns =
    "id, label, agent, NULL, state, '{}', submitter_uid, submitter_gid, created_at, updated_at, ended_at";

RunRecord readRun(const sqlite::Statement& st) {
  RunRecord r;
  r.id = st.text(0);
  r.label = st.text(1);
  r.agent = st.optionalText(2);
  r.agentCommand = st.optionalText(3);
  r.state = st.text(4);
  r.params = parseStoredJson(st.text(5));
  r.submitterUid = st.integer(6);
  r.submitterGid = st.integer(7);
  r.createdAt = st.text(8);
  r.updatedAt = st.text(9);
  r.endedAt = st.optionalText(10);
  return r;
}

}  // namespace

std::string dumpJson(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

void addToCounts(AttemptCounts& c, std::string_view state, std::int64_t n) {
  c.total += n;
  if (state == "queued") c.queued += n;
  else if (state == "running") c.running += n;
  else if (state == "scored") c.scored += n;
  else if (state == "failed") c.failed += n;
  else if (state == "cancelled") c.cancelled += n;
  else if (state == "interrupted") c.interrupted += n;
}

namespace {

template <class T>
json optionalJson(const std::optional<T>& v) {
  return v ? json(*v) : json(nullptr);
}

}  // namespace

bool isTerminalRunState(std::string_view s) { return s == "done" || s == "cancelled" || s == "failed"; }
bool isTerminalAttemptState(std::string_view s) {
  return s == "scored" || s == "failed" || s == "cancelled" || s == "interrupted";
}

json AttemptCounts::toJson() const {
  return json{{"total", total},   {"queued", queued},       {"running", running},
              {"scored", scored}, {"failed", failed},       {"cancelled", cancelled},
              {"interrupted", interrupted}};
}

json RunRecord::toJson() const {
  return json{{"id", id},
              {"label", label},
              {"agent", optionalJson(agent)},
              {"agent_command", optionalJson(agentCommand)},
              {"state", state},
              {"params", params},
              {"submitter_uid", submitterUid},
              {"submitter_gid", submitterGid},
              {"created_at", createdAt},
              {"updated_at", updatedAt},
              {"ended_at", optionalJson(endedAt)},
              {"counts", counts.toJson()}};
}

json AttemptRecord::toJson() const {
  return json{{"id", id},
              {"run_id", runId},
              {"task_id", taskId},
              {"task_hash", optionalJson(taskHash)},
              {"attempt_index", attemptIndex},
              {"state", state},
              {"stage", optionalJson(stage)},
              {"snapshot_sha256", optionalJson(snapshotSha256)},
              {"result", result ? *result : json(nullptr)},
              {"error", optionalJson(error)},
              {"created_at", createdAt},
              {"started_at", optionalJson(startedAt)},
              {"ended_at", optionalJson(endedAt)},
              {"needs_gpu", needsGpu},
              {"executor_job", optionalJson(executorJob)},
              {"executor_node", optionalJson(executorNode)}};
}

json EventRecord::toJson() const {
  return json{{"seq", seq},   {"run_id", runId}, {"attempt_id", optionalJson(attemptId)},
              {"at", at},     {"kind", kind},    {"data", data}};
}

Result<AttemptCounts> Store::countAttempts(const std::string& runId) {
  auto st = db_.prepare("SELECT state, COUNT(*) FROM attempts WHERE run_id = ? GROUP BY state");
  if (!st) return st.error();
  st->bind(1, runId);
  AttemptCounts c;
  for (;;) {
    auto row = st->step();
    if (!row) return row.error();
    if (!*row) break;
    addToCounts(c, st->text(0), st->integer(1));
  }
  return c;
}

Result<RunRecord> Store::loadRun(const std::string& runId) {
  auto st = db_.prepare(std::string("SELECT ") + kRunColumns + " FROM runs WHERE id = ?");
  if (!st) return st.error();
  st->bind(1, runId);
  auto row = st->step();
  if (!row) return row.error();
  if (!*row) return notFound(runId);
  RunRecord r = readRun(*st);
  auto c = countAttempts(runId);
  if (!c) return c.error();
  r.counts = *c;
  return r;
}

Result<EventRecord> Store::insertEvent(const std::string& runId, std::optional<std::int64_t> attemptId,
                                       const std::string& kind, const json& data) {
  EventRecord ev{0, runId, attemptId, isoTimeUtc(), kind, data};
  auto st = db_.prepare("INSERT INTO events (run_id, attempt_id, at, kind, data) VALUES (?, ?, ?, ?, ?)");
  if (!st) return st.error();
  st->bind(1, runId).bind(2, attemptId).bind(3, ev.at).bind(4, kind).bind(5, dumpJson(data));
  if (auto s = st->run(); !s) return s.error();
  ev.seq = db_.lastInsertRowid();
  return ev;
}

Result<RunChange> Store::submitRun(const NewRun& in) {
  if (in.taskIds.empty()) return Error{"a run needs at least one task", protocol::kInvalidParams};
  std::lock_guard lock(mutex_);
  auto tx = sqlite::Transaction::begin(db_);
  if (!tx) return tx.error();
  std::string runId;
  for (int tries = 0; runId.empty(); ++tries) {
    auto id = newRunId();
    if (!id) return id.error();
    auto exists = db_.prepare("SELECT 1 FROM runs WHERE id = ?");
    if (!exists) return exists.error();
    auto row = exists->bind(1, *id).step();
    if (!row) return row.error();
    if (!*row) runId = *id;
    if (tries > 100) return Error{"cannot find a free run id", protocol::kInternalError};
  }
  if (in.maxOpenAttempts > 0) {
    auto open = db_.prepare(
        "SELECT COUNT(*) FROM attempts a JOIN runs r ON r.id = a.run_id "
        "WHERE r.submitter_uid = ? AND a.state IN ('queued','running')");
    if (!open) return open.error();
    auto row = open->bind(1, in.submitterUid).step();
    if (!row) return row.error();
    const std::int64_t already = *row ? open->integer(0) : 0;
    const std::int64_t adding = static_cast<std::int64_t>(in.taskIds.size()) * in.attemptsPerTask;
    if (already + adding > in.maxOpenAttempts)
      return Error{"this run adds " + std::to_string(adding) + " attempts to the " + std::to_string(already) +
                       " you have queued or running; your limit is " + std::to_string(in.maxOpenAttempts) +
                       " (akactl quota)",
                   protocol::kQuotaExceeded};
  }
  std::string now = isoTimeUtc();
  auto ins = db_.prepare(
      "INSERT INTO runs (id, label, agent, agent_command, state, params, submitter_uid, "
      "submitter_gid, created_at, updated_at) VALUES (?, ?, ?, ?, 'queued', ?, ?, ?, ?, ?)");
  if (!ins) return ins.error();
  ins->bind(1, runId).bind(2, in.label).bind(3, in.agent).bind(4, in.agentCommand)
      .bind(5, dumpJson(in.params)).bind(6, in.submitterUid).bind(7, in.submitterGid)
      .bind(8, now).bind(9, now);
  if (auto s = ins->run(); !s) return s.error();
  auto att = db_.prepare(
      "INSERT INTO attempts (run_id, task_id, attempt_index, state, created_at, task_hash, needs_gpu, "
      "snapshot_sha256) VALUES (?, ?, ?, 'queued', ?, ?, ?, ?)");
  if (!att) return att.error();
  for (const std::string& task : in.taskIds) {
    std::optional<std::string> hash;
    if (auto h = in.taskHashes.find(task); h != in.taskHashes.end()) hash = h->second;
    for (std::int64_t i = 0; i < in.attemptsPerTask; ++i) {
      att->reset();
      att->bind(1, runId).bind(2, task).bind(3, i).bind(4, now).bind(5, hash)
          .bind(6, static_cast<std::int64_t>(in.tasksNeedingGpu.count(task))).bind(7, in.snapshot);
      if (auto s = att->run(); !s) return s.error();
    }
  }
  auto ev = insertEvent(runId, std::nullopt, "run.submitted",
                        json{{"state", "queued"},
                             {"tasks", in.taskIds},
                             {"attempts", static_cast<std::int64_t>(in.taskIds.size()) * in.attemptsPerTask}});
  if (!ev) return ev.error();
  auto run = loadRun(runId);
  if (!run) return run.error();
  if (auto s = tx->commit(); !s) return s.error();
  return RunChange{std::move(*run), {std::move(*ev)}};
}

Result<RunRecord> Store::getRun(const std::string& runId) {
  std::lock_guard lock(mutex_);
  return loadRun(runId);
}

Result<std::vector<RunRecord>> Store::listRuns(const std::optional<std::string>& stateFilter, std::int64_t limit,
                                               std::optional<std::int64_t> submitterUid, RunFields fields) {
  std::lock_guard lock(mutex_);
  std::string sql = std::string("SELECT ") + (fields == RunFields::All ? kRunColumns : kRunSummaryColumns) +
                    " FROM runs WHERE 1";
  if (stateFilter) sql += " AND state = ?";
  if (submitterUid) sql += " AND submitter_uid = ?";
  sql += " ORDER BY created_at DESC, rowid DESC LIMIT ?";
  auto st = db_.prepare(sql);
  if (!st) return st.error();
  int i = 1;
  if (stateFilter) st->bind(i++, *stateFilter);
  if (submitterUid) st->bind(i++, *submitterUid);
  st->bind(i, limit);
  std::vector<RunRecord> runs;
  for (;;) {
    auto row = st->step();
    if (!row) return row.error();
    if (!*row) break;
    runs.push_back(readRun(*st));
  }
  for (RunRecord& r : runs) {
    auto c = countAttempts(r.id);
    if (!c) return c.error();
    r.counts = *c;
  }
  return runs;
}

Result<std::vector<AttemptRecord>> Store::attemptsOf(const std::string& runId) {
  std::lock_guard lock(mutex_);
  return queryAttempts("run_id = ? ORDER BY id", runId);
}

Result<std::vector<AttemptRecord>> Store::queryAttempts(const std::string& where, const std::string& bindText,
                                                        std::optional<std::int64_t> bindNumber) {
  auto st = db_.prepare(
      "SELECT id, run_id, task_id, task_hash, attempt_index, state, stage, snapshot_sha256, result, "
      "error, created_at, started_at, ended_at, needs_gpu, executor_job, executor_node FROM attempts WHERE " + where);
  if (!st) return st.error();
  if (where.find('?') != std::string::npos) st->bind(1, bindText);
  if (bindNumber) st->bind(2, *bindNumber);
  std::vector<AttemptRecord> out;
  for (;;) {
    auto row = st->step();
    if (!row) return row.error();
    if (!*row) break;
    AttemptRecord a;
    a.id = st->integer(0);
    a.runId = st->text(1);
    a.taskId = st->text(2);
    a.taskHash = st->optionalText(3);
    a.attemptIndex = st->integer(4);
    a.state = st->text(5);
    a.stage = st->optionalText(6);
    a.snapshotSha256 = st->optionalText(7);
    if (auto r = st->optionalText(8)) a.result = parseStoredJson(*r);
    a.error = st->optionalText(9);
    a.createdAt = st->text(10);
    a.startedAt = st->optionalText(11);
    a.endedAt = st->optionalText(12);
    a.needsGpu = st->integer(13) != 0;
    a.executorJob = st->optionalText(14);
    a.executorNode = st->optionalText(15);
    out.push_back(std::move(a));
  }
  return out;
}

Result<RunChange> Store::cancelRun(const std::string& runId) {
  std::lock_guard lock(mutex_);
  auto tx = sqlite::Transaction::begin(db_);
  if (!tx) return tx.error();
  auto before = loadRun(runId);
  if (!before) return before.error();
  if (isTerminalRunState(before->state)) {
    return Error{"run " + runId + " already ended (" + before->state + ")", protocol::kConflict};
  }
  std::string now = isoTimeUtc();
  auto att = db_.prepare(
      "UPDATE attempts SET state = 'cancelled', ended_at = ? WHERE run_id = ? AND state IN "
      "('queued','running')");
  if (!att) return att.error();
  if (auto s = att->bind(1, now).bind(2, runId).run(); !s) return s.error();
  auto up = db_.prepare("UPDATE runs SET state = 'cancelled', updated_at = ?, ended_at = ? WHERE id = ?");
  if (!up) return up.error();
  if (auto s = up->bind(1, now).bind(2, now).bind(3, runId).run(); !s) return s.error();
  auto ev = insertEvent(runId, std::nullopt, "run.state",
                        json{{"state", "cancelled"}, {"previous", before->state}});
  if (!ev) return ev.error();
  auto run = loadRun(runId);
  if (!run) return run.error();
  if (auto s = tx->commit(); !s) return s.error();
  return RunChange{std::move(*run), {std::move(*ev)}};
}

Result<RunChange> Store::setRunState(const std::string& runId, const std::string& state) {
  bool known = false;
  for (const char* s : kRunStates) known = known || state == s;
  if (!known) return Error{"unknown run state \"" + state + "\"", protocol::kInvalidParams};
  std::lock_guard lock(mutex_);
  auto tx = sqlite::Transaction::begin(db_);
  if (!tx) return tx.error();
  auto before = loadRun(runId);
  if (!before) return before.error();
  std::string now = isoTimeUtc();
  auto up = db_.prepare("UPDATE runs SET state = ?, updated_at = ?, ended_at = ? WHERE id = ?");
  if (!up) return up.error();
  std::optional<std::string> ended;
  if (isTerminalRunState(state)) ended = now;
  if (auto s = up->bind(1, state).bind(2, now).bind(3, ended).bind(4, runId).run(); !s) return s.error();
  auto ev = insertEvent(runId, std::nullopt, "run.state", json{{"state", state}, {"previous", before->state}});
  if (!ev) return ev.error();
  auto run = loadRun(runId);
  if (!run) return run.error();
  if (auto s = tx->commit(); !s) return s.error();
  return RunChange{std::move(*run), {std::move(*ev)}};
}

Result<std::vector<EventRecord>> Store::eventsOf(const std::string& runId, std::int64_t afterSeq) {
  std::lock_guard lock(mutex_);
  auto st = db_.prepare(
      "SELECT seq, run_id, attempt_id, at, kind, data FROM events WHERE run_id = ? AND seq > ? "
      "ORDER BY seq");
  if (!st) return st.error();
  st->bind(1, runId).bind(2, afterSeq);
  std::vector<EventRecord> out;
  for (;;) {
    auto row = st->step();
    if (!row) return row.error();
    if (!*row) break;
    out.push_back(EventRecord{st->integer(0), st->text(1), st->optionalInteger(2), st->text(3),
                              st->text(4), parseStoredJson(st->text(5))});
  }
  return out;
}

Result<EventRecord> Store::appendEvent(const std::string& runId, std::optional<std::int64_t> attemptId,
                                       const std::string& kind, const json& data) {
  std::lock_guard lock(mutex_);
  auto tx = sqlite::Transaction::begin(db_);
  if (!tx) return tx.error();
  auto ev = insertEvent(runId, attemptId, kind, data);
  if (!ev) return ev.error();
  if (auto s = tx->commit(); !s) return s.error();
  return ev;
}

Result<StoreCounts> Store::counts() {
  std::lock_guard lock(mutex_);
  StoreCounts c;
  auto runs = db_.prepare("SELECT state, COUNT(*) FROM runs GROUP BY state");
  if (!runs) return runs.error();
  for (const char* s : kRunStates) c.runsByState[s] = 0;
  for (;;) {
    auto row = runs->step();
    if (!row) return row.error();
    if (!*row) break;
    c.runsByState[runs->text(0)] = runs->integer(1);
    c.runs += runs->integer(1);
  }
  auto att = db_.prepare("SELECT state, COUNT(*) FROM attempts GROUP BY state");
  if (!att) return att.error();
  for (;;) {
    auto row = att->step();
    if (!row) return row.error();
    if (!*row) break;
    addToCounts(c.attempts, att->text(0), att->integer(1));
  }
  return c;
}

}  // namespace akad
