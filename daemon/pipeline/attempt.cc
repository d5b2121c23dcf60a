#include "daemon/pipeline/attempt.h"

#include <chrono>

#include "common/log.h"
#include "common/paths.h"
#include "common/sha256.h"
#include "daemon/pipeline/files.h"
#include "daemon/pipeline/prepare.h"
#include "daemon/pipeline/score_result.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace akad {

void dropScoringData(const fs::path& scoreRoot) {
  std::error_code ec;
  fs::remove_all(scoreRoot / "candidate", ec);
  for (const char* d : {"gen", "expected", "out", "in-visible", "in-held_out", "ws", "channels", "jit-candidate"})
    fs::remove_all(scoreRoot / "gates" / d, ec);
}

namespace {

// The seccomp policies the sandboxes ran under, by content, so a result names exactly what
// confined the agent.
json policyHashes() {
  json out = json::object();
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dataRoot() / "policies", ec))
    if (e.path().extension() == ".json")
      if (auto h = sha256File(e.path())) out[e.path().filename().string()] = *h;
  return out;
}

void enterStage(const AttemptServices& s, const std::string& name) {
  if (s.on_stage) s.on_stage(name);
}

// The agent runs as the attempt's own uid (the candidate's), which owns its workspace.
struct AgentIdentity {
  uid_t uid;
  gid_t gid;
};

AgentIdentity agentIdentity(const ScoringEnvironment& env) {
  if (env.candidate_uid != 0) return {env.candidate_uid, env.candidate_gid};
  return {env.sandbox_uid, env.sandbox_gid};
}

// prepare: a fresh workspace file system at `ws`, filled for the agent and owned by it;
// unmounted and removed when the returned Workspace goes, however the attempt ends.
Result<Workspace> prepareWorkspace(const Task& task, const AttemptServices& s, const fs::path& ws, AgentIdentity who) {
  unmountEverythingUnder(ws);  // what an earlier run of this attempt may have left
  std::error_code ec;
  fs::remove_all(ws, ec);
  auto workspace = Workspace::create(ws, s.workspace_limits, who.uid, who.gid);
  if (!workspace) return workspace.error();
  if (auto st = prepareAgentWorkspace(task, s.scoring.tasks_root, ws); !st) return st.error();
  if (who.uid != 0)
    if (auto st = chownTree(ws, who.uid, who.gid); !st) return st.error();
  return workspace;
}

// The agent stage's outcome and the GPU it had (for the snapshot's manifest; the lease itself
// is given back before the snapshot is taken).
struct AgentRun {
  json result;
  std::vector<std::string> gpu_ids;
  std::string gpu_model;
};

Result<AgentRun> runAgent(const AttemptPlan& plan, const AttemptServices& s, const fs::path& ws, const fs::path& logs,
                          AgentIdentity who) {
  AttemptServices::StageGpu agentGpu;
  if (plan.task->gpu && s.lease_gpu) {
    auto leased = s.lease_gpu("agent", false);
    if (!leased) return leased.error();
    agentGpu = std::move(*leased);
  }
  AgentStageOptions ao;
  ao.image = s.agent_image ? *s.agent_image : s.scoring.image;
  ao.gpus = agentGpu.gpu_ids;
  ao.credentials = plan.credentials;
  ao.time_limit_s = plan.agent_time_limit_s;
  ao.allow_network = s.allow_agent_network;
  ao.logs_dir = logs;
  ao.outside_uid = who.uid;
  ao.outside_gid = who.gid;
  ao.canceller = s.scoring.canceller;
  auto agent = runAgentStage(*plan.task, plan.agent, ws, ao);
  if (!agent) return agent.error();
  return AgentRun{std::move(*agent), agentGpu.gpu_ids, agentGpu.model};
}

// snapshot: the workspace as a deterministic archive in the store, with what produced it.
Result<snapshot::Manifest> snapshotWorkspace(const AttemptPlan& plan, const AttemptServices& s, const fs::path& ws,
                                             const AgentRun& agent) {
  const Task& task = *plan.task;
  snapshot::CreateOptions co;
  co.exclude = task.exclude;
  json meta = {{"task", task.id},
               {"task_hash", task.content_hash},
               {"attempt", plan.attempt_id},
               {"run", plan.run_id},
               {"agent", plan.agent.name},
               {"image", s.scoring.image.name},
               {"gpu", agent.gpu_ids.empty() ? json(nullptr) : json(agent.gpu_ids.front())},
               {"gpu_model", agent.gpu_model.empty() ? json(nullptr) : json(agent.gpu_model)},
               {"policies", policyHashes()},
               {"agent_status", agent.result["status"]},
               {"created_at", static_cast<int64_t>(::time(nullptr))}};
  auto manifest = s.snapshots->add(ws, co, meta);
  if (!manifest) return Error{"snapshot of the workspace failed: " + manifest.error().message};
  return manifest;
}

