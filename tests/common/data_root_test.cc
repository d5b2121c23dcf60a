// common/data_root.h: one rule for "run from the build tree or installed", behind where akad,
// akabox and akactl find their data and akad its companion programs (akabox, akacheck,
// akad-node). This test binary lies in the build tree, so it sees the build tree's answers.
#include "common/data_root.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>

namespace fs = std::filesystem;

namespace akad {
namespace {

TEST(DataRoot, ARunFromTheBuildTreeUsesTheSourceTreesData) {
  const fs::path self = ownExecutable();
  EXPECT_EQ(self, fs::read_symlink("/proc/self/exe"));
  EXPECT_TRUE(runFromBuildTree()) << self << " is not under " << kBuildRoot;
  const char* env = std::getenv("AKAD_DATA_DIR");
  if (env == nullptr || *env == '\0') {
    EXPECT_EQ(dataRoot(), fs::path(kSourceRoot));
  }
}

TEST(DataRoot, AKAD_DATA_DIRWins) {
  const char* before = std::getenv("AKAD_DATA_DIR");
  const std::string saved = before ? before : "";
  ::setenv("AKAD_DATA_DIR", "/srv/akad-data", 1);
  EXPECT_EQ(dataRoot(), fs::path("/srv/akad-data"));
  if (before) ::setenv("AKAD_DATA_DIR", saved.c_str(), 1);
  else ::unsetenv("AKAD_DATA_DIR");
}

TEST(CompanionProgram, BesideTheRunningProgramThenTheBuildTreeThenPath) {
  const fs::path self = ownExecutable();
  // The running program is beside itself.
  EXPECT_EQ(companionProgram(self.filename().string(), "nowhere"), self);
  // akabox is not beside this test, but the build made it in sandbox/.
  const fs::path built = fs::path(kBuildRoot) / "sandbox" / "akabox";
  if (::access(built.c_str(), X_OK) == 0) {
    EXPECT_EQ(companionProgram("akabox", "sandbox"), built);
  }
  EXPECT_EQ(companionProgram("akad-no-such-program", "sandbox"), fs::path("akad-no-such-program"));
}

}  // namespace
}  // namespace akad
