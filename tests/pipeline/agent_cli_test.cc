// The real coding-agent CLIs end to end: `akactl submit cpu/softmax --agent claude-code` (and
// `codex`) on the real akad, with the CLIs of the agent-cli image (scripts/install-agent-clis)
// running in the agent's sandbox and talking, through akad's egress proxy, to the model-API
// test double (model_double.py), which drives one scripted session through each CLI's own
// tools: read the kernel, write the known faster one, run the visible tests, finish. The
// attempt must score correct and faster, and its network log must show what the CLI reached
// and what it was refused. Each test prints its submit-to-scored time.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <regex>
#include <thread>

#include <nlohmann/json.hpp>

#include "tests/pipeline/pipeline_daemon.h"

namespace akad::test {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

const fs::path kSource = AKAD_SOURCE_DIR;
// Loopback, but not in the NO_PROXY list akad gives agents ("localhost,127.0.0.1,::1"), so
// the CLIs send their requests to the proxy; inside the sandbox's own network namespace
// nothing listens there, so a request that skipped the proxy would fail.
constexpr const char* kDoubleAddress = "127.0.0.2";

// The CLI in the agent-cli image's prefix, or why it is not usable.
std::string cliProblem(const std::string& program) {
  const fs::path bin = kSource / "images" / "agent-cli" / "prefix" / "bin" / program;
  if (!fs::exists(bin)) return bin.string() + " is not installed (scripts/install-agent-clis installs it)";
  auto r = runCommand({bin.string(), "--version"}, {}, 30s);
  if (r.exitCode != 0) return bin.string() + " --version failed: " + r.err + r.out;
  return "";
}

// The JSON lines of a log (akactl logs puts a "==> file <==" header before them).
std::vector<json> jsonLines(const std::string& text) {
  std::vector<json> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);)
    if (!line.empty() && line.front() == '{') out.push_back(json::parse(line, nullptr, false));
  return out;
}

// tests/pipeline/model_double.py on 127.0.0.2 at a port of the kernel's choosing; killed and
// reaped (by its pid) when the test ends.
class ModelDouble {
 public:
  explicit ModelDouble(const fs::path& dir) : log_(dir / "requests.jsonl") {
    const fs::path portFile = dir / "port";
    auto child = ChildProcess::spawn({"/usr/bin/python3", (kSource / "tests/pipeline/model_double.py").string(), "--listen",
                                      kDoubleAddress, "--port", "0", "--port-file", portFile.string(), "--log",
                                      log_.string(), "--kernel", "kernel.cpp", "--solution",
                                      (kSource / "tasks/cpu/softmax/solution/kernel.cpp").string()});
    EXPECT_TRUE(child) << (child ? "" : child.error().message);
    if (!child) return;
    child_ = std::move(*child);
    for (int i = 0; i < 100 && !fs::exists(portFile); ++i) std::this_thread::sleep_for(50ms);
    EXPECT_TRUE(fs::exists(portFile)) << "the model double did not start: " << child_->stderrText();
    if (fs::exists(portFile)) port_ = std::stoi(readFile(portFile));
  }
  int port() const { return port_; }
  std::string hostPort() const { return std::string(kDoubleAddress) + ":" + std::to_string(port_); }
  std::vector<json> requests() const { return jsonLines(readFile(log_)); }

 private:
  fs::path log_;
  int port_ = 0;
  std::unique_ptr<ChildProcess> child_;
};

struct CliAgent {
  std::string name;     // images/agents/<name>.yaml
  std::string program;  // in the agent-cli image
  std::string keyVar, baseUrlVar, baseUrlPath;
  std::string apiPath;  // the model API's streaming endpoint
};

