#pragma once
// akad's compat layer for AKA tasks on NVIDIA (docs/aka.md, "Compat layer"; the layer itself is
// images/cuda-hip/aka-compat, docs/images.md). A task classified `compat` at an NVIDIA import
// runs with it: the layer comes with the cuda-hip image that the task's image binds, its Python
// module goes on PYTHONPATH with the task's features in AKAD_AKA_COMPAT, and what it does is
// appended to a record file per command, bound writable, that the scorer reads after the
// sandbox has ended. On AMD, and for unchanged tasks, nothing is put in place.

#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "daemon/pipeline/sandbox_run.h"
#include "daemon/pipeline/score.h"

namespace akad::aka {

struct WrapSpec;

struct CompatLayer {
  std::vector<std::string> features;  // put in place for every command
  std::filesystem::path hostDir;      // images/cuda-hip/aka-compat
  std::string sandboxDir;             // where the task's sandboxes see it
  std::string unavailable;            // why the features the task needs are not applied, if so
  bool active() const { return !features.empty(); }
};

// The features the task needs at run time (perf-helpers were filled in at import) and where the
// layer is: in the cuda-hip image folder that the task's image binds at /akad/images/cuda-hip.
CompatLayer locateCompatLayer(const WrapSpec& spec, const ImageProfile& image);

// Puts the layer on `r`'s PYTHONPATH with its features, and binds the command's record folder
// (made and given to uid/gid here).
Status addCompatLayer(SandboxRequest& r, const CompatLayer& layer, const std::filesystem::path& recordDir, uid_t uid,
                      gid_t gid);

// What the layer recorded during one command: its JSON lines (malformed ones skipped), at most
// `limit` of them. A record that is not a regular file (the sandbox's code could have put
// anything there) is ignored.
std::vector<nlohmann::json> readCompatRecord(const std::filesystem::path& recordDir, std::size_t limit);

}  // namespace akad::aka
