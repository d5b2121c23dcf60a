// GPU discovery against (a) a fake /proc + /dev built from files copied off the H200 machine,
// (b) a FAKE kfd sysfs tree written in ROCm's documented format (no AMD GPU exists here), and
// (c) this host's real /proc, /sys and /dev.

#include "sandbox/gpu_discovery.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>

namespace akad::gpu {
namespace {
namespace fs = std::filesystem;

const fs::path kFixtures = fs::path(AKAD_GPU_FIXTURES);

std::string readFile(const fs::path& p) {
  std::ifstream in(p);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

void writeFile(const fs::path& p, const std::string& text) {
  fs::create_directories(p.parent_path());
  std::ofstream(p) << text;
}

// A scratch directory removed with everything in it when the test ends.
class ScratchDir {
 public:
  ScratchDir() {
    std::string tmpl = (fs::temp_directory_path() / "akad-gpu-test-XXXXXX").string();
    path_ = mkdtemp(tmpl.data());
  }
  ~ScratchDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

// The H200 machine's /proc/driver/nvidia/gpus/<bus>/information, and a /dev holding files named
// like the character devices its `ls -l /dev/nvidia*` listed (names are all discovery reads).
DiscoveryRoots fakeH200Tree(const fs::path& root) {
  DiscoveryRoots roots{root / "proc", root / "sys", root / "dev"};
  writeFile(roots.proc / "driver/nvidia/gpus/0000:00:06.0/information",
            readFile(kFixtures / "nvidia-h200/information"));
  std::istringstream listing(readFile(kFixtures / "nvidia-h200/dev_listing.txt"));
  std::regex topLevelCharDevice(R"(^c.* /dev/([a-z0-9-]+)$)");
  std::string line;
  int nodes = 0;
  while (std::getline(listing, line)) {
    std::smatch m;
    if (std::regex_match(line, m, topLevelCharDevice)) {
      writeFile(roots.dev / m[1].str(), "");
      ++nodes;
    }
  }
  EXPECT_EQ(nodes, 4) << "fixture listing changed";
  fs::create_directories(roots.sys);
  return roots;
}

DiscoveryRoots fakeAmdTree(const fs::path& root) {
  DiscoveryRoots roots{root / "proc", root / "sys", root / "dev"};
  fs::create_directories(roots.proc);
  fs::create_directories(roots.dev);
  fs::copy(kFixtures / "fake-amd-2gpu/sys", roots.sys, fs::copy_options::recursive);
  return roots;
}

TEST(GpuDiscovery, FakeNvidiaProcFromH200Fixture_OneGpu) {
  ScratchDir dir;
  Result<std::vector<GpuDevice>> gpus = discoverGpus(fakeH200Tree(dir.path()));
  ASSERT_TRUE(gpus.ok()) << gpus.error().message;
  ASSERT_EQ(gpus->size(), 1u);
  const GpuDevice& g = gpus->at(0);
  EXPECT_EQ(g.id, "nvidia0");
  EXPECT_EQ(g.vendor, "nvidia");
  EXPECT_EQ(g.index, 0);
  EXPECT_EQ(g.model, "NVIDIA H200");
  EXPECT_EQ(g.uuid, "GPU-4421ad8f-e3e4-cef2-4db5-6e174abaa159");
  EXPECT_EQ(g.pci_bus, "0000:00:06.0");
  EXPECT_EQ(g.memory_bytes, 0u);  // the driver's information file does not say
  EXPECT_EQ(g.gfx_target, "");
  EXPECT_EQ(g.device_nodes,
            (std::vector<std::string>{"/dev/nvidia0", "/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools"}));
  EXPECT_EQ(g.env.at("CUDA_VISIBLE_DEVICES"), "GPU-4421ad8f-e3e4-cef2-4db5-6e174abaa159");
  EXPECT_EQ(g.env.at("HIP_VISIBLE_DEVICES"), "0");
}

TEST(GpuDiscovery, FakeNvidiaProc_ListsOnlyControlNodesThatExist) {
  ScratchDir dir;
  DiscoveryRoots roots = fakeH200Tree(dir.path());
  fs::remove(roots.dev / "nvidia-uvm-tools");
  fs::remove(roots.dev / "nvidia-uvm");
  Result<std::vector<GpuDevice>> gpus = discoverGpus(roots);
  ASSERT_TRUE(gpus.ok()) << gpus.error().message;
  EXPECT_EQ(gpus->at(0).device_nodes, (std::vector<std::string>{"/dev/nvidia0", "/dev/nvidiactl"}));
}

TEST(GpuDiscovery, FakeNvidiaProc_TwoGpusInBusOrderUseTheirMinors) {
  ScratchDir dir;
  DiscoveryRoots roots = fakeH200Tree(dir.path());
  // A second GPU on a lower bus with minor 3: it comes first and keeps its own minor.
  std::string info = readFile(kFixtures / "nvidia-h200/information");
  info = std::regex_replace(info, std::regex("Device Minor:[^\n]*"), "Device Minor: \t 3");
  info = std::regex_replace(info, std::regex("Bus Location:[^\n]*"), "Bus Location: \t 0000:00:05.0");
  info = std::regex_replace(info, std::regex("GPU-4421ad8f"), "GPU-00000000");
  writeFile(roots.proc / "driver/nvidia/gpus/0000:00:05.0/information", info);
  Result<std::vector<GpuDevice>> gpus = discoverGpus(roots);
  ASSERT_TRUE(gpus.ok()) << gpus.error().message;
  ASSERT_EQ(gpus->size(), 2u);
  EXPECT_EQ(gpus->at(0).id, "nvidia0");
  EXPECT_EQ(gpus->at(0).pci_bus, "0000:00:05.0");
  EXPECT_EQ(gpus->at(0).device_nodes.front(), "/dev/nvidia3");
  EXPECT_EQ(gpus->at(1).id, "nvidia1");
  EXPECT_EQ(gpus->at(1).device_nodes.front(), "/dev/nvidia0");
  EXPECT_NE(gpus->at(0).uuid, gpus->at(1).uuid);
}

TEST(GpuDiscovery, FakeNvidiaProc_MalformedInformationNamesFileAndLine) {
  ScratchDir dir;
  DiscoveryRoots roots = fakeH200Tree(dir.path());
  fs::path info = roots.proc / "driver/nvidia/gpus/0000:00:06.0/information";
  writeFile(info, "Model: \t NVIDIA H200\ngarbage without a colon\n");
  Result<std::vector<GpuDevice>> gpus = discoverGpus(roots);
  ASSERT_FALSE(gpus.ok());
  EXPECT_NE(gpus.error().message.find(info.string() + " line 2"), std::string::npos) << gpus.error().message;
  EXPECT_NE(gpus.error().message.find("garbage without a colon"), std::string::npos);
}

TEST(GpuDiscovery, FakeNvidiaProc_MissingDeviceMinorIsAnError) {
  ScratchDir dir;
  DiscoveryRoots roots = fakeH200Tree(dir.path());
  fs::path info = roots.proc / "driver/nvidia/gpus/0000:00:06.0/information";
  writeFile(info, "Model: \t NVIDIA H200\nBus Location: \t 0000:00:06.0\n");
  Result<std::vector<GpuDevice>> gpus = discoverGpus(roots);
  ASSERT_FALSE(gpus.ok());
  EXPECT_NE(gpus.error().message.find(info.string()), std::string::npos) << gpus.error().message;
  EXPECT_NE(gpus.error().message.find("Device Minor"), std::string::npos);
}

TEST(GpuDiscovery, FakeAmdSysfs_TwoGpus) {
  ScratchDir dir;
  Result<std::vector<GpuDevice>> gpus = discoverGpus(fakeAmdTree(dir.path()));
  ASSERT_TRUE(gpus.ok()) << gpus.error().message;
  ASSERT_EQ(gpus->size(), 2u) << "the CPU node (gpu_id 0) must be skipped";

  const GpuDevice& a = gpus->at(0);
  EXPECT_EQ(a.id, "amd0");
  EXPECT_EQ(a.vendor, "amd");
  EXPECT_EQ(a.index, 0);
  EXPECT_EQ(a.model, "gfx942");
  EXPECT_EQ(a.gfx_target, "gfx942");
  EXPECT_EQ(a.pci_bus, "0000:c3:00.0");
  EXPECT_EQ(a.memory_bytes, 206141652992u);
  EXPECT_EQ(a.uuid, "GPU-a3d8abb4d95aa259");
  EXPECT_EQ(a.device_nodes, (std::vector<std::string>{"/dev/kfd", "/dev/dri/renderD128"}));
  EXPECT_EQ(a.env.at("HIP_VISIBLE_DEVICES"), "0");
  EXPECT_EQ(a.env.at("ROCR_VISIBLE_DEVICES"), "0");

  const GpuDevice& b = gpus->at(1);
  EXPECT_EQ(b.id, "amd1");
  EXPECT_EQ(b.index, 1);
  EXPECT_EQ(b.model, "aldebaran");
  EXPECT_EQ(b.gfx_target, "gfx90a");
  EXPECT_EQ(b.pci_bus, "0001:19:00.0");
  EXPECT_EQ(b.memory_bytes, 68702699520u);  // no mem_banks: local_mem_size
  EXPECT_EQ(b.uuid, "");
  EXPECT_EQ(b.device_nodes, (std::vector<std::string>{"/dev/kfd", "/dev/dri/renderD129"}));
}

TEST(GpuDiscovery, FakeAmdSysfs_NodesSortNumerically) {
  ScratchDir dir;
  DiscoveryRoots roots = fakeAmdTree(dir.path());
  fs::path nodes = roots.sys / "class/kfd/kfd/topology/nodes";
  // Node 10 must come after node 2 (a string sort would put it first).
  fs::copy(nodes / "1", nodes / "10", fs::copy_options::recursive);
  std::string props = readFile(nodes / "10/properties");
  writeFile(nodes / "10/properties", std::regex_replace(props, std::regex("drm_render_minor 128"), "drm_render_minor 138"));
  Result<std::vector<GpuDevice>> gpus = discoverGpus(roots);
  ASSERT_TRUE(gpus.ok()) << gpus.error().message;
  ASSERT_EQ(gpus->size(), 3u);
  EXPECT_EQ(gpus->at(2).id, "amd2");
  EXPECT_EQ(gpus->at(2).device_nodes.back(), "/dev/dri/renderD138");
}

TEST(GpuDiscovery, FakeAmdSysfs_MalformedPropertiesNamesFileAndLine) {
  ScratchDir dir;
  DiscoveryRoots roots = fakeAmdTree(dir.path());
  fs::path props = roots.sys / "class/kfd/kfd/topology/nodes/2/properties";
  writeFile(props, "cpu_cores_count 0\nsimd_count 440\ndrm_render_minor lots\n");
  Result<std::vector<GpuDevice>> gpus = discoverGpus(roots);
  ASSERT_FALSE(gpus.ok());
  EXPECT_NE(gpus.error().message.find(props.string() + " line 3"), std::string::npos) << gpus.error().message;
  EXPECT_NE(gpus.error().message.find("drm_render_minor lots"), std::string::npos);
}

TEST(GpuDiscovery, FakeAmdSysfs_GpuWithoutRenderMinorIsAnError) {
  ScratchDir dir;
  DiscoveryRoots roots = fakeAmdTree(dir.path());
  fs::path props = roots.sys / "class/kfd/kfd/topology/nodes/1/properties";
  writeFile(props, std::regex_replace(readFile(props), std::regex("drm_render_minor 128\n"), ""));
  Result<std::vector<GpuDevice>> gpus = discoverGpus(roots);
  ASSERT_FALSE(gpus.ok());
  EXPECT_NE(gpus.error().message.find(props.string()), std::string::npos) << gpus.error().message;
  EXPECT_NE(gpus.error().message.find("drm_render_minor"), std::string::npos);
}

TEST(GpuDiscovery, FakeAmdSysfs_MalformedMemoryBankNamesFile) {
  ScratchDir dir;
  DiscoveryRoots roots = fakeAmdTree(dir.path());
  fs::path bank = roots.sys / "class/kfd/kfd/topology/nodes/1/mem_banks/0/properties";
  writeFile(bank, "heap_type 1\nsize_in_bytes -5\n");
  Result<std::vector<GpuDevice>> gpus = discoverGpus(roots);
  ASSERT_FALSE(gpus.ok());
  EXPECT_NE(gpus.error().message.find(bank.string() + " line 2"), std::string::npos) << gpus.error().message;
}

TEST(GpuDiscovery, FakeTrees_NvidiaAndAmdTogether) {
  ScratchDir dir;
  DiscoveryRoots roots = fakeH200Tree(dir.path() / "n");
  roots.sys = fakeAmdTree(dir.path() / "a").sys;
  Result<std::vector<GpuDevice>> gpus = discoverGpus(roots);
  ASSERT_TRUE(gpus.ok()) << gpus.error().message;
  ASSERT_EQ(gpus->size(), 3u);
  EXPECT_EQ(gpus->at(0).id, "nvidia0");
  EXPECT_EQ(gpus->at(1).id, "amd0");
  EXPECT_EQ(gpus->at(2).id, "amd1");
}

TEST(GpuDiscovery, MissingRootsMeanNoGpus) {
  ScratchDir dir;
  DiscoveryRoots roots{dir.path() / "no-proc", dir.path() / "no-sys", dir.path() / "no-dev"};
  Result<std::vector<GpuDevice>> gpus = discoverGpus(roots);
  ASSERT_TRUE(gpus.ok()) << gpus.error().message;
  EXPECT_TRUE(gpus->empty());
}

TEST(GpuDiscovery, GfxTargetAndPciDecoding) {
  EXPECT_EQ(gfxTargetName(90402), "gfx942");
  EXPECT_EQ(gfxTargetName(90010), "gfx90a");
  EXPECT_EQ(gfxTargetName(90008), "gfx908");
  EXPECT_EQ(gfxTargetName(110000), "gfx1100");
  EXPECT_EQ(gfxTargetName(100300), "gfx1030");
  EXPECT_EQ(gfxTargetName(120001), "gfx1201");
  EXPECT_EQ(gfxTargetName(0), "");
  EXPECT_EQ(pciBusFromLocation(0, 0xc300), "0000:c3:00.0");
  EXPECT_EQ(pciBusFromLocation(2, (0x41 << 8) | (0x1f << 3) | 5), "0002:41:1f.5");
}

TEST(GpuDiscovery, JsonCarriesEveryField) {
  ScratchDir dir;
  Result<std::vector<GpuDevice>> gpus = discoverGpus(fakeAmdTree(dir.path()));
  ASSERT_TRUE(gpus.ok()) << gpus.error().message;
  nlohmann::json j = toJson(gpus->at(0));
  EXPECT_EQ(j["id"], "amd0");
  EXPECT_EQ(j["vendor"], "amd");
  EXPECT_EQ(j["index"], 0);
  EXPECT_EQ(j["gfx_target"], "gfx942");
  EXPECT_EQ(j["pci_bus"], "0000:c3:00.0");
  EXPECT_EQ(j["memory_bytes"], 206141652992u);
  EXPECT_EQ(j["device_nodes"][1], "/dev/dri/renderD128");
  EXPECT_EQ(j["env"]["ROCR_VISIBLE_DEVICES"], "0");
  ScratchDir dir2;
  Result<std::vector<GpuDevice>> nv = discoverGpus(fakeH200Tree(dir2.path()));
  ASSERT_TRUE(nv.ok());
  EXPECT_FALSE(toJson(nv->at(0)).contains("gfx_target"));
}

TEST(GpuDiscovery, RealHostRootsSucceed) {
  Result<std::vector<GpuDevice>> gpus = discoverGpus();
  ASSERT_TRUE(gpus.ok()) << gpus.error().message;
  std::error_code ec;
  bool hostHasGpuDrivers = fs::exists("/proc/driver/nvidia/gpus", ec) || fs::exists("/sys/class/kfd/kfd/topology", ec);
  if (!hostHasGpuDrivers) {
    EXPECT_TRUE(gpus->empty());
  } else {
    for (const GpuDevice& g : *gpus) {
      std::printf("found %s\n", toJson(g).dump().c_str());
      EXPECT_FALSE(g.device_nodes.empty());
      // On a real host the GPU's own node exists (the sandbox's passthrough will stat it).
      EXPECT_TRUE(fs::exists(g.device_nodes.front(), ec)) << g.device_nodes.front();
    }
  }
}

}  // namespace
}  // namespace akad::gpu
