#include "sandbox/gpu_discovery.h"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <fstream>
#include <optional>
#include <sstream>
#include <system_error>

namespace akad::gpu {
namespace fs = std::filesystem;

namespace {

std::string trim(const std::string& s) {
  const char* ws = " \t\r\n";
  size_t b = s.find_first_not_of(ws);
  if (b == std::string::npos) return "";
  size_t e = s.find_last_not_of(ws);
  return s.substr(b, e - b + 1);
}

Result<std::string> readTextFile(const fs::path& path) {
  std::ifstream in(path);
  if (!in) return errnoError("cannot read " + path.string());
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) return errnoError("cannot read " + path.string());
  return text.str();
}

std::optional<uint64_t> parseUnsigned(const std::string& s) {
  uint64_t v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size() || s.empty()) return std::nullopt;
  return v;
}

// Subdirectories of `dir`, or none when `dir` does not exist. Any other failure is an error.
Result<std::vector<fs::path>> listDirectories(const fs::path& dir) {
  std::vector<fs::path> out;
  std::error_code ec;
  if (!fs::exists(dir, ec)) {
    if (ec && ec != std::errc::no_such_file_or_directory && ec != std::errc::not_a_directory)
      return Error{"cannot look at " + dir.string() + ": " + ec.message()};
    return out;
  }
  fs::directory_iterator it(dir, ec);
  if (ec) return Error{"cannot list " + dir.string() + ": " + ec.message()};
  for (const fs::directory_entry& e : it) {
    if (e.is_directory(ec)) out.push_back(e.path());
  }
  return out;
}

bool existsUnder(const fs::path& root, const std::string& name) {
  std::error_code ec;
  return fs::exists(root / name, ec);
}

// ---- NVIDIA ----------------------------------------------------------------------------------

// The driver's "Key: value" lines; values may be padded with tabs and spaces.
Result<std::map<std::string, std::string>> parseNvidiaInformation(const fs::path& path) {
  Result<std::string> text = readTextFile(path);
  if (!text) return text.error();
  std::map<std::string, std::string> fields;
  std::istringstream lines(*text);
  std::string line;
  int number = 0;
  while (std::getline(lines, line)) {
    ++number;
    if (trim(line).empty()) continue;
    size_t colon = line.find(':');
    if (colon == std::string::npos || trim(line.substr(0, colon)).empty())
      return Error{"malformed NVIDIA GPU information " + path.string() + " line " + std::to_string(number) +
                   ": expected 'Key: value', got '" + trim(line) + "'"};
    fields[trim(line.substr(0, colon))] = trim(line.substr(colon + 1));
  }
  return fields;
}

Result<std::vector<GpuDevice>> discoverNvidia(const DiscoveryRoots& roots) {
  Result<std::vector<fs::path>> dirs = listDirectories(roots.proc / "driver/nvidia/gpus");
  if (!dirs) return dirs.error();
  std::sort(dirs->begin(), dirs->end());  // directory names are PCI bus ids: bus order

  std::vector<GpuDevice> gpus;
  for (const fs::path& dir : *dirs) {
    fs::path info = dir / "information";
    Result<std::map<std::string, std::string>> fields = parseNvidiaInformation(info);
    if (!fields) return fields.error();
    auto field = [&](const char* key) {
      auto it = fields->find(key);
      return it == fields->end() ? std::string() : it->second;
    };
    std::optional<uint64_t> minor = parseUnsigned(field("Device Minor"));
    if (!minor || *minor > 254)  // 255 is nvidiactl's minor
      return Error{"NVIDIA GPU information " + info.string() + ": 'Device Minor' is missing or not a GPU minor ('" +
                   field("Device Minor") + "')"};

    GpuDevice g;
    g.vendor = "nvidia";
    g.index = static_cast<int>(gpus.size());
    g.id = "nvidia" + std::to_string(g.index);
    g.model = field("Model");
    g.uuid = field("GPU UUID");
    g.pci_bus = field("Bus Location").empty() ? dir.filename().string() : field("Bus Location");
    g.device_nodes.push_back("/dev/nvidia" + std::to_string(*minor));
    // Shared control nodes: every CUDA process needs nvidiactl and the UVM pair.
    for (const char* shared : {"nvidiactl", "nvidia-uvm", "nvidia-uvm-tools"}) {
      if (existsUnder(roots.dev, shared)) g.device_nodes.push_back(std::string("/dev/") + shared);
    }
    // The UUID selects this GPU whatever number CUDA would give it; inside a sandbox that only
    // sees this GPU, "0" would do as well.
    g.env["CUDA_VISIBLE_DEVICES"] = g.uuid.empty() ? "0" : g.uuid;
    g.env["HIP_VISIBLE_DEVICES"] = "0";
    gpus.push_back(std::move(g));
  }
  return gpus;
}

