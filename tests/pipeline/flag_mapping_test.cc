// akad's flags and a run's options, each followed to the akabox command lines it must change:
// the real akad runs attempts of a trivial task through the real akabox, which it reaches
// through a recording wrapper ($AKABOX) that writes down every call (arguments, the template
// directory it is given, the sandbox's environment spec on fd 4) and then execs akabox. An
// ignored flag (akad --no-agent-network once was) shows here as a command line without it.
#include <gtest/gtest.h>

#include <sys/stat.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>

#include <nlohmann/json.hpp>

#include "tests/pipeline/pipeline_daemon.h"

namespace akad::test {
namespace {

// Away from akad's defaults (700000000 and 700000001-700001000), so that a flag that was
// dropped cannot pass for one that was honoured.
constexpr uid_t kSandboxUid = 700002000;
constexpr uid_t kFirstAttemptUid = 700002001, kLastAttemptUid = 700002004;

struct AkaboxCall {
  std::vector<std::string> args;  // without the program
  std::string templateDir;        // AKABOX_TEMPLATE_DIR as akabox got it ("" when unset)
  json sandboxEnv = json::object();  // the spec on fd 4's "env"

  bool isRun() const { return !args.empty() && args[0] == "run"; }
  bool has(const std::string& flag) const { return std::find(args.begin(), args.end(), flag) != args.end(); }
  // Every value given to `flag`, in order.
  std::vector<std::string> values(const std::string& flag) const {
    std::vector<std::string> out;
    for (std::size_t i = 0; i + 1 < args.size() && args[i] != "--"; ++i)
      if (args[i] == flag) out.push_back(args[i + 1]);
    return out;
  }
  std::string value(const std::string& flag) const {
    auto v = values(flag);
    return v.size() == 1 ? v.front() : "<" + std::to_string(v.size()) + " values>";
  }
  std::vector<std::string> command() const {
    auto dash = std::find(args.begin(), args.end(), "--");
    return dash == args.end() ? std::vector<std::string>{} : std::vector<std::string>(dash + 1, args.end());
  }
  // The sandbox whose stdout goes to a log named `name` (agent.out, compile.out, ...).
  bool logsTo(const std::string& name) const {
    const std::string out = value("--stdout");
    return out.size() >= name.size() && out.compare(out.size() - name.size(), name.size(), name) == 0;
  }
  std::string text() const {
    std::string t;
    for (const auto& a : args) t += a + " ";
    return t;
  }
};

class FlagMappingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "needs root: akad's sandboxes";
    parent_ = "akad-test-flags-" + std::to_string(::getpid());
    tasks_ = dir_ / "tasks";
    fs::copy(AKAD_BENCH_TASKS_DIR, tasks_, fs::copy_options::recursive);
    agents_ = dir_ / "agents";
    fs::create_directories(agents_);
    std::ofstream(agents_ / "noop.yaml") << "name: noop\ndescription: does nothing\n"
                                            "command: [\"/bin/true\"]\nnetwork: none\ntime_limit_s: 30\n";
    std::ofstream(agents_ / "hostnet.yaml") << "name: hostnet\ndescription: asks for the host network\n"
                                               "command: [\"/bin/true\"]\nnetwork: host\ntime_limit_s: 30\n";
    std::ofstream(agents_ / "allownet.yaml") << "name: allownet\ndescription: asks for the proxy\n"
                                                "command: [\"/bin/true\"]\nnetwork: allow\n"
                                                "allow: [\"example.invalid:443\"]\ntime_limit_s: 30\n";
    writeRecordingAkabox();
  }
  void TearDown() override {
    if (daemon_) daemon_->stop(SIGTERM);
    daemon_.reset();
    ::unsetenv("AKABOX");
    for (const fs::path& p : cgroupParentDirs(parent_)) ::rmdir(p.c_str());
  }

  // bin/akabox records its call and execs the real one; akanet-bridge is looked for beside it.
  void writeRecordingAkabox() {
    const fs::path bin = dir_ / "bin";
    calls_ = dir_ / "calls";
    fs::create_directories(bin);
    fs::create_directories(calls_);
    fs::copy_file(AKANET_BRIDGE_BIN, bin / "akanet-bridge");
    std::ofstream(bin / "akabox") << "#!/bin/sh\n"
                                     "f=$(mktemp " << calls_.string() << "/call.XXXXXX) || exit 125\n"
                                     "printf '%s\\0' \"$@\" > \"$f.args\"\n"
                                     "printf '%s' \"${AKABOX_TEMPLATE_DIR-}\" > \"$f.templates\"\n"
                                     "for a in \"$@\"; do [ \"$a\" = /dev/fd/4 ] && cat /dev/fd/4 > \"$f.spec\"; done\n"
                                     "exec " << AKABOX_BIN << " \"$@\"\n";
    ::chmod((bin / "akabox").c_str(), 0755);
    // akad reads $AKABOX once per sandbox; its children get only akad's own environment.
    ::setenv("AKABOX", (bin / "akabox").c_str(), 1);
  }

