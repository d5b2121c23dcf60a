#pragma once
// The shared area between akad (the front end) and the akad-node programs that Slurm starts
// on the nodes (docs/operations.md, "Slurm"). One folder on a file system every node mounts:
//
//   tasks/<hash>/def/...          task definition trees, copied once (by rename, so whole)
//   jobs/a<attempt>-<nonce>/      one per submission of an attempt
//     spec.json                   what to run (AttemptJobSpec); no secrets
//     credentials.json            the agent's keys, mode 0600; the node program deletes it
//     snapshot.tar.zst (+ .json)  a re-score: the snapshot to score
//     out-<job>-<restart>/        one per incarnation of the Slurm job (a requeue starts another)
//       stage                     the stage the attempt is in
//       snapshot.tar.zst (+ .json) the agent's snapshot, written before the result
//       result.json               written last: {"ok": true, "result": ...} or {"ok": false,
//                                 "error": ...}
//
// Every file a reader acts on is written with writeFileDurably (common/durable_file.h), so a job that dies leaves nothing that could be mistaken for a result. The
// front end takes the result of the newest incarnation only and verifies the snapshot's hash.

#include <sys/types.h>

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/result.h"

namespace akad::slurm {

struct AttemptJobSpec {
  std::int64_t attempt_id = 0;
  std::string run_id;
  std::string task_id;    // "suite/name"
  std::string task_hash;  // the definition is tasks/<hash>/def/<suite>/<name> in the shared area
  nlohmann::json agent;   // agentToJson of the resolved definition
  double agent_time_limit_s = 0;
  std::optional<std::string> snapshot;  // a re-score: snapshot.tar.zst in the job folder
  // The node's installation (the same paths on every node, docs/operations.md).
  std::string images_dir;
  std::string akacheck;
  bool allow_agent_network = true;
  std::uint64_t workspace_bytes = 0;
  std::uint64_t workspace_inodes = 0;
  uid_t sandbox_uid = 0;
  gid_t sandbox_gid = 0;
  uid_t candidate_uid = 0;  // 0: the sandbox uid
  std::string node_cache;   // trusted builds kept on the node across jobs; empty: per job
};

nlohmann::json toJson(const AttemptJobSpec& spec);
Result<AttemptJobSpec> specFromJson(const nlohmann::json& j);

// Copies a folder tree to `to` whole or not at all: into a temporary sibling, then one rename.
// A tree already at `to` is kept (task definitions are immutable by hash).
Status publishTree(const std::filesystem::path& from, const std::filesystem::path& to);

std::string incarnationName(const std::string& job, int restart);

// Runs argv (no shell), waits; its stdout, at most 1 MiB. Used for sbatch, squeue, scontrol,
// scancel.
struct CommandOutput {
  int exit_code = -1;
  std::string out;
  std::string err;
};
Result<CommandOutput> runCommand(const std::vector<std::string>& argv);

}  // namespace akad::slurm
