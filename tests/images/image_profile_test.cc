// Image profiles: the repository's own images load and are consistent; bad profiles are refused
// with an error naming the file and the field.

#include "images/image_profile.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <stdlib.h>

#include <filesystem>
#include <fstream>

namespace akad::images {
namespace {
namespace fs = std::filesystem;

const fs::path kImages = fs::path(AKAD_IMAGES_ROOT);

class ScratchImages : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::temp_directory_path() / "akad-images-test-XXXXXX").string();
    root_ = mkdtemp(tmpl.data());
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(root_, ec);
  }
  fs::path write(const std::string& name, const std::string& yaml) {
    fs::create_directories(root_ / name);
    std::ofstream(root_ / name / "image.yaml") << yaml;
    return root_ / name / "image.yaml";
  }
  std::string errorOf(const std::string& name, const std::string& yaml) {
    fs::path file = write(name, yaml);
    Result<ImageProfile> p = loadImageProfile(file);
    if (p.ok()) return "";
    EXPECT_NE(p.error().message.find(file.string()), std::string::npos) << p.error().message;
    return p.error().message;
  }
  fs::path root_;
};

TEST(ImageProfiles, RepositoryImagesLoad) {
  Result<std::vector<ImageProfile>> all = loadImageProfiles(kImages);
  ASSERT_TRUE(all.ok()) << all.error().message;
  ASSERT_EQ(all->size(), 5u);
  EXPECT_EQ(all->at(0).name, "agent-cli");
  EXPECT_EQ(all->at(1).name, "cuda-hip");
  EXPECT_EQ(all->at(2).name, "host");
  EXPECT_EQ(all->at(3).name, "rocm");
  EXPECT_EQ(all->at(4).name, "torch");
  EXPECT_EQ(all->at(4).binds.at(0).src, fs::path(kImages) / "cuda-hip") << "${images_dir} expanded";
  EXPECT_TRUE(all->at(2).binds.empty());
  EXPECT_EQ(all->at(2).requiresGpuVendor, "none");
  EXPECT_EQ(all->at(3).requiresGpuVendor, "amd");
  // The agent CLIs' npm prefix, on the agents' PATH; never the host's /usr.
  EXPECT_EQ(all->at(0).binds.at(0).src, fs::path(kImages) / "agent-cli" / "prefix");
  EXPECT_EQ(all->at(0).pathPrepend, std::vector<std::string>{"/akad/images/agent-cli/bin"});
}

TEST(ImageProfiles, CudaHipBindsItsOwnToolchainOntoPath) {
  Result<ImageProfile> p = findImageProfile(kImages, "cuda-hip");
  ASSERT_TRUE(p.ok()) << p.error().message;
  EXPECT_EQ(p->requiresGpuVendor, "nvidia");
  EXPECT_EQ(p->env.at("HIP_PLATFORM"), "nvidia");
  ASSERT_FALSE(p->binds.empty());
  // ${image_dir} became this repository's image folder, bound where PATH and HIP_PATH point.
  const ImageBind& self = p->binds.front();
  EXPECT_EQ(fs::canonical(self.src), fs::canonical(kImages / "cuda-hip"));
  EXPECT_TRUE(self.readonly);
  EXPECT_TRUE(fs::exists(self.src / "bin/hipcc"));
  EXPECT_TRUE(fs::exists(self.src / "include/hip/hip_runtime.h"));
  EXPECT_EQ(p->pathPrepend.front(), (self.dst / "bin").string());
  EXPECT_EQ(p->env.at("HIP_PATH"), self.dst.string());
  bool cuda = false;
  for (const ImageBind& b : p->binds) cuda = cuda || (b.dst == "/usr/local/cuda" && !b.optional);
  EXPECT_TRUE(cuda);
  EXPECT_EQ(toJson(*p)["binds"][0]["dst"], "/akad/images/cuda-hip");
}