// The shipped definition as an operator would adapt it for an endpoint of their own: the
// allow list names the double instead of the public API; nothing else changes.
void writeAgentForDouble(const CliAgent& cli, const fs::path& agentsDir, const std::string& hostPort) {
  std::string yaml = readFile(kSource / "images" / "agents" / (cli.name + ".yaml"));
  const std::regex allow(R"(\nallow: \[[^\]]*\])");
  ASSERT_TRUE(std::regex_search(yaml, allow)) << "no allow list in the shipped " << cli.name << ".yaml";
  yaml = std::regex_replace(yaml, allow, "\nallow: [\"" + hostPort + " private\"]");
  std::ofstream(agentsDir / (cli.name + ".yaml")) << yaml;
}

void runScriptedSession(const CliAgent& cli) {
  if (auto why = cliProblem(cli.program); !why.empty()) GTEST_SKIP() << why;
  PipelineDaemon d(cli.name, PipelineDaemon::Timing::Quick);
  ModelDouble model(d.scratch("double"));
  ASSERT_GT(model.port(), 0);
  const fs::path agents = d.scratch("agents");
  writeAgentForDouble(cli, agents, model.hostPort());
  d.start({"--agents-dir", agents.string()});

  // The user's side: a key and the endpoint by --pass-env, as docs/agents.md tells.
  const std::string key = "akad-test-key-" + std::to_string(::getpid());
  const auto submitted = std::chrono::steady_clock::now();
  auto r = runCommand({akactlBinary().string(), "--socket", d.paths().socket.string(), "--json", "submit", "cpu/softmax",
                       "--agent", cli.name, "--pass-env", cli.keyVar, "--pass-env", cli.baseUrlVar},
                      {cli.keyVar + "=" + key, cli.baseUrlVar + "=http://" + model.hostPort() + cli.baseUrlPath}, 60s);
  ASSERT_EQ(r.exitCode, 0) << r.err << r.out;
  const std::string runId = json::parse(r.out).at("run").at("id");
  json attempts = d.waitRun(runId, 900s);
  const double submitToScored = std::chrono::duration<double>(std::chrono::steady_clock::now() - submitted).count();
  ASSERT_EQ(attempts.size(), 1u);
  const json& a = attempts.at(0);
  const std::string id = std::to_string(a.at("id").get<long>());
  const std::string agentOut = d.ctl({"logs", id, "--stage", "agent"}).out;
  ASSERT_EQ(a.at("state"), "scored") << a.dump() << "\n" << agentOut;
  const json& res = a.at("result");
  const json& agent = res.at("agent");
  std::cout << "[ figure ] " << cli.name << ": submit to scored " << submitToScored << " s (agent stage "
            << agent.at("wall_s").get<double>() << " s), speedup " << res.value("speedup", 0.0) << "\n";

  // The CLI ran to its end and the scripted edit is what was scored.
  EXPECT_EQ(agent.at("exit_code"), 0) << agent.dump() << "\n" << agentOut;
  EXPECT_TRUE(res.at("correct").get<bool>()) << res.value("failure", "") << "\n" << agentOut;
  EXPECT_GT(res.value("speedup", 0.0), 1.0) << res.dump();
  EXPECT_NE(agentOut.find("Done: kernel.cpp now evaluates exp once per element. The visible tests pass."),
            std::string::npos)
      << "the CLI did not finish the scripted session, or the visible tests failed in the sandbox:\n" << agentOut;
  // The snapshot holds exactly the kernel the CLI's tool wrote, and none of the CLI's own state
  // (its home is on the sandbox's /tmp).
  const fs::path snap = d.scratch("snapshot");
  auto exported = d.ctl({"snapshot", "export", a.at("snapshot_sha256").get<std::string>(), "-o",
                         (snap / "a.tar.zst").string()});
  ASSERT_EQ(exported.exitCode, 0) << exported.err;
  auto extracted = d.ctl({"snapshot", "extract", (snap / "a.tar.zst").string(), (snap / "ws").string()});
  ASSERT_EQ(extracted.exitCode, 0) << extracted.err;
  EXPECT_EQ(readFile(snap / "ws" / "kernel.cpp"), readFile(kSource / "tasks/cpu/softmax/solution/kernel.cpp"));
  for (const char* home : {".home", ".claude", ".codex"}) EXPECT_FALSE(fs::exists(snap / "ws" / home)) << home;

  // The double saw the whole session: the CLI's own tools answered every step (read, write,
  // test), every request carried the key, and the test run's output came back to the model.
  std::vector<json> turns;
  for (const json& q : model.requests())
    if (q.value("path", "") == cli.apiPath && q.value("method", "") == "POST") turns.push_back(q);
  ASSERT_GE(turns.size(), 4u) << "the CLI made " << turns.size() << " model requests";
  for (const json& q : turns) EXPECT_TRUE(q.value("auth", false)) << q.value("target", "") << " came without the key";
  const std::string last = turns.back().at("body").dump();
  EXPECT_NE(last.find("softmax_rows"), std::string::npos) << "the kernel's text never reached the model";
  EXPECT_NE(last.find("v-512x1024"), std::string::npos)
      << "the visible tests' output (a configuration's name) never reached the model: " << last.substr(0, 4000);

  // The network log: the CLI reached the double through the proxy (nothing else routes out of
  // the sandbox's namespace), and whatever else it tried was refused and logged.
  const std::string log = d.ctl({"logs", id, "--stage", "network"}).out;
  int allowed = 0, denied = 0;
  double firstRequest = 1e18, lastAnswer = 0;  // the model session in the log
  for (const json& e : jsonLines(log)) {
    ASSERT_FALSE(e.is_discarded()) << log;
    if (e.at("allowed").get<bool>()) {
      ++allowed;
      const double at = isoSeconds(e.at("started_at"));
      firstRequest = std::min(firstRequest, at);
      lastAnswer = std::max(lastAnswer, at + e.at("duration_s").get<double>());
      EXPECT_EQ(e.at("host"), kDoubleAddress) << e.dump();
      EXPECT_EQ(e.at("port"), model.port()) << e.dump();
      EXPECT_GT(e.at("bytes_down").get<std::uint64_t>(), 0u) << e.dump();
    } else {
      ++denied;
      std::cout << "[ refused ] " << cli.name << ": " << e.dump() << "\n";
    }
  }
  // The double closes the connection after every streamed answer, so each model turn is a
  // connection of its own in the log.
  EXPECT_GE(allowed, static_cast<int>(turns.size())) << log;
  // The shipped settings keep each CLI to its model API: no update check, telemetry or plugin
  // sync asks the proxy for anything (a new pinned version that does shows up here).
  EXPECT_EQ(denied, 0) << log;
  const json network = agent.at("network");
  EXPECT_EQ(network.at("connections"), allowed) << network.dump();
  EXPECT_EQ(network.at("denied"), denied) << network.dump();
  std::cout << "[ network ] " << cli.name << ": " << allowed << " connection(s) to the double, " << denied
            << " refused; " << turns.size() << " model request(s) over " << (lastAnswer - firstRequest)
            << " s (the visible tests' run included)\n";
  const std::string results = d.ctl({"results", runId}).out;
  EXPECT_NE(results.find("network  " + std::to_string(allowed) + " connection(s)"), std::string::npos) << results;
  // The key went to the daemon by the request, never into its store or logs.
  EXPECT_EQ(readFile(d.paths().stateDir / "attempts" / id / "logs" / "agent.out").find(key), std::string::npos);
  EXPECT_EQ(log.find(key), std::string::npos);
  d.stop();
  d.expectNothingLeft();
}

