#pragma once
// akad's durable state: runs, their attempts, and the event log, in SQLite (WAL,
// synchronous=FULL) at <state-dir>/akad.db. Every write is one transaction; a method returns
// only after COMMIT, so whatever it acknowledged survives kill -9.
//
// Thread-safe: every public method takes the store's mutex (the pipeline calls in from worker
// threads). Schema changes are appended to kMigrations in store_schema.cc, never edited in place.

#include <cstdint>
#include <filesystem>
#include <memory>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/result.h"
#include "common/time_text.h"  // every time the store writes or takes: isoTimeUtc()
#include "daemon/sqlite.h"

namespace akad {

// Run states: queued -> running -> done | failed; queued/running -> cancelled.
inline constexpr const char* kRunStates[] = {"queued", "running", "done", "cancelled", "failed"};
// Attempt states: queued -> running -> scored | failed | interrupted; any unfinished -> cancelled.
inline constexpr const char* kAttemptStates[] = {"queued", "running", "scored", "failed", "cancelled",
                                                 "interrupted"};
bool isTerminalRunState(std::string_view state);
bool isTerminalAttemptState(std::string_view state);

struct AttemptCounts {
  std::int64_t total = 0, queued = 0, running = 0, scored = 0, failed = 0, cancelled = 0,
               interrupted = 0;
  nlohmann::json toJson() const;
};

struct RunRecord {
  std::string id;  // "r-" + 8 hex digits
  std::string label;
  std::optional<std::string> agent;
  std::optional<std::string> agentCommand;
  std::string state;
  nlohmann::json params;  // the submitted params, normalised (tasks resolved, defaults filled)
  std::int64_t submitterUid = 0;
  std::int64_t submitterGid = 0;
  std::string createdAt;  // ISO 8601 UTC, millisecond precision
  std::string updatedAt;
  std::optional<std::string> endedAt;
  AttemptCounts counts;
  nlohmann::json toJson() const;
};

struct AttemptRecord {
  std::int64_t id = 0;
  std::string runId;
  std::string taskId;  // "suite/task"
  std::optional<std::string> taskHash;
  std::int64_t attemptIndex = 0;  // 0-based, per task within a run
  std::string state;
  std::optional<std::string> stage;
  std::optional<std::string> snapshotSha256;
  std::optional<nlohmann::json> result;
  std::optional<std::string> error;
  std::string createdAt;
  std::optional<std::string> startedAt;
  std::optional<std::string> endedAt;
  bool needsGpu = false;
  // Where a batch system ran it (akad --executor slurm): its job id and node; unset locally.
  std::optional<std::string> executorJob;
  std::optional<std::string> executorNode;
  nlohmann::json toJson() const;
};

struct EventRecord {
  std::int64_t seq = 0;  // global, increasing: watchers resume after the last seq they saw
  std::string runId;
  std::optional<std::int64_t> attemptId;
  std::string at;
  std::string kind;  // "run.submitted", "run.state", "attempt.state", ...
  nlohmann::json data;
  nlohmann::json toJson() const;
};

struct NewRun {
  std::string label;
  std::optional<std::string> agent;
  std::optional<std::string> agentCommand;
  nlohmann::json params = nlohmann::json::object();
  std::vector<std::string> taskIds;  // resolved, one or more
  // Per task id: the content hash of the version submitted, and whether it needs a GPU.
  std::map<std::string, std::string> taskHashes;
  std::set<std::string> tasksNeedingGpu;
  // A re-score (`akactl reproduce`): every attempt starts with this snapshot, skipping the agent.
  std::optional<std::string> snapshot;
  std::int64_t attemptsPerTask = 1;
  std::int64_t submitterUid = 0;
  std::int64_t submitterGid = 0;
  // The submitter's quota: its attempts queued or running, this run's included, may not pass
  // it (0: no limit). Checked in the transaction that adds the run, so that two submits at
  // once cannot both slip under it.
  std::int64_t maxOpenAttempts = 0;
};

// A queued attempt as the executor's chooser sees it.
struct QueuedAttempt {
  AttemptRecord attempt;
  std::int64_t submitterUid = 0;
};

// What one tenant has used (Store::tenantUsage).
struct TenantUsage {
  std::int64_t queued = 0;
  std::int64_t running = 0;
  double attempt_seconds = 0;  // wall time of its attempts within the window, running ones so far
  double gpu_seconds = 0;      // GPU lease time of its attempts whose lease ended within the window
};

// What a write did: the records after it, and the events it appended (to publish after commit).
struct RunChange {
  RunRecord run;
  std::vector<EventRecord> events;
};

struct StoreCounts {
  std::int64_t runs = 0;
  nlohmann::json runsByState = nlohmann::json::object();
  AttemptCounts attempts;
};

class Store {
 public:
  // Opens or creates the database and applies pending migrations. Refuses a database whose
  // schema is newer than this binary knows.
  static Result<std::unique_ptr<Store>> open(const std::filesystem::path& dbPath);
  static int latestSchemaVersion();

  Result<int> schemaVersion();
  const std::filesystem::path& path() const { return db_.path(); }