// ---- AMD -------------------------------------------------------------------------------------

// kfd's "name value" lines, every value an unsigned integer.
Result<std::map<std::string, uint64_t>> parseKfdProperties(const fs::path& path) {
  Result<std::string> text = readTextFile(path);
  if (!text) return text.error();
  std::map<std::string, uint64_t> props;
  std::istringstream lines(*text);
  std::string line;
  int number = 0;
  while (std::getline(lines, line)) {
    ++number;
    std::string t = trim(line);
    if (t.empty()) continue;
    std::istringstream words(t);
    std::string key, value, extra;
    words >> key >> value >> extra;
    std::optional<uint64_t> v = parseUnsigned(value);
    if (key.empty() || !v || !extra.empty())
      return Error{"malformed kfd topology properties " + path.string() + " line " + std::to_string(number) +
                   ": expected '<name> <unsigned integer>', got '" + t + "'"};
    props[key] = *v;
  }
  return props;
}

// Sum of the node's memory banks, else the older local_mem_size property.
Result<uint64_t> amdMemoryBytes(const fs::path& node, const std::map<std::string, uint64_t>& props) {
  Result<std::vector<fs::path>> banks = listDirectories(node / "mem_banks");
  if (!banks) return banks.error();
  uint64_t total = 0;
  for (const fs::path& bank : *banks) {
    Result<std::map<std::string, uint64_t>> bp = parseKfdProperties(bank / "properties");
    if (!bp) return bp.error();
    auto size = bp->find("size_in_bytes");
    if (size != bp->end()) total += size->second;
  }
  if (total == 0) {
    auto local = props.find("local_mem_size");
    if (local != props.end()) total = local->second;
  }
  return total;
}