TEST(ImageProfiles, UnknownImageListsKnownOnes) {
  Result<ImageProfile> p = findImageProfile(kImages, "cuda-hipp");
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.error().message.find("unknown image 'cuda-hipp'"), std::string::npos);
  EXPECT_NE(p.error().message.find("cuda-hip, host, rocm"), std::string::npos) << p.error().message;
}

TEST_F(ScratchImages, RefusesBadProfilesNamingTheField) {
  const std::string head = "name: x\ndescription: d\n";
  EXPECT_NE(errorOf("x", head + "bindz: []\n").find("unknown field 'bindz'"), std::string::npos);
  EXPECT_NE(errorOf("x", head + "binds:\n  - {src: /a, dst: rel}\n").find("'binds[0].dst' must be an absolute path"),
            std::string::npos);
  EXPECT_NE(errorOf("x", head + "binds:\n  - {src: /a}\n").find("needs both src and dst"), std::string::npos);
  EXPECT_NE(errorOf("x", head + "binds:\n  - {src: /a, dst: /b, readonly: maybe}\n").find("'binds[0].readonly'"),
            std::string::npos);
  EXPECT_NE(errorOf("x", head + "binds:\n  - {src: '${home}/a', dst: /b}\n").find("unknown variable"), std::string::npos);
  EXPECT_NE(errorOf("x", head + "binds:\n  - {src: /a/../etc, dst: /b}\n").find("'..'"), std::string::npos);
  EXPECT_NE(errorOf("x", head + "env: {PATH: /bin}\n").find("must not set PATH"), std::string::npos);
  EXPECT_NE(errorOf("x", head + "env: {'A B': c}\n").find("invalid variable name"), std::string::npos);
  EXPECT_NE(errorOf("x", head + "requires_gpu_vendor: intel\n").find("nvidia, amd or none"), std::string::npos);
  EXPECT_NE(errorOf("x", head + "path_prepend: [bin]\n").find("'path_prepend[0]'"), std::string::npos);
  EXPECT_NE(errorOf("x", "name: y\ndescription: d\n").find("image folder is 'x'"), std::string::npos);
  EXPECT_NE(errorOf("x", "description: d\n").find("missing field 'name'"), std::string::npos);
  EXPECT_NE(errorOf("x", head + "env: [\n").find("line "), std::string::npos);
}

TEST_F(ScratchImages, ReportsEveryProblemAtOnce) {
  const std::string m = errorOf("x", "name: x\ndescription: d\nrequires_gpu_vendor: intel\n"
                                     "binds:\n  - {src: /a, dst: rel, readonly: yes}\n  - {src: /b, dst: /c, mode: ro}\n");
  for (const char* needle : {"nvidia, amd or none", "'binds[0].dst' must be an absolute path", "'binds[0].readonly' must be true or false",
                             "'binds[1]' has an unknown field 'mode'"})
    EXPECT_NE(m.find(needle), std::string::npos) << needle << " not in:\n" << m;
  EXPECT_EQ(std::count(m.begin(), m.end(), '\n'), 3) << m;
}

TEST_F(ScratchImages, ExpandsImageDirAndDefaults) {
  fs::path file = write("tool", "name: tool\ndescription: t\nbinds:\n  - {src: '${image_dir}/bin', dst: /opt/tool/bin, optional: true}\n");
  Result<ImageProfile> p = loadImageProfile(file);
  ASSERT_TRUE(p.ok()) << p.error().message;
  EXPECT_EQ(p->binds.at(0).src, root_ / "tool" / "bin");
  EXPECT_TRUE(p->binds.at(0).readonly);
  EXPECT_TRUE(p->binds.at(0).optional);
  EXPECT_EQ(p->requiresGpuVendor, "none");
}

TEST_F(ScratchImages, MissingFileIsAnError) {
  Result<ImageProfile> p = loadImageProfile(root_ / "none/image.yaml");
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.error().message.find("does not exist"), std::string::npos);
}

}  // namespace
}  // namespace akad::images
