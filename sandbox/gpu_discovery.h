#pragma once
// GPU discovery: which GPUs this host has, and what a sandbox needs to be given one of them
// (device nodes to bind and allow, environment). Reads only the kernel drivers' text files, so it
// needs no vendor library and can be pointed at a fake tree in tests.
//
//   NVIDIA  <proc>/driver/nvidia/gpus/<pci bus>/information   (Model, GPU UUID, Bus Location,
//           Device Minor); nodes /dev/nvidia<minor> plus those of /dev/nvidiactl, /dev/nvidia-uvm,
//           /dev/nvidia-uvm-tools that exist under <dev>.
//   AMD     <sys>/class/kfd/kfd/topology/nodes/<n>/{gpu_id,name,properties,mem_banks/*/properties};
//           nodes /dev/kfd and /dev/dri/renderD<drm_render_minor>.
//
// device_nodes are the host's paths ("/dev/..."), whatever DiscoveryRoots::dev says: discovery
// only looks at names, and the sandbox's passthrough stats the real nodes when it binds them.
// docs/images.md ("GPU discovery") documents every field and decoding.

#include "common/result.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

namespace akad::gpu {

struct GpuDevice {
  std::string id;      // stable id used by --gpu and leases: vendor + index, "nvidia0", "amd1"
  std::string vendor;  // "nvidia" | "amd"
  int index = 0;       // position among this vendor's GPUs in discovery order
  std::string model;   // "NVIDIA H200"; AMD: the kfd node name
  std::string uuid;    // "GPU-4421ad8f-..." (NVIDIA); AMD: "GPU-<unique_id hex>" where the kernel has it
  std::string pci_bus;  // "0000:00:06.0"
  uint64_t memory_bytes = 0;  // 0 where the driver's files do not say (NVIDIA's do not)
  std::string gfx_target;     // AMD only: "gfx942"
  std::vector<std::string> device_nodes;      // what to bind and allow in the device cgroup
  std::map<std::string, std::string> env;     // selects this GPU inside the sandbox
};

struct DiscoveryRoots {
  std::filesystem::path proc = "/proc";
  std::filesystem::path sys = "/sys";
  std::filesystem::path dev = "/dev";
};

// NVIDIA GPUs first (by PCI bus), then AMD GPUs (by kfd node number). A missing driver tree means
// no GPUs of that vendor, not an error; a tree that exists but cannot be read or parsed is one.
Result<std::vector<GpuDevice>> discoverGpus(const DiscoveryRoots& roots = {});

// "gfx" + major (decimal) + minor and stepping (one hex digit each): 90402 -> "gfx942",
// 90010 -> "gfx90a", 110000 -> "gfx1100". Empty for 0 (the kernel did not say).
std::string gfxTargetName(uint64_t gfxTargetVersion);

// kfd's location_id is the PCI routing id (bus << 8 | device << 3 | function); the domain is a
// separate property. Gives "dddd:bb:dd.f".
std::string pciBusFromLocation(uint64_t domain, uint64_t locationId);

nlohmann::json toJson(const GpuDevice& device);

}  // namespace akad::gpu
