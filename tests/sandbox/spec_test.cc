// SandboxSpec parsing: flags and spec files share field names; bad input names the field.

#include <gtest/gtest.h>

#include <algorithm>
#include <tuple>

#include "sandbox/seccomp.h"
#include "sandbox/spec.h"

namespace akad::box {
namespace {

using nlohmann::json;

TEST(SandboxSpec, FlagsOverrideScalarsAndExtendLists) {
  json file = {{"memory", "1G"}, {"binds", {"/a:/a"}}, {"env", {{"A", "1"}, {"B", "2"}}}, {"command", {"/bin/true"}}};
  json flags = {{"memory", "512M"}, {"binds", {"/b:/c:rw"}}, {"env", {"B=3", "C=4"}}, {"wall_time", "2.5"}};
  auto s = parseSpec(file, flags);
  ASSERT_TRUE(s.ok()) << s.error().message;
  EXPECT_EQ(s->memoryBytes, 512ull << 20);
  ASSERT_EQ(s->binds.size(), 2u);
  EXPECT_EQ(s->binds[1].src, "/b");
  EXPECT_EQ(s->binds[1].dst, "/c");
  EXPECT_TRUE(s->binds[1].rw);
  EXPECT_FALSE(s->binds[0].rw);
  EXPECT_EQ(s->env, (std::map<std::string, std::string>{{"A", "1"}, {"B", "3"}, {"C", "4"}}));
  EXPECT_DOUBLE_EQ(s->wallTimeS, 2.5);
  EXPECT_EQ(s->uid, 1000u);
  EXPECT_EQ(s->net, NetMode::None);
}

TEST(SandboxSpec, BadFieldsAreNamed) {
  auto check = [](const json& j, const std::string& field) {
    json full = j;
    full["command"] = {"/bin/true"};
    auto s = parseSpec(full, json::object());
    ASSERT_FALSE(s.ok()) << j.dump();
    EXPECT_NE(s.error().message.find("'" + field + "'"), std::string::npos) << s.error().message;
  };
  check({{"memory", "lots"}}, "memory");
  check({{"net", "bridge"}}, "net");
  check({{"binds", {"relative:/x"}}}, "binds");
  check({{"binds", {"/x:/y:rx"}}}, "binds");
  check({{"tmpfs", {"/t:enormous"}}}, "tmpfs");
  check({{"tmpfs", {"/t:huge:64m"}}}, "tmpfs");
  check({{"tmpfs", {{{"dst", "/t"}, {"huge", "yes"}}}}}, "tmpfs");
  check({{"tmpfs", {{{"dst", "/t"}, {"hugepages", true}}}}}, "tmpfs");
  check({{"wall_time", -1}}, "wall_time");
  check({{"uid", "root"}}, "uid");
  check({{"cgroup_parent", "../escape"}}, "cgroup_parent");
  check({{"surprise", 1}}, "surprise");
  check({{"mount_template", "yes"}}, "mount_template");
  auto noCommand = parseSpec(json::object(), json::object());
  ASSERT_FALSE(noCommand.ok());
  EXPECT_NE(noCommand.error().message.find("command"), std::string::npos);
}

TEST(SandboxSpec, EveryProblemIsReportedAtOnceAndUnknownKeysAreNamed) {
  json j = {{"memory", "lots"}, {"net", "bridge"}, {"binds", {{{"src", "/a"}, {"dst", "/b"}, {"ro", true}}}},
            {"surprise", 1}, {"command_is_pid1", "true"}, {"command", {"/bin/true"}}};
  auto s = parseSpec(j, json::object());
  ASSERT_FALSE(s.ok());
  const std::string& m = s.error().message;
  for (const char* needle : {"unknown field 'surprise'", "'binds' has an unknown field 'ro'", "'memory'", "'net' must be",
                             "'command_is_pid1' must be true or false"})
    EXPECT_NE(m.find(needle), std::string::npos) << needle << " not in:\n" << m;
  EXPECT_EQ(std::count(m.begin(), m.end(), '\n'), 4) << m;
}

TEST(SandboxSpec, TmpfsTakesASizeAndHugePagesInEitherForm) {
  json j = {{"command", {"/bin/true"}},
            {"tmpfs", {"/a", "/b:64M", "/c:huge", "/d:1G:huge", {{"dst", "/e"}, {"size", 4096u}, {"huge", true}}}}};
  auto s = parseSpec(j, json::object());
  ASSERT_TRUE(s.ok()) << s.error().message;
  ASSERT_EQ(s->tmpfs.size(), 5u);
  const std::vector<std::tuple<std::string, uint64_t, bool>> want = {
      {"/a", 0, false}, {"/b", 64ull << 20, false}, {"/c", 0, true}, {"/d", 1ull << 30, true}, {"/e", 4096, true}};
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(s->tmpfs[i].dst, std::get<0>(want[i]));
    EXPECT_EQ(s->tmpfs[i].sizeBytes, std::get<1>(want[i])) << s->tmpfs[i].dst;
    EXPECT_EQ(s->tmpfs[i].hugePages, std::get<2>(want[i])) << s->tmpfs[i].dst;
  }
}

TEST(SandboxSpec, SizesParse) {
  EXPECT_EQ(*parseSize("123"), 123u);
  EXPECT_EQ(*parseSize("4K"), 4096u);
  EXPECT_EQ(*parseSize("512M"), 512ull << 20);
  EXPECT_EQ(*parseSize("4G"), 4ull << 30);
  EXPECT_FALSE(parseSize("").ok());
  EXPECT_FALSE(parseSize("12Q").ok());
  EXPECT_FALSE(parseSize("99999999999999999999T").ok());
}

TEST(SandboxSpec, NeverMapsToRootOutside) {
  SandboxSpec s;
  s.command = {"/bin/true"};
  s.outsideUid = 0;
  EXPECT_FALSE(outsideIds(s).ok());
  SandboxSpec d;
  auto ids = outsideIds(d);
  ASSERT_TRUE(ids.ok());
  EXPECT_EQ(ids->first, 101000u);
}

TEST(SeccompPolicy, BadPoliciesAreRejectedWithWhere) {
  auto bad = [](const json& p, const std::string& needle) {
    auto r = SeccompPolicy::compile(p, "test");
    ASSERT_FALSE(r.ok()) << p.dump();
    EXPECT_NE(r.error().message.find(needle), std::string::npos) << r.error().message;
  };
  bad({{"defaultAction", "SCMP_ACT_MAYBE"}}, "unknown action");
  bad({{"defaultAction", "SCMP_ACT_ERRNO"}, {"syscalls", {{{"names", {"read"}}, {"action", "SCMP_ACT_TRACE"}}}}}, "syscalls[0]");
  bad({{"defaultAction", "SCMP_ACT_ERRNO"}, {"syscalls", {{{"names", {"read"}}, {"action", "SCMP_ACT_ALLOW"}, {"args", {{{"index", 9}}}}}}}},
      "index");
  bad({{"defaultAction", "SCMP_ACT_ERRNO"}, {"architectures", {"SCMP_ARCH_PDP11"}}}, "architecture");
}

TEST(SeccompPolicy, EveryProblemIsReportedAtOnceAndUnknownKeysAreNamed) {
  const json p = {{"defaultAction", "SCMP_ACT_ERRNO"},
                  {"flagz", 1},
                  {"syscalls",
                   {{{"names", {"read"}}, {"action", "SCMP_ACT_ALLOW"}, {"argz", json::array()}},
                    {{"names", {"write"}}, {"action", "SCMP_ACT_MAYBE"}},
                    {{"names", {"close"}}, {"action", "SCMP_ACT_ALLOW"}, {"args", {{{"index", 1}, {"value", 2}, {"op", "SCMP_CMP_EQ"}, {"valu2", 3}}}}}}}};
  auto r = SeccompPolicy::compile(p, "'test'");
  ASSERT_FALSE(r.ok());
  const std::string& m = r.error().message;
  for (const char* needle : {"seccomp policy 'test': unknown field 'flagz'", "'syscalls[0]' has an unknown field 'argz'",
                             "'syscalls[1].action' is an unknown action 'SCMP_ACT_MAYBE'",
                             "'syscalls[2].args[0]' has an unknown field 'valu2'"})
    EXPECT_NE(m.find(needle), std::string::npos) << needle << " not in:\n" << m;
  EXPECT_EQ(std::count(m.begin(), m.end(), '\n'), 3) << m;
}

TEST(SeccompPolicy, DefaultPolicyCompilesAndReports) {
  auto p = loadSeccompPolicy("default");
  ASSERT_TRUE(p.ok()) << p.error().message;
  ASSERT_TRUE(*p);
  EXPECT_TRUE((*p)->reportsViolations());
  EXPECT_GT((*p)->instructionCount(), 50u);
  EXPECT_EQ((*p)->errnoFor(165 /* mount */), 1);
  auto none = loadSeccompPolicy("none");
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(*none);
  auto missing = loadSeccompPolicy("/nonexistent/policy.json");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.error().message.find("/nonexistent/policy.json"), std::string::npos);
}