Result<std::vector<GpuDevice>> discoverAmd(const DiscoveryRoots& roots) {
  Result<std::vector<fs::path>> nodes = listDirectories(roots.sys / "class/kfd/kfd/topology/nodes");
  if (!nodes) return nodes.error();
  // Node numbers are kfd's enumeration order; compare them as numbers (10 after 9).
  auto nodeNumber = [](const fs::path& p) { return parseUnsigned(p.filename().string()).value_or(UINT64_MAX); };
  std::sort(nodes->begin(), nodes->end(),
            [&](const fs::path& a, const fs::path& b) { return nodeNumber(a) < nodeNumber(b); });

  std::vector<GpuDevice> gpus;
  for (const fs::path& node : *nodes) {
    Result<std::string> gpuIdText = readTextFile(node / "gpu_id");
    if (!gpuIdText) return gpuIdText.error();
    std::optional<uint64_t> gpuId = parseUnsigned(trim(*gpuIdText));
    if (!gpuId)
      return Error{"malformed kfd topology file " + (node / "gpu_id").string() + ": expected an unsigned integer, got '" +
                   trim(*gpuIdText) + "'"};
    if (*gpuId == 0) continue;  // a CPU node

    fs::path propsPath = node / "properties";
    Result<std::map<std::string, uint64_t>> props = parseKfdProperties(propsPath);
    if (!props) return props.error();
    auto prop = [&](const char* key) -> std::optional<uint64_t> {
      auto it = props->find(key);
      if (it == props->end()) return std::nullopt;
      return it->second;
    };
    std::optional<uint64_t> renderMinor = prop("drm_render_minor");
    if (!renderMinor)
      return Error{"kfd topology properties " + propsPath.string() +
                   ": GPU node (gpu_id " + std::to_string(*gpuId) + ") has no drm_render_minor"};

    GpuDevice g;
    g.vendor = "amd";
    g.index = static_cast<int>(gpus.size());
    g.id = "amd" + std::to_string(g.index);
    g.gfx_target = gfxTargetName(prop("gfx_target_version").value_or(0));
    Result<std::string> name = readTextFile(node / "name");
    g.model = name ? trim(*name) : "";
    if (g.model.empty()) g.model = g.gfx_target;
    if (auto unique = prop("unique_id"); unique && *unique != 0) {
      char buf[24];
      std::snprintf(buf, sizeof buf, "GPU-%016llx", static_cast<unsigned long long>(*unique));
      g.uuid = buf;
    }
    if (auto location = prop("location_id")) g.pci_bus = pciBusFromLocation(prop("domain").value_or(0), *location);
    Result<uint64_t> memory = amdMemoryBytes(node, *props);
    if (!memory) return memory.error();
    g.memory_bytes = *memory;
    g.device_nodes = {"/dev/kfd", "/dev/dri/renderD" + std::to_string(*renderMinor)};
    // ROCm only enumerates GPUs whose render node the device cgroup lets it open, so inside the
    // sandbox this GPU is device 0.
    g.env["HIP_VISIBLE_DEVICES"] = "0";
    g.env["ROCR_VISIBLE_DEVICES"] = "0";
    gpus.push_back(std::move(g));
  }
  return gpus;
}

}  // namespace

std::string gfxTargetName(uint64_t v) {
  if (v == 0) return "";
  uint64_t major = v / 10000, minor = (v / 100) % 100, stepping = v % 100;
  char buf[40];
  std::snprintf(buf, sizeof buf, "gfx%llu%llx%llx", static_cast<unsigned long long>(major),
                static_cast<unsigned long long>(minor), static_cast<unsigned long long>(stepping));
  return buf;
}

std::string pciBusFromLocation(uint64_t domain, uint64_t locationId) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%04llx:%02llx:%02llx.%llx", static_cast<unsigned long long>(domain & 0xffff),
                static_cast<unsigned long long>((locationId >> 8) & 0xff),
                static_cast<unsigned long long>((locationId >> 3) & 0x1f),
                static_cast<unsigned long long>(locationId & 0x7));
  return buf;
}

Result<std::vector<GpuDevice>> discoverGpus(const DiscoveryRoots& roots) {
  Result<std::vector<GpuDevice>> nvidia = discoverNvidia(roots);
  if (!nvidia) return nvidia.error();
  Result<std::vector<GpuDevice>> amd = discoverAmd(roots);
  if (!amd) return amd.error();
  std::vector<GpuDevice> all = std::move(*nvidia);
  for (GpuDevice& g : *amd) all.push_back(std::move(g));
  return all;
}

nlohmann::json toJson(const GpuDevice& g) {
  nlohmann::json j{{"id", g.id},
                   {"vendor", g.vendor},
                   {"index", g.index},
                   {"model", g.model},
                   {"uuid", g.uuid},
                   {"pci_bus", g.pci_bus},
                   {"memory_bytes", g.memory_bytes},
                   {"device_nodes", g.device_nodes},
                   {"env", g.env}};
  if (!g.gfx_target.empty()) j["gfx_target"] = g.gfx_target;
  return j;
}

}  // namespace akad::gpu