  void startDaemon(const std::vector<std::string>& flags) {
    std::vector<std::string> args = {"--cgroup-parent", parent_, "--gpus", "none", "--workers", "1",
                                     "--agents-dir", agents_.string(),
                                     "--sandbox-uid", std::to_string(kSandboxUid),
                                     "--attempt-uids", std::to_string(kFirstAttemptUid) + "-" + std::to_string(kLastAttemptUid)};
    args.insert(args.end(), flags.begin(), flags.end());
    auto d = DaemonProcess::start({dir_ / "akad.sock", dir_ / "state", tasks_}, args);
    ASSERT_TRUE(d) << d.error().message;
    daemon_ = std::move(*d);
  }

  // Submits one attempt of the trivial task, waits for it to be scored and returns the akabox
  // calls made meanwhile.
  std::vector<AkaboxCall> attempt(const std::vector<std::string>& submitArgs) {
    fs::remove_all(calls_);
    fs::create_directories(calls_);
    std::vector<std::string> a = {"--json", "submit", "bench/trivial"};
    a.insert(a.end(), submitArgs.begin(), submitArgs.end());
    auto sub = akactl(dir_ / "akad.sock", a);
    EXPECT_EQ(sub.exitCode, 0) << sub.err << sub.out;
    const json submitted = json::parse(sub.out, nullptr, false);
    if (submitted.is_discarded()) return {};
    const std::string run = submitted.at("run").at("id");
    auto watch = runCommand({akactlBinary().string(), "--socket", (dir_ / "akad.sock").string(), "watch", run},
                            {}, std::chrono::seconds(300));
    EXPECT_EQ(watch.exitCode, 0) << watch.err;
    auto status = akactl(dir_ / "akad.sock", {"--json", "status", run});
    const json attempts = json::parse(status.out, nullptr, false);
    EXPECT_FALSE(attempts.is_discarded()) << status.out;
    if (!attempts.is_discarded()) {
      const json& one = attempts.at("attempts").at(0);
      EXPECT_EQ(one.at("state"), "scored") << one.dump(2) << daemon_->log();
    }
    return readCalls();
  }

  std::vector<AkaboxCall> readCalls() const {
    std::vector<AkaboxCall> out;
    for (const auto& e : fs::directory_iterator(calls_)) {
      if (e.path().extension() != ".args") continue;
      AkaboxCall c;
      const std::string raw = readFile(e.path());
      for (std::size_t start = 0; start < raw.size();) {
        const std::size_t end = raw.find('\0', start);
        c.args.push_back(raw.substr(start, end - start));
        start = end == std::string::npos ? raw.size() : end + 1;
      }
      fs::path base = e.path();
      base.replace_extension();
      c.templateDir = readFile(base.string() + ".templates");
      if (fs::exists(base.string() + ".spec")) {
        const json spec = json::parse(readFile(base.string() + ".spec"), nullptr, false);
        EXPECT_FALSE(spec.is_discarded()) << base;
        if (!spec.is_discarded()) c.sandboxEnv = spec.value("env", json::object());
      }
      out.push_back(std::move(c));
    }
    return out;
  }

  static const AkaboxCall* find(const std::vector<AkaboxCall>& calls, const std::string& log) {
    for (const auto& c : calls)
      if (c.isRun() && c.logsTo(log)) return &c;
    return nullptr;
  }

  TempDir dir_;
  fs::path tasks_, agents_, calls_;
  std::string parent_;
  std::unique_ptr<DaemonProcess> daemon_;
};

// --sandbox-uid, --attempt-uids, --cgroup-parent and the default mount templates, on every
// sandbox of an attempt: the agent and the candidate's compile run as the attempt's uid, the
// trusted steps as the sandbox uid.
TEST_F(FlagMappingTest, UidsCgroupParentAndMountTemplatesReachEverySandbox) {
  startDaemon({});
  const auto calls = attempt({"--agent", "noop"});
  ASSERT_FALSE(calls.empty());
  int runs = 0;
  for (const auto& c : calls) {
    if (!c.isRun()) continue;
    ++runs;
    EXPECT_EQ(c.value("--cgroup-parent"), parent_) << c.text();
    EXPECT_TRUE(c.has("--mount-template")) << c.text();
    EXPECT_EQ(c.templateDir, (dir_ / "state" / "mount-templates").string()) << c.text();
  }
  EXPECT_GE(runs, 5) << "trusted build, agent, compile, reference, runners, checker";
  const AkaboxCall* agent = find(calls, "/agent.out");
  const AkaboxCall* compile = find(calls, "/compile.out");
  const AkaboxCall* reference = find(calls, "/reference-generate.out");
  ASSERT_TRUE(agent && compile && reference);
  const uid_t agentUid = static_cast<uid_t>(std::stoul(agent->value("--outside-uid")));
  EXPECT_GE(agentUid, kFirstAttemptUid);
  EXPECT_LE(agentUid, kLastAttemptUid);
  EXPECT_EQ(agent->value("--outside-gid"), std::to_string(agentUid));
  EXPECT_EQ(compile->value("--outside-uid"), std::to_string(agentUid)) << "the candidate's compile runs as the attempt";
  EXPECT_EQ(reference->value("--outside-uid"), std::to_string(kSandboxUid)) << reference->text();
  int verdicts = 0;
  for (const auto& c : calls)
    if (c.isRun() && c.value("--stdout").find("-verdict.out") != std::string::npos) {
      ++verdicts;
      EXPECT_EQ(c.value("--outside-uid"), std::to_string(kSandboxUid)) << "the checker is trusted: " << c.text();
    }
  EXPECT_GT(verdicts, 0);
}

