#include "daemon/pipeline/attempt_setup.h"

namespace akad {

Result<AttemptImages> attemptImages(const std::filesystem::path& imagesDir, const Task& task,
                                    const AgentDefinition& agent) {
  auto image = loadImageProfile(imagesDir, task.image);
  if (!image) return image.error();
  AttemptImages out{*image, std::nullopt};
  if (!agent.image.empty()) {
    out.agent = *image;
    if (auto st = layerImageProfile(*out.agent, imagesDir, agent.image); !st)
      return Error{"agent '" + agent.name + "' needs image '" + agent.image + "': " + st.error().message};
  }
  return out;
}

AttemptServices baseServices(const AttemptSetup& setup, const AttemptImages& images,
                             snapshot::SnapshotStore* snapshots) {
  AttemptServices s;
  s.attempts_dir = setup.attempts_dir;
  s.snapshots = snapshots;
  s.allow_agent_network = setup.allow_agent_network;
  s.workspace_limits = setup.workspace_limits;
  s.scoring.tasks_root = setup.tasks_def_root;
  s.scoring.trusted_cache = setup.trusted_cache;
  s.scoring.build_cache = setup.build_cache;
  s.scoring.akacheck = setup.akacheck;
  s.scoring.image = images.task;
  s.agent_image = images.agent;
  s.scoring.sandbox_uid = setup.sandbox_uid;
  s.scoring.sandbox_gid = setup.sandbox_gid;
  s.scoring.timing_slots = setup.timing_slots;
  return s;
}

}  // namespace akad
