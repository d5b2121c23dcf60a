#include "daemon/store.h"

#include <sys/random.h>
#include <sys/time.h>

#include <cstdio>
#include <ctime>
#include <string_view>

#include "common/protocol.h"
#include "common/time_text.h"

namespace akad {

using nlohmann::json;

namespace {

struct Migration {
  int version;
  const char* why;
  const char* sql;
};

// Append only. A database at version N has had migrations 1..N applied, each in its own
// transaction together with the version bump.
const Migration kMigrations[] = {
    {1, "runs, attempts and the event log",
     R"sql(
CREATE TABLE runs (
  id             TEXT PRIMARY KEY,
  label          TEXT NOT NULL DEFAULT '',
  agent          TEXT,
  agent_command  TEXT,
  state          TEXT NOT NULL CHECK (state IN ('queued','running','done','cancelled','failed')),
  params         TEXT NOT NULL,
  submitter_uid  INTEGER NOT NULL,
  submitter_gid  INTEGER NOT NULL,
  created_at     TEXT NOT NULL,
  updated_at     TEXT NOT NULL,
  ended_at       TEXT
);
CREATE INDEX runs_by_state ON runs(state);
CREATE INDEX runs_by_created ON runs(created_at);
CREATE TABLE attempts (
  id               INTEGER PRIMARY KEY AUTOINCREMENT,
  run_id           TEXT NOT NULL REFERENCES runs(id),
  task_id          TEXT NOT NULL,
  task_hash        TEXT,
  attempt_index    INTEGER NOT NULL,
  state            TEXT NOT NULL CHECK (state IN
                     ('queued','running','scored','failed','cancelled','interrupted')),
  stage            TEXT,
  snapshot_sha256  TEXT,
  result           TEXT,
  error            TEXT,
  created_at       TEXT NOT NULL,
  started_at       TEXT,
  ended_at         TEXT,
  UNIQUE (run_id, task_id, attempt_index)
);
CREATE INDEX attempts_by_run ON attempts(run_id);
CREATE INDEX attempts_by_state ON attempts(state);
CREATE TABLE events (
  seq         INTEGER PRIMARY KEY AUTOINCREMENT,
  run_id      TEXT NOT NULL,
  attempt_id  INTEGER,
  at          TEXT NOT NULL,
  kind        TEXT NOT NULL,
  data        TEXT NOT NULL
);
CREATE INDEX events_by_run ON events(run_id, seq);
)sql"},
    {2, "the executor: which attempts need a GPU",
     R"sql(
ALTER TABLE attempts ADD COLUMN needs_gpu INTEGER NOT NULL DEFAULT 0;
CREATE INDEX attempts_by_snapshot ON attempts(snapshot_sha256);
)sql"},
    {3, "tenant quotas: runs by submitter, GPU lease time per tenant",
     R"sql(
CREATE INDEX runs_by_submitter ON runs(submitter_uid);
CREATE INDEX attempts_by_end ON attempts(ended_at);
CREATE TABLE gpu_usage (
  id          INTEGER PRIMARY KEY AUTOINCREMENT,
  attempt_id  INTEGER NOT NULL,
  uid         INTEGER NOT NULL,
  ended_at    TEXT NOT NULL,
  ms          INTEGER NOT NULL
);
CREATE INDEX gpu_usage_by_end ON gpu_usage(ended_at);
)sql"},
    {4, "executors: the batch system's job id and node of an attempt (akad --executor slurm)",
     R"sql(
ALTER TABLE attempts ADD COLUMN executor_job TEXT;
ALTER TABLE attempts ADD COLUMN executor_node TEXT;
)sql"},
};

Error notFound(const std::string& runId) {
  return Error{"no run with id \"" + runId + "\"", protocol::kNotFound};
}

json parseStoredJson(const std::string& text) {
  json j = json::parse(text, nullptr, false);
  return j.is_discarded() ? json(text) : j;
}

std::string dumpJson(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

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

void addToCounts(AttemptCounts& c, std::string_view state, std::int64_t n) {
  c.total += n;
  if (state == "queued") c.queued += n;
  else if (state == "running") c.running += n;
  else if (state == "scored") c.scored += n;
  else if (state == "failed") c.failed += n;
  else if (state == "cancelled") c.cancelled += n;
  else if (state == "interrupted") c.interrupted += n;
}

template <class T>
json optionalJson(const std::optional<T>& v) {
  return v ? json(*v) : json(nullptr);
}

}  // namespace

bool isTerminalRunState(std::string_view s) { return s == "done" || s == "cancelled" || s == "failed"; }
bool isTerminalAttemptState(std::string_view s) {
  return s == "scored" || s == "failed" || s == "cancelled" || s == "interrupted";
}

std::string nowIso8601() { return isoTimeSecondsAgo(0); }

std::string isoTimeSecondsAgo(double seconds) { return isoTimeUtc(seconds); }

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

int Store::latestSchemaVersion() { return std::end(kMigrations)[-1].version; }

Result<std::unique_ptr<Store>> Store::open(const std::filesystem::path& dbPath) {
  auto db = sqlite::Database::open(dbPath);
  if (!db) return db.error();
  // WAL: readers never block the writer; synchronous=FULL: COMMIT returns only after the WAL
  // is fsynced, which is what makes an acknowledged submit survive power loss and kill -9.
  for (const char* pragma : {"PRAGMA journal_mode=WAL", "PRAGMA synchronous=FULL",
                             "PRAGMA foreign_keys=ON"}) {
    if (auto s = db->exec(pragma); !s) return s.error();
  }
  // journal_mode can silently stay "delete" (e.g. on some network filesystems); say so.
  {
    auto mode = db->prepare("PRAGMA journal_mode");
    if (!mode) return mode.error();
    if (auto row = mode->step(); !row || !*row || mode->text(0) != "wal") {
      return Error{"cannot put " + dbPath.string() + " in WAL mode (filesystem without shared memory?)", 0};
    }
  }
  std::unique_ptr<Store> store(new Store(std::move(*db)));
  if (auto s = store->migrate(); !s) return s.error();
  return store;
}

Status Store::migrate() {
  std::lock_guard lock(mutex_);
  if (auto s = db_.exec("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)"); !s) {
    return s;
  }
  auto tx = sqlite::Transaction::begin(db_);
  if (!tx) return tx.error();
  int current = 0;
  bool haveRow = false;
  {
    auto sel = db_.prepare("SELECT version FROM schema_version");
    if (!sel) return sel.error();
    auto row = sel->step();
    if (!row) return row.error();
    haveRow = *row;
    if (haveRow) current = static_cast<int>(sel->integer(0));
  }
  if (!haveRow) {
    auto ins = db_.prepare("INSERT INTO schema_version (version) VALUES (0)");
    if (!ins) return ins.error();
    if (auto s = ins->run(); !s) return s;
  }
  if (auto s = tx->commit(); !s) return s;
  if (current > latestSchemaVersion()) {
    return Error{db_.path().string() + " has schema version " + std::to_string(current) +
                     ", newer than this akad knows (" + std::to_string(latestSchemaVersion()) +
                     "); run a newer akad",
                 0};
  }
  for (const Migration& m : kMigrations) {
    if (m.version <= current) continue;
    auto mtx = sqlite::Transaction::begin(db_);
    if (!mtx) return mtx.error();
    if (auto s = db_.exec(m.sql); !s) {
      return Error{"migration " + std::to_string(m.version) + " (" + m.why + "): " + s.error().message, 0};
    }
    auto up = db_.prepare("UPDATE schema_version SET version = ?");
    if (!up) return up.error();
    if (auto s = up->bind(1, static_cast<std::int64_t>(m.version)).run(); !s) return s;
    if (auto s = mtx->commit(); !s) return s;
  }
  return {};
}

Result<int> Store::schemaVersion() {
  std::lock_guard lock(mutex_);
  auto st = db_.prepare("SELECT version FROM schema_version");
  if (!st) return st.error();
  auto row = st->step();
  if (!row) return row.error();
  return *row ? static_cast<int>(st->integer(0)) : 0;
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
  EventRecord ev{0, runId, attemptId, nowIso8601(), kind, data};
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
  std::string now = nowIso8601();
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
                                               std::optional<std::int64_t> submitterUid) {
  std::lock_guard lock(mutex_);
  std::string sql = std::string("SELECT ") + kRunColumns + " FROM runs WHERE 1";
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

Result<std::vector<AttemptRecord>> Store::queryAttempts(const std::string& where, const std::string& bindText) {
  auto st = db_.prepare(
      "SELECT id, run_id, task_id, task_hash, attempt_index, state, stage, snapshot_sha256, result, "
      "error, created_at, started_at, ended_at, needs_gpu, executor_job, executor_node FROM attempts WHERE " + where);
  if (!st) return st.error();
  if (where.find('?') != std::string::npos) st->bind(1, bindText);
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
  std::string now = nowIso8601();
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
  std::string now = nowIso8601();
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

// --- The attempt executor's writes --------------------------------------------------------

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
  const std::string now = nowIso8601();
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
    const std::string now = nowIso8601();
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
  const std::string now = nowIso8601();
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
  return ins->bind(1, attemptId).bind(2, uid).bind(3, nowIso8601())
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
    const std::string now = nowIso8601();
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
  const std::string now = nowIso8601();
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

Result<std::optional<AttemptRecord>> Store::attemptWithSnapshot(const std::string& sha256) {
  std::lock_guard lock(mutex_);
  auto found = queryAttempts("snapshot_sha256 = ? ORDER BY id LIMIT 1", sha256);
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

}  // namespace akad
