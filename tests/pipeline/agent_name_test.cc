// The one agent-name rule (daemon/pipeline/agent.h's isAgentName), as the agent file loader
// and the lookup apply it. run.submit's side is in tests/daemon/bad_client_test.cc. Before
// issue 28 the submit check allowed dots while the lookup refused them, and an agent file's
// own name was checked only against its file name.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "daemon/pipeline/agent.h"

namespace fs = std::filesystem;

namespace akad {
namespace {

TEST(AgentName, LowerCaseLettersDigitsDashAndUnderscoreUpTo64) {
  for (const char* ok : {"noop", "claude-code", "a", "0x", "agent_2", "a-b_c-9"}) EXPECT_TRUE(isAgentName(ok)) << ok;
  EXPECT_TRUE(isAgentName(std::string(64, 'a')));
  EXPECT_FALSE(isAgentName(std::string(65, 'a')));
  for (const char* bad : {"", "my.agent", "..", ".hidden", "-x", "_x", "Agent", "a b", "a/b", "agent.yaml", "é"})
    EXPECT_FALSE(isAgentName(bad)) << bad;
}

class AgentFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("akad-agent-name-" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  void write(const std::string& file, const std::string& name) {
    std::ofstream(dir_ / file) << "name: " << name << "\ncommand: [\"/bin/true\"]\n";
  }
  fs::path dir_;
};

TEST_F(AgentFiles, AFileWhoseNameBreaksTheRuleIsRefusedAtLoadAndNotListed) {
  write("My.Agent.yaml", "My.Agent");
  write("good.yaml", "good");
  auto loaded = loadAgent(dir_ / "My.Agent.yaml");
  ASSERT_FALSE(loaded);
  EXPECT_NE(loaded.error().message.find(kAgentNameRule), std::string::npos) << loaded.error().message;
  auto listed = listAgents(dir_);
  ASSERT_EQ(listed.size(), 1u);
  EXPECT_EQ(listed[0].name, "good");
}

TEST_F(AgentFiles, TheLookupAppliesTheSameRuleBeforeTouchingTheFolder) {
  write("good.yaml", "good");
  EXPECT_TRUE(findAgent(dir_, "good"));
  auto dotted = findAgent(dir_, "my.agent");
  ASSERT_FALSE(dotted);
  EXPECT_NE(dotted.error().message.find("must match"), std::string::npos) << dotted.error().message;
  EXPECT_FALSE(findAgent(dir_, "../good"));
  auto missing = findAgent(dir_, "absent");
  ASSERT_FALSE(missing);
  EXPECT_NE(missing.error().message.find("unknown agent"), std::string::npos) << missing.error().message;
}

}  // namespace
}  // namespace akad
