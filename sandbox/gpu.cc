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
  // The driver's user-space libraries (libcuda, libnvidia-ml): on hosts that keep them in their
  // own mount under /usr/local/nvidia, the host root view's /usr bind does not show them
  // (binds are not recursive), so they are bound explicitly.
  std::error_code ec;
  const bool nvidia = std::any_of(found->begin(), found->end(), [&](const gpu::GpuDevice& g) {
    return g.vendor == "nvidia" && std::find(spec.gpus.begin(), spec.gpus.end(), g.id) != spec.gpus.end();
  });
  if (nvidia && std::filesystem::is_directory("/usr/local/nvidia", ec)) {
    bool bound = std::any_of(spec.binds.begin(), spec.binds.end(), [](const auto& b) { return b.dst == "/usr/local/nvidia"; });
    if (!bound) spec.binds.push_back(BindMount{"/usr/local/nvidia", "/usr/local/nvidia", false});
    if (std::filesystem::is_directory("/usr/local/nvidia/lib64", ec))
      spec.env.emplace("LD_LIBRARY_PATH", "/usr/local/nvidia/lib64");
  }
  return {};
}

}  // namespace akad::box
