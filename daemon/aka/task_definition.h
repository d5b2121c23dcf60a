#pragma once
// What the importer writes for a runnable AKA task (import.h): task.yaml for akad's task
// loader, aka.json for the wrap scorer (wrap_score.h), and the folder itself, checked by the
// loader before it replaces an earlier import.

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <yaml-cpp/yaml.h>

#include "common/result.h"
#include "daemon/aka/config.h"
#include "daemon/aka/held_out.h"
#include "daemon/aka/import.h"
#include "daemon/aka/task_folder.h"
#include "daemon/aka/trust.h"

namespace akad::aka {

// task.yaml's limits: AKA's timeouts (each at most maxS), 16G memory, 1024 pids, an hour for the
// agent.
void emitLimits(YAML::Emitter& y, const AkaTaskConfig& c, double maxS);
// task.yaml: the prompt (with what the scorer takes of the editable files), the wrap harness,
// the platform's image, AKA's compile command and its timeouts.
std::string taskYaml(const ImportedTask& t, const AkaTaskConfig& c, Platform platform);
// aka.json: AKA's commands, the trust mapping, the class, the commit, the held-out shapes and
// the hash of every file the task was made from.
nlohmann::json wrapSpec(const ImportedTask& t, const AkaTaskConfig& c, const TrustMapping& m, const ImportReport& r,
                        const std::vector<Injection>& heldOut, const nlohmann::json& generated);
// Writes the task into <root>/<suite>/<task>/ through a staging tree laid out like a tasks root,
// so akad's own loader checks it before it replaces an earlier import.
Status writeTaskDefinition(const std::filesystem::path& root, const ImportedTask& t, const TaskFolder& folder,
                           const std::string& yaml, const nlohmann::json& spec,
                           const std::map<std::string, std::string>& extra = {});

}  // namespace akad::aka