// prepare -> agent -> snapshot; returns the snapshot's hash, made durable by on_snapshot.
Result<std::string> runAgentSide(const AttemptPlan& plan, const AttemptServices& s, const fs::path& dir,
                                 const fs::path& logs, json& result) {
  enterStage(s, "prepare");
  const fs::path ws = dir / "workspace";
  const AgentIdentity who = agentIdentity(s.scoring);
  auto workspace = prepareWorkspace(*plan.task, s, ws, who);
  if (!workspace) return workspace.error();

  enterStage(s, "agent");
  auto agent = runAgent(plan, s, ws, logs, who);
  if (!agent) return agent.error();
  if (s.scoring.canceller && s.scoring.canceller->cancelled()) return Error{"cancelled"};
  result["agent"] = agent->result;

  enterStage(s, "snapshot");
  auto manifest = snapshotWorkspace(plan, s, ws, *agent);
  if (!manifest) return manifest.error();
  result["snapshot_skipped"] = manifest->skipped;
  if (s.on_snapshot)
    if (auto st = s.on_snapshot(manifest->archive_sha256); !st) return st.error();
  workspace->remove();  // the snapshot is the truth from here on
  return manifest->archive_sha256;
}

// score: the snapshot extracted under a fresh score-*/ and scored; the extracted candidate and
// the scoring's data go on every way out, its logs and plans stay.
Result<json> scoreSnapshot(const AttemptPlan& plan, const AttemptServices& s, const fs::path& dir,
                           const std::string& sha) {
  auto archive = s.snapshots->openVerified(sha);
  if (!archive) return Error{"snapshot " + sha + " cannot be scored: " + archive.error().message};
  const fs::path scoreRoot = dir / ("score-" + randomHex(4));
  const fs::path candidate = scoreRoot / "candidate";
  std::error_code ec;
  fs::create_directories(scoreRoot, ec);
  struct DropScoringData {
    fs::path root;
    ~DropScoringData() { dropScoringData(root); }
  } dropOnExit{scoreRoot};
  if (auto st = snapshot::extractArchive(*archive, candidate, snapshot::Limits{}); !st)
    return Error{"snapshot " + sha + " was refused at extraction: " + st.error().message};
  ScoringEnvironment env = s.scoring;
  AttemptServices::StageGpu scoreGpu;  // held until scoring ends
  auto leaseFor = [&](bool alone) {
    return [&s, &scoreGpu, alone]() -> Result<std::vector<std::string>> {
      auto leased = s.lease_gpu("score", alone);
      if (!leased) return leased.error();
      scoreGpu = std::move(*leased);
      return scoreGpu.gpu_ids;
    };
  };
  if (plan.task->gpu && s.lease_gpu) env.acquire_gpus = leaseFor(false);
  env.on_gate = [&](const std::string& g) { enterStage(s, "score:" + g); };
  auto scored = scoreCandidate(*plan.task, candidate, scoreRoot / "gates", env);
  if (!scored) return scored.error();
  (*scored)["scoring_dir"] = (scoreRoot / "gates").string();
  if (!env.gpu_shared || scoreGpu.gpu_ids.empty()) return scored;
  // Timed beside the run's other attempts (the run option gpu_share): its times say so. A GPU
  // that ran out of memory there may have been filled by the neighbours, and a trusted driver
  // that crashed there is no verdict on the candidate, so such a scoring is done again, once,
  // holding the GPU alone; that one stands, whatever it finds, and says why it was made. The
  // candidate cannot tell which of the two it is in, nor see a verdict of either.
  const std::string why = sharedGpuRetryReason(*scored);
  if (why.empty()) {
    (*scored)["gpu_shared"] = true;
    return scored;
  }
  scoreGpu = {};  // the shared lease goes back first: the alone one waits for the GPU to empty
  ScoringEnvironment alone = env;
  alone.gpu_shared = false;
  alone.acquire_gpus = leaseFor(true);
  auto again = scoreCandidate(*plan.task, candidate, scoreRoot / "gates-alone", alone);
  if (!again) return again.error();
  (*again)["scoring_dir"] = (scoreRoot / "gates-alone").string();
  (*again)["gpu_shared_retry"] = {{"reason", why}, {"first_scoring_dir", (scoreRoot / "gates").string()}};
  return again;
}

}  // namespace

Result<json> runAttempt(const AttemptPlan& plan, const AttemptServices& s) {
  const auto started = std::chrono::steady_clock::now();
  const fs::path dir = s.attempts_dir / std::to_string(plan.attempt_id);
  const fs::path logs = dir / "logs";
  std::error_code ec;
  fs::create_directories(logs, ec);
  if (ec) return Error{"cannot create " + logs.string() + ": " + ec.message()};

  json result = json::object();
  std::string sha;
  if (plan.snapshot) {
    sha = *plan.snapshot;
  } else {
    auto made = runAgentSide(plan, s, dir, logs, result);
    if (!made) return made.error();
    sha = *made;
  }
  result["snapshot"] = sha;

  enterStage(s, "score");
  auto scored = scoreSnapshot(plan, s, dir, sha);
  if (!scored) return scored.error();
  for (auto& [k, v] : scored->items()) result[k] = v;
  // Where the time went: inside the commands (agent, builds, runners, checker) or in the
  // pipeline itself (copies, sandbox set-up, snapshot, store).
  const double total = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  if (s.scoring.canceller) {
    const double inside = s.scoring.canceller->commandSeconds();
    result["timing"] = {{"total_s", total}, {"in_commands_s", inside}, {"overhead_s", total - inside}};
  }
  return result;
}

}  // namespace akad