// The form the compiled filter takes in the cache and on its way to the sandbox's init: it
// comes back whole, and anything else is refused rather than installed.
TEST(SeccompPolicy, SerializedFilterRoundTripsAndBadFormsAreRefused) {
  auto p = loadSeccompPolicy("default");
  ASSERT_TRUE(p.ok() && *p) << (p.ok() ? "" : p.error().message);
  const std::string bytes = (*p)->serialize();
  auto back = SeccompPolicy::deserialize(bytes, "test");
  ASSERT_TRUE(back);
  EXPECT_EQ(back->serialize(), bytes);
  EXPECT_EQ(back->reportsViolations(), (*p)->reportsViolations());
  EXPECT_EQ(back->instructionCount(), (*p)->instructionCount());
  EXPECT_EQ(back->errnoFor(165 /* mount */), (*p)->errnoFor(165));

  const size_t nl = bytes.find('\n');
  ASSERT_NE(nl, std::string::npos);
  const std::string body = bytes.substr(nl + 1);
  const std::string count = std::to_string((*p)->instructionCount());
  auto refused = [&](const std::string& head, const std::string& program) {
    EXPECT_FALSE(SeccompPolicy::deserialize(head + "\n" + program, "test")) << head;
  };
  refused("akabox-seccomp-2 1 1 1 " + count, body);                // another format
  refused("akabox-seccomp-3 1 1 " + count + " 7", body);           // a word more
  refused("akabox-seccomp-3 1 " + count, body);                    // a word less
  refused("akabox-seccomp-3 1 -1 " + count, body);                 // not a number
  refused("akabox-seccomp-3 2 1 " + count, body);                  // not a flag
  refused("akabox-seccomp-3 1 1 " + count, body.substr(8));        // an instruction short
  refused("akabox-seccomp-3 1 1 0", "");                           // no program
  refused("akabox-seccomp-3 1 1 99999", std::string(99999 * 8, '\0'));  // past BPF_MAXINSNS
  EXPECT_FALSE(SeccompPolicy::deserialize("akabox-seccomp-3 1 1 " + count, "test")) << "no newline";
}

}  // namespace
}  // namespace akad::box