// Without --no-agent-network an agent gets the network its definition asks for: the host's,
// or the loopback with the bridge to the egress proxy and the proxy variables.
TEST_F(FlagMappingTest, WithoutNoAgentNetworkAgentsGetTheNetworkTheyAskFor) {
  startDaemon({});
  const auto host = attempt({"--agent", "hostnet"});
  const AkaboxCall* hostAgent = find(host, "/agent.out");
  ASSERT_TRUE(hostAgent);
  EXPECT_EQ(hostAgent->value("--net"), "host") << hostAgent->text();

  const auto allow = attempt({"--agent", "allownet"});
  const AkaboxCall* allowAgent = find(allow, "/agent.out");
  ASSERT_TRUE(allowAgent);
  EXPECT_EQ(allowAgent->value("--net"), "none") << allowAgent->text();
  const auto binds = allowAgent->values("--bind");
  EXPECT_TRUE(std::any_of(binds.begin(), binds.end(), [](const std::string& b) {
    return b.find(":/.akad-net-bridge") != std::string::npos;
  })) << allowAgent->text();
  ASSERT_FALSE(allowAgent->command().empty());
  EXPECT_EQ(allowAgent->command().front(), "/.akad-net-bridge") << allowAgent->text();
  EXPECT_EQ(allowAgent->sandboxEnv.value("HTTPS_PROXY", ""), "http://127.0.0.1:3128") << allowAgent->sandboxEnv.dump();
  // The scorer's sandboxes never get a network, whatever the agent had.
  for (const auto* calls : {&host, &allow})
    for (const auto& c : *calls)
      if (c.isRun() && !c.logsTo("/agent.out")) {
        EXPECT_EQ(c.value("--net"), "none") << c.text();
      }
}

// --no-agent-network: no agent gets the host network or the proxy, whatever its definition
// says; --mount-templates off: no sandbox is given a template.
TEST_F(FlagMappingTest, NoAgentNetworkAndMountTemplatesOffReachTheSandboxes) {
  startDaemon({"--no-agent-network", "--mount-templates", "off"});
  const auto host = attempt({"--agent", "hostnet"});
  const AkaboxCall* hostAgent = find(host, "/agent.out");
  ASSERT_TRUE(hostAgent);
  EXPECT_EQ(hostAgent->value("--net"), "none") << hostAgent->text();

  const auto allow = attempt({"--agent", "allownet"});
  const AkaboxCall* allowAgent = find(allow, "/agent.out");
  ASSERT_TRUE(allowAgent);
  EXPECT_EQ(allowAgent->value("--net"), "none");
  for (const auto& b : allowAgent->values("--bind")) EXPECT_EQ(b.find("/.akad-net"), std::string::npos) << b;
  EXPECT_EQ(allowAgent->command(), std::vector<std::string>{"/bin/true"}) << allowAgent->text();
  EXPECT_FALSE(allowAgent->sandboxEnv.contains("HTTPS_PROXY")) << allowAgent->sandboxEnv.dump();
  for (const auto* calls : {&host, &allow})
    for (const auto& c : *calls) {
      EXPECT_FALSE(c.has("--mount-template")) << c.text();
      EXPECT_EQ(c.templateDir, "") << c.text();
    }
}

// A run's options reach its agent's sandbox: --agent-time-limit its wall limit, --network
// none takes away the host network its definition asks for.
TEST_F(FlagMappingTest, ARunsAgentTimeLimitAndNetworkOptionReachTheAgentsSandbox) {
  startDaemon({});
  const auto calls = attempt({"--agent", "hostnet", "--agent-time-limit", "7", "--network", "none"});
  const AkaboxCall* agent = find(calls, "/agent.out");
  ASSERT_TRUE(agent);
  EXPECT_EQ(agent->value("--wall-time"), "7") << agent->text();
  EXPECT_EQ(agent->value("--net"), "none") << agent->text();
  // Without them, the agent's own limit (30 s, under the task's) and network.
  const auto plain = attempt({"--agent", "hostnet"});
  const AkaboxCall* plainAgent = find(plain, "/agent.out");
  ASSERT_TRUE(plainAgent);
  EXPECT_EQ(plainAgent->value("--wall-time"), "30") << plainAgent->text();
  EXPECT_EQ(plainAgent->value("--net"), "host") << plainAgent->text();
}

}  // namespace
}  // namespace akad::test
