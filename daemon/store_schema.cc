// The store's schema: the migrations, applied in order at open.
#include "daemon/store.h"

#include "daemon/store_internal.h"

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

}  // namespace

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

}  // namespace akad