  Result<RunChange> submitRun(const NewRun& run);
  Result<RunRecord> getRun(const std::string& runId);  // kNotFound if absent
  // What listRuns reads of each run: all of it, or a summary without its params and agent
  // command (up to about 400 KiB a run, which a listing of a thousand must not load).
  enum class RunFields { All, Summary };
  // Newest first. stateFilter empty = all; submitterUid: only that uid's runs.
  Result<std::vector<RunRecord>> listRuns(const std::optional<std::string>& stateFilter, std::int64_t limit,
                                          std::optional<std::int64_t> submitterUid = std::nullopt,
                                          RunFields fields = RunFields::All);
  Result<std::vector<AttemptRecord>> attemptsOf(const std::string& runId);
  // Marks the run and its unfinished attempts cancelled. kConflict if the run already ended.
  Result<RunChange> cancelRun(const std::string& runId);
  // Changes a run's state and records a "run.state" event (used by the executor later).
  Result<RunChange> setRunState(const std::string& runId, const std::string& state);
  // Events of a run with seq > afterSeq, in order.
  Result<std::vector<EventRecord>> eventsOf(const std::string& runId, std::int64_t afterSeq);
  Result<EventRecord> appendEvent(const std::string& runId, std::optional<std::int64_t> attemptId,
                                  const std::string& kind, const nlohmann::json& data);
  Result<StoreCounts> counts();

  // --- The attempt executor's writes (store_attempts.cc). Each commits before returning. ---
  // Takes the oldest queued attempt (of a run not cancelled) that `eligible` accepts, marks it
  // running (and its run, if queued). nullopt when none is eligible.
  Result<std::pair<std::optional<AttemptRecord>, std::vector<EventRecord>>> claimNextAttempt(
      const std::function<bool(const AttemptRecord&)>& eligible);
  // The same, with the choice made by `choose` over every queued attempt (oldest first); it runs
  // under the store's lock and must not call the store. nullopt from it: nothing is taken.
  using AttemptChooser = std::function<std::optional<std::size_t>(const std::vector<QueuedAttempt>&)>;
  Result<std::pair<std::optional<AttemptRecord>, std::vector<EventRecord>>> claimAttempt(const AttemptChooser& choose);
  // Per submitter uid: attempts queued and running now, attempt and GPU time since `sinceIso`.
  Result<std::map<std::int64_t, TenantUsage>> tenantUsage(const std::string& sinceIso);
  // A GPU lease of an attempt has ended after `seconds`.
  Status recordGpuUsage(std::int64_t attemptId, std::int64_t uid, double seconds);
  Result<RunChange> setAttemptStage(std::int64_t attemptId, const std::string& stage);
  // The batch system's job id and node (empty: not known yet) of a running attempt.
  Result<RunChange> setAttemptExecutor(std::int64_t attemptId, const std::string& job, const std::string& node);
  Result<RunChange> setAttemptSnapshot(std::int64_t attemptId, const std::string& sha256);
  // Ends a running attempt (scored | failed | cancelled); a run whose attempts have all ended
  // becomes done. An attempt that is no longer running (cancelled meanwhile) is left as it is.
  Result<RunChange> finishAttempt(std::int64_t attemptId, const std::string& state,
                                  const std::optional<nlohmann::json>& result,
                                  const std::optional<std::string>& error);
  // A running attempt goes back to the queue (daemon shutting down), keeping its snapshot.
  Result<RunChange> requeueAttempt(std::int64_t attemptId, const std::string& why);
  // After a restart: attempts left running with a snapshot are queued to be scored from it;
  // the others are marked interrupted and, if `requeue`, queued to run again. Those in
  // `followed` stay running: the executor follows them again (a Slurm job that lived on).
  Result<std::vector<EventRecord>> recoverAttempts(bool requeue, const std::set<std::int64_t>& followed = {});
  Result<std::vector<AttemptRecord>> runningAttempts();
  Result<AttemptRecord> getAttempt(std::int64_t attemptId);
  // The first attempt that recorded the snapshot (the original of a re-score); with
  // submitterUid, the first of that uid's runs.
  Result<std::optional<AttemptRecord>> attemptWithSnapshot(const std::string& sha256,
                                                           std::optional<std::int64_t> submitterUid = std::nullopt);
  Result<std::set<std::string>> referencedSnapshots();
  // Snapshots recorded by attempts of runs that `uid` submitted: the ones that tenant may see.
  Result<std::set<std::string>> snapshotsOf(std::int64_t uid);
  // The ids of the attempts of runs that `uid` submitted.
  Result<std::set<std::int64_t>> attemptIdsOf(std::int64_t uid);

 private:
  explicit Store(sqlite::Database db) : db_(std::move(db)) {}
  Status migrate();
  Result<RunRecord> loadRun(const std::string& runId);
  Result<EventRecord> insertEvent(const std::string& runId, std::optional<std::int64_t> attemptId,
                                  const std::string& kind, const nlohmann::json& data);
  Result<AttemptCounts> countAttempts(const std::string& runId);
  Result<AttemptRecord> loadAttempt(std::int64_t attemptId);
  // `where` may hold up to two parameters: the first takes bindText, the second bindNumber.
  Result<std::vector<AttemptRecord>> queryAttempts(const std::string& where, const std::string& bindText,
                                                   std::optional<std::int64_t> bindNumber = std::nullopt);
  Result<EventRecord> attemptStateEvent(const AttemptRecord& a, const std::string& state,
                                        const nlohmann::json& extra);
  Result<std::vector<EventRecord>> completeRunIfDone(const std::string& runId);
  Result<RunChange> setAttemptColumn(std::int64_t attemptId, const char* column, const std::string& value,
                                     const std::string& eventKind, const std::string& eventKey);

  std::mutex mutex_;
  sqlite::Database db_;
};

}  // namespace akad
