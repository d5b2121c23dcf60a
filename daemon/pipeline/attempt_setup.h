#pragma once
// What every attempt's services are made of, wherever the attempt runs: the daemon's own
// executor (daemon/scheduler.cc) and the Slurm executor's node program (daemon/slurm/node_main.cc)
// build their AttemptServices from the same pieces, so both run the same pipeline.

#include <sys/types.h>

#include <filesystem>
#include <optional>

#include "common/result.h"
#include "daemon/pipeline/attempt.h"
#include "daemon/pipeline/image.h"
#include "daemon/pipeline/timing_slots.h"

namespace akad {

struct AttemptSetup {
  std::filesystem::path attempts_dir;   // per-attempt folders (workspaces, logs, scorings)
  std::filesystem::path tasks_def_root; // the task version's definition tree (tasks/<hash>/def)
  std::filesystem::path trusted_cache;  // trusted builds, per task version
  std::filesystem::path build_cache;    // wrapped candidates' builds (empty: none kept)
  std::filesystem::path images_dir;
  std::filesystem::path akacheck;
  bool allow_agent_network = true;
  WorkspaceLimits workspace_limits;
  uid_t sandbox_uid = 0;
  gid_t sandbox_gid = 0;
  TimingSlots* timing_slots = nullptr;  // the host's performance gates at once (timing_slots.h)
};

// The task's image, and for an agent that brings its own program (`image:` in its definition)
// that image over the task's; the scorer's sandboxes keep the task's alone.
struct AttemptImages {
  ImageProfile task;
  std::optional<ImageProfile> agent;
};
Result<AttemptImages> attemptImages(const std::filesystem::path& imagesDir, const Task& task,
                                    const AgentDefinition& agent);

// The services without the callbacks, the GPU lease and the attempt's own uid, which the caller
// adds: they differ between the daemon and a node.
AttemptServices baseServices(const AttemptSetup& setup, const AttemptImages& images,
                             snapshot::SnapshotStore* snapshots);

}  // namespace akad
