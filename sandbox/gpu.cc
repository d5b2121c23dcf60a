#include "sandbox/gpu.h"

#include <algorithm>

namespace akad::box {

Status applyGpuPassthrough(SandboxSpec& spec, const gpu::DiscoveryRoots& roots) {
  auto found = gpu::discoverGpus(roots);
  if (!found) return Error{"GPU discovery failed: " + found.error().message};
  std::map<std::string, std::string> visible;  // variable -> comma-joined values
  for (const std::string& id : spec.gpus) {
    auto it = std::find_if(found->begin(), found->end(), [&](const gpu::GpuDevice& g) { return g.id == id; });
    if (it == found->end()) {
      std::string known;
      for (const auto& g : *found) known += (known.empty() ? "" : ", ") + g.id;
      return Error{"--gpu " + id + ": no such GPU on this host (found: " + (known.empty() ? "none" : known) + ")"};
    }
    for (const std::string& node : it->device_nodes)
      if (std::find(spec.devices.begin(), spec.devices.end(), node) == spec.devices.end()) spec.devices.push_back(node);
    for (const auto& [k, v] : it->env) visible[k] += (visible[k].empty() ? "" : ",") + v;
  }
  // A caller's explicit value wins: the variables only pick devices, they isolate nothing.
  for (const auto& [k, v] : visible) spec.env.emplace(k, v);
  return {};
}

}  // namespace akad::box