TEST(AgentCliTest, ClaudeCodeEditsTheKernelThroughTheProxyAndScoresFaster) {
  runScriptedSession({"claude-code", "claude", "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "", "/v1/messages"});
}

TEST(AgentCliTest, CodexEditsTheKernelThroughTheProxyAndScoresFaster) {
  runScriptedSession({"codex", "codex", "OPENAI_API_KEY", "OPENAI_BASE_URL", "/v1", "/v1/responses"});
}

// The shipped definitions as they are, without an endpoint override: each CLI goes for its
// public API through the proxy, and only there. The network log holds its CONNECT to
// api.anthropic.com:443 / api.openai.com:443 (refused where the name does not resolve, as on an
// offline machine; connected, and answered 401 for the fake key, where it does), and no
// connection to anything else. The agent's time is cut short: the CLIs retry for minutes. The
// two run at once (two workers), each in its own attempt: they mostly wait on their retries.
TEST(AgentCliTest, WithoutAnOverrideEachCliAsksTheProxyForItsPublicApiOnly) {
  for (const char* program : {"claude", "codex"})
    if (auto why = cliProblem(program); !why.empty()) GTEST_SKIP() << why;
  PipelineDaemon d("public", PipelineDaemon::Timing::Minimal);
  d.start({"--workers", "2"});
  struct Case {
    std::string agent, keyVar, api, run;
  };
  std::vector<Case> cases = {{"claude-code", "ANTHROPIC_API_KEY", "api.anthropic.com", ""},
                             {"codex", "OPENAI_API_KEY", "api.openai.com", ""}};
  for (Case& c : cases) {
    auto r = runCommand({akactlBinary().string(), "--socket", d.paths().socket.string(), "--json", "submit",
                         "cpu/softmax", "--agent", c.agent, "--pass-env", c.keyVar, "--agent-time-limit", "20"},
                        {c.keyVar + "=akad-test-key"}, 60s);
    ASSERT_EQ(r.exitCode, 0) << r.err << r.out;
    c.run = json::parse(r.out).at("run").at("id");
  }
  for (const Case& c : cases) {
    json attempts = d.waitRun(c.run, 600s);
    ASSERT_EQ(attempts.size(), 1u);
    const std::string id = std::to_string(attempts.at(0).at("id").get<long>());
    ASSERT_EQ(attempts.at(0).at("state"), "scored") << attempts.at(0).dump();
    const std::string log = d.ctl({"logs", id, "--stage", "network"}).out;
    int toApi = 0;
    for (const json& e : jsonLines(log)) {
      ASSERT_FALSE(e.is_discarded()) << log;
      std::cout << "[ network ] " << c.agent << ": " << e.dump() << "\n";
      if (e.value("host", "") == c.api && e.value("port", 0) == 443 && e.value("method", "") == "CONNECT") ++toApi;
      if (e.at("allowed").get<bool>()) {
        EXPECT_EQ(e.at("host"), c.api) << e.dump();
      }
    }
    EXPECT_GE(toApi, 1) << c.agent << " never asked the proxy for " << c.api << ":443\n" << log;
  }
  d.stop();
  d.expectNothingLeft();
}

// An agent whose image is not installed (here: an agent-cli image whose prefix is missing) is
// refused at submit with the image, the missing path and how to install it; nothing is queued.
TEST(AgentCliTest, AnAgentWhoseImageIsNotInstalledIsRefusedAtSubmit) {
  PipelineDaemon d("noimage", PipelineDaemon::Timing::Quick);
  const fs::path images = d.scratch("images"), agents = d.scratch("agents");
  for (const char* image : {"host", "agent-cli"}) {
    fs::create_directories(images / image);
    fs::copy_file(kSource / "images" / image / "image.yaml", images / image / "image.yaml");
  }
  fs::copy_file(kSource / "images" / "agents" / "claude-code.yaml", agents / "claude-code.yaml");
  d.start({"--agents-dir", agents.string(), "--images-dir", images.string()});
  auto r = d.ctl({"submit", "cpu/softmax", "--agent", "claude-code"});
  EXPECT_NE(r.exitCode, 0) << r.out;
  EXPECT_NE(r.err.find("agent 'claude-code' needs image 'agent-cli': image agent-cli: " +
                       (images / "agent-cli" / "prefix").string() + " does not exist on this host"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("scripts/install-agent-clis"), std::string::npos) << r.err;
  EXPECT_TRUE(d.ctlJson({"status"}).at("runs").empty()) << "a run was queued";
  d.stop();
  d.expectNothingLeft();
}

}  // namespace
}  // namespace akad::test
