#include "daemon/pipeline/attempt.h"

#include <chrono>

#include "common/log.h"
#include "common/paths.h"
#include "common/sha256.h"
#include "daemon/pipeline/files.h"
#include "daemon/pipeline/prepare.h"

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

}  // namespace

Result<json> runAttempt(const AttemptPlan& plan, const AttemptServices& s) {
  const auto started = std::chrono::steady_clock::now();
  const Task& task = *plan.task;
  const fs::path dir = s.attempts_dir / std::to_string(plan.attempt_id);
  const fs::path logs = dir / "logs";
  auto stage = [&](const std::string& name) {
    if (s.on_stage) s.on_stage(name);
  };
  auto cancelled = [&] { return s.scoring.canceller && s.scoring.canceller->cancelled(); };
  std::error_code ec;
  fs::create_directories(logs, ec);
  if (ec) return Error{"cannot create " + logs.string() + ": " + ec.message()};

  json result = json::object();
  std::string sha;
  if (plan.snapshot) {
    sha = *plan.snapshot;
  } else {
    stage("prepare");
    const fs::path ws = dir / "workspace";
    unmountEverythingUnder(ws);  // what an earlier run of this attempt may have left
    fs::remove_all(ws, ec);
    // The agent runs as the attempt's own uid (the candidate's), which owns its workspace.
    const uid_t agentUid = s.scoring.candidate_uid != 0 ? s.scoring.candidate_uid : s.scoring.sandbox_uid;
    const gid_t agentGid = s.scoring.candidate_uid != 0 ? s.scoring.candidate_gid : s.scoring.sandbox_gid;
    // Unmounted and removed when this scope ends, however it ends.
    auto workspace = Workspace::create(ws, s.workspace_limits, agentUid, agentGid);
    if (!workspace) return workspace.error();
    if (auto st = prepareAgentWorkspace(task, s.scoring.tasks_root, ws); !st) return st.error();
    if (agentUid != 0)
      if (auto st = chownTree(ws, agentUid, agentGid); !st) return st.error();

    stage("agent");
    AttemptServices::StageGpu agentGpu;
    if (task.gpu && s.lease_gpu) {
      auto leased = s.lease_gpu("agent");
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
    ao.outside_uid = agentUid;
    ao.outside_gid = agentGid;
    ao.canceller = s.scoring.canceller;
    auto agent = runAgentStage(task, plan.agent, ws, ao);
    agentGpu.holder.reset();  // the GPU is free while the snapshot is taken
    if (!agent) return agent.error();
    if (cancelled()) return Error{"cancelled"};
    result["agent"] = *agent;

    stage("snapshot");
    snapshot::CreateOptions co;
    co.exclude = task.exclude;
    json meta = {{"task", task.id},
                 {"task_hash", task.content_hash},
                 {"attempt", plan.attempt_id},
                 {"run", plan.run_id},
                 {"agent", plan.agent.name},
                 {"image", s.scoring.image.name},
                 {"gpu", agentGpu.gpu_ids.empty() ? json(nullptr) : json(agentGpu.gpu_ids.front())},
                 {"gpu_model", agentGpu.model.empty() ? json(nullptr) : json(agentGpu.model)},
                 {"policies", policyHashes()},
                 {"agent_status", (*agent)["status"]},
                 {"created_at", static_cast<int64_t>(::time(nullptr))}};
    auto manifest = s.snapshots->add(ws, co, meta);
    if (!manifest) return Error{"snapshot of the workspace failed: " + manifest.error().message};
    sha = manifest->archive_sha256;
    result["snapshot_skipped"] = manifest->skipped;
    if (s.on_snapshot)
      if (auto st = s.on_snapshot(sha); !st) return st.error();
    workspace->remove();  // the snapshot is the truth from here on
  }
  result["snapshot"] = sha;

  stage("score");
  auto archive = s.snapshots->openVerified(sha);
  if (!archive) return Error{"snapshot " + sha + " cannot be scored: " + archive.error().message};
  const fs::path scoreRoot = dir / ("score-" + randomHex(4));
  const fs::path candidate = scoreRoot / "candidate";
  fs::create_directories(scoreRoot, ec);
  // The extracted candidate and the scoring's data go on every way out; logs and plans stay.
  struct DropScoringData {
    fs::path root;
    ~DropScoringData() { dropScoringData(root); }
  } dropOnExit{scoreRoot};
  if (auto st = snapshot::extractArchive(*archive, candidate, snapshot::Limits{}); !st)
    return Error{"snapshot " + sha + " was refused at extraction: " + st.error().message};
  ScoringEnvironment env = s.scoring;
  AttemptServices::StageGpu scoreGpu;  // held until scoring ends
  if (task.gpu && s.lease_gpu) {
    env.acquire_gpus = [&]() -> Result<std::vector<std::string>> {
      auto leased = s.lease_gpu("score");
      if (!leased) return leased.error();
      scoreGpu = std::move(*leased);
      return scoreGpu.gpu_ids;
    };
  }
  env.on_gate = [&](const std::string& g) { stage("score:" + g); };
  auto scored = scoreCandidate(task, candidate, scoreRoot / "gates", env);
  if (!scored) return scored.error();
  for (auto& [k, v] : scored->items()) result[k] = v;
  result["scoring_dir"] = (scoreRoot / "gates").string();
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
