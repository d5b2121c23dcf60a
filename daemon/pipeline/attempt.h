#pragma once
// One attempt from start to result, stage by stage, in pipeline order:
//   prepare.cc -> agent_stage.cc -> snapshot (here) -> score.cc
// The scheduler records each stage in the store before it acts on it, so a restart knows
// where every attempt stood.

#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <vector>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "common/result.h"
#include "daemon/pipeline/agent.h"
#include "daemon/pipeline/agent_stage.h"
#include "daemon/pipeline/score.h"
#include "daemon/pipeline/workspace_fs.h"
#include "daemon/pipeline/task.h"
#include "daemon/snapshot/store.h"

namespace akad {

struct AttemptPlan {
  std::int64_t attempt_id = 0;
  std::string run_id;
  const Task* task = nullptr;
  AgentDefinition agent;
  std::map<std::string, std::string> credentials;
  double agent_time_limit_s = 0;  // 0: the agent's and task's own limits
  // Set when the attempt already has a snapshot (a restart after the agent stage, or
  // `akactl reproduce`): prepare and agent are skipped and the snapshot is scored.
  std::optional<std::string> snapshot;
};

struct AttemptServices {
  std::filesystem::path attempts_dir;  // <state>/attempts
  snapshot::SnapshotStore* snapshots = nullptr;
  bool allow_agent_network = true;  // false (akad --no-agent-network): no agent gets the host network
  WorkspaceLimits workspace_limits;  // the agent's workspace file system (workspace_fs.h)
  ScoringEnvironment scoring;
  // The agent's sandbox's image: the task's with the agent's own (`image:`) over it. Unset:
  // the task's, as the scorer's.
  std::optional<ImageProfile> agent_image;
  std::function<void(const std::string& stage)> on_stage;
  // Called with the new snapshot's hash; must make it durable before scoring starts.
  std::function<Status(const std::string& sha256)> on_snapshot;
  // For GPU tasks: leases one GPU for a stage ("agent", "score") and returns its id; the lease
  // is given back when the returned holder is destroyed. `alone`: with no neighbour even when
  // the run shares GPUs (GpuRequest::alone). Empty for CPU tasks.
  struct StageGpu {
    std::shared_ptr<void> holder;
    std::vector<std::string> gpu_ids;
    std::string model;  // for the snapshot's manifest
  };
  std::function<Result<StageGpu>(const std::string& stage, bool alone)> lease_gpu;
};

// Removes what a scoring leaves in <attempt>/score-*/ besides its logs, plans and result: the
// extracted candidate, inputs, expected and runner outputs, the compile workspace (large, and
// made again by every scoring).
void dropScoringData(const std::filesystem::path& scoreRoot);

// Runs the attempt. Agent failures and failed gates are part of the returned result; an Error
// means the attempt could not be carried out (set-up failure, corrupt snapshot, cancelled).
Result<nlohmann::json> runAttempt(const AttemptPlan& plan, const AttemptServices& services);

}  // namespace akad
