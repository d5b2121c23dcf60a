// The one validator of configuration files (common/config_check.h) and the one reading of
// YAML (common/yaml_json.h): every problem at once, each with its key path; unknown keys and
// anything but true/false as a boolean refused.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "common/config_check.h"
#include "common/yaml_json.h"

namespace akad {
namespace {

using nlohmann::json;

// A YAML text as a checked document would see it.
YamlDocument yaml(const std::string& text) {
  auto doc = yamlToJson(YAML::Load(text), nullptr);
  YamlDocument out;
  PlainTexts texts;
  auto again = yamlToJson(YAML::Load(text), &texts);
  EXPECT_TRUE(doc.ok() && again.ok());
  out.root = *again;
  out.texts = texts;
  EXPECT_EQ(*doc, *again) << "keeping texts must not change the tree";
  return out;
}

bool contains(const std::string& haystack, const std::string& needle) { return haystack.find(needle) != std::string::npos; }

TEST(ConfigCheck, AnUnknownKeyIsRefusedWithItsPathAndTheKnownKeys) {
  const json doc = json::parse(R"({"name": "x", "colour": "red", "binds": [{"src": "/a", "dts": "/b"}]})");
  ConfigCheck check("f.json");
  check.onlyKeys(doc, "", {"name", "binds"});
  check.onlyKeys(doc["binds"][0], indexPath("binds", 0), {"src", "dst"});
  ASSERT_EQ(check.problems().size(), 2u);
  EXPECT_EQ(check.problems()[0], "f.json: unknown field 'colour' (known: name, binds)");
  EXPECT_EQ(check.problems()[1], "f.json: 'binds[0]' has an unknown field 'dts' (known: src, dst)");
}

TEST(ConfigCheck, EveryProblemIsReportedNotOnlyTheFirst) {
  const YamlDocument d = yaml("title: [a]\ngpu: yes\ntiming: {samples: 2, rounds: x}\nsurprise: 1\n");
  ConfigCheck check("task.yaml", &d.texts);
  check.onlyKeys(d.root, "", {"title", "gpu", "timing", "prompt"});
  std::string title, prompt;
  bool gpu = false;
  int samples = 30, rounds = 3;
  EXPECT_FALSE(check.readString(d.root, "", "title", title));
  EXPECT_FALSE(check.readString(d.root, "", "prompt", prompt, ConfigCheck::Required));
  EXPECT_FALSE(check.readBool(d.root, "", "gpu", gpu));
  EXPECT_FALSE(check.readNumber(d.root["timing"], "timing", "samples", samples, 5, 100000));
  EXPECT_FALSE(check.readNumber(d.root["timing"], "timing", "rounds", rounds, 1, 100));
  EXPECT_EQ(samples, 30) << "a refused value leaves the default";
  const std::string all = check.error().message;
  EXPECT_EQ(check.problems().size(), 6u) << all;
  for (const char* needle : {"unknown field 'surprise'", "'title' must be a string", "missing field 'prompt'",
                             "'gpu' must be true or false, not 'yes'", "'timing.samples' must be between 5 and 100000, not 2",
                             "'timing.rounds' must be a number, not 'x'"})
    EXPECT_TRUE(contains(all, needle)) << needle << " not in:\n" << all;
  // One line each, every one naming the file.
  EXPECT_EQ(std::count(all.begin(), all.end(), '\n'), 5);
  for (const std::string& p : check.problems()) EXPECT_EQ(p.rfind("task.yaml: ", 0), 0u) << p;
}

TEST(ConfigCheck, ABooleanIsTrueOrFalseAndNothingElse) {
  for (const char* bad : {"yes", "no", "on", "off", "True", "FALSE", "y", "1", "0", "\"true\"", "'false'", "", "[true]"}) {
    const YamlDocument d = yaml(std::string("flag: ") + bad + "\n");
    ConfigCheck check("f.yaml", &d.texts);
    bool flag = false;
    EXPECT_FALSE(check.readBool(d.root, "", "flag", flag)) << bad;
    EXPECT_FALSE(check.ok()) << bad;
    EXPECT_TRUE(contains(check.error().message, "'flag' must be true or false")) << check.error().message;
  }
  for (auto [text, want] : {std::pair{"true", true}, {"false", false}}) {
    const YamlDocument d = yaml(std::string("flag: ") + text + "\n");
    ConfigCheck check("f.yaml", &d.texts);
    bool flag = !want;
    EXPECT_TRUE(check.readBool(d.root, "", "flag", flag)) << check.error().message;
    EXPECT_EQ(flag, want);
  }
  // JSON the same: the literals only.
  ConfigCheck check("f.json");
  bool flag = false;
  EXPECT_FALSE(check.readBool(json{{"flag", "true"}}, "", "flag", flag));
  EXPECT_FALSE(check.readBool(json{{"flag", 1}}, "", "flag", flag));
  EXPECT_TRUE(check.readBool(json{{"flag", true}}, "", "flag", flag));
  EXPECT_TRUE(flag);
}

TEST(ConfigCheck, AGoodFileIsAcceptedWithStringsAsWritten) {
  const YamlDocument d = yaml("name: tool\nversion: 1.10\nyear: 2024\nflag: true\nlist: [a, 007]\nenv: {N: 08, M: x}\n"
                              "samples: 30\nratio: 0.5\n");
  ConfigCheck check("f.yaml", &d.texts);
  check.onlyKeys(d.root, "", {"name", "version", "year", "flag", "list", "env", "samples", "ratio"});
  std::string name, version, year;
  bool flag = false;
  std::vector<std::string> list;
  std::map<std::string, std::string> env;
  int samples = 0;
  double ratio = 0;
  EXPECT_TRUE(check.readString(d.root, "", "name", name, ConfigCheck::Required));
  EXPECT_TRUE(check.readString(d.root, "", "version", version));
  EXPECT_TRUE(check.readString(d.root, "", "year", year));
  EXPECT_TRUE(check.readBool(d.root, "", "flag", flag));
  EXPECT_TRUE(check.readStrings(d.root, "", "list", list));
  EXPECT_TRUE(check.stringMap(d.root["env"], "env", env));
  EXPECT_TRUE(check.readNumber(d.root, "", "samples", samples, 5, 100000));
  EXPECT_TRUE(check.readNumber(d.root, "", "ratio", ratio, 0.0, 1.0));
  EXPECT_TRUE(check.ok()) << check.error().message;
  EXPECT_EQ(version, "1.10") << "a string field keeps the text as written";
  EXPECT_EQ(year, "2024");
  EXPECT_EQ(list, (std::vector<std::string>{"a", "007"}));
  EXPECT_EQ(env, (std::map<std::string, std::string>{{"M", "x"}, {"N", "08"}}));
  EXPECT_TRUE(flag);
  EXPECT_EQ(samples, 30);
  EXPECT_DOUBLE_EQ(ratio, 0.5);
}

TEST(ConfigCheck, AnIntegerFieldRefusesFractionsAndStrings) {
  ConfigCheck check("f.json");
  int n = 7;
  EXPECT_FALSE(check.number(json(2.5), "n", n, 0, 10));
  EXPECT_FALSE(check.number(json("3"), "n", n, 0, 10));
  EXPECT_FALSE(check.number(json(-1), "n", n, 0, 10));
  EXPECT_EQ(n, 7);
  EXPECT_TRUE(check.number(json(3), "n", n, 0, 10));
  EXPECT_EQ(n, 3);
  EXPECT_EQ(check.problems().size(), 3u);
  EXPECT_TRUE(contains(check.problems()[0], "'n' must be a whole number, not 2.5")) << check.problems()[0];
}

// The one reading of a YAML scalar (the daemon's task files and akatask both use it).
TEST(YamlToJson, PlainScalarsReadAsYaml12JsonSchemaQuotedOnesStayStrings) {
  const std::vector<std::pair<std::string, json>> table = {
      {"1", 1},           {"-3", -3},        {"+5", 5},          {"1.5", 1.5},       {".5", 0.5},
      {"5.", 5.0},        {"1e-5", 1e-5},    {"2E3", 2000.0},    {"true", true},     {"false", false},
      {"True", "True"},   {"yes", "yes"},    {"on", "on"},       {"0x10", "0x10"},   {".inf", ".inf"},
      {"nan", "nan"},     {"inf", "inf"},    {"1_000", "1_000"}, {"512M", "512M"},   {"v-8", "v-8"},
      {"1e400", "1e400"}, {"99999999999999999999", 1e20},
  };
  for (const auto& [text, want] : table) {
    EXPECT_EQ(plainScalarToJson(text), want) << text;
    auto converted = yamlToJson(YAML::Load("k: " + text));
    ASSERT_TRUE(converted.ok()) << text;
    EXPECT_EQ((*converted)["k"], want) << text;
    auto quoted = yamlToJson(YAML::Load("k: \"" + text + "\""));
    ASSERT_TRUE(quoted.ok()) << text;
    EXPECT_EQ((*quoted)["k"], json(text)) << "quoted " << text << " must stay a string";
  }
  auto nulls = yamlToJson(YAML::Load("a:\nb: ~\nc: null\nd: 'null'\n"));
  ASSERT_TRUE(nulls.ok());
  EXPECT_EQ(*nulls, json::parse(R"({"a": null, "b": null, "c": null, "d": "null"})"));
}

// The tenant policy and AKA's config.yaml keep their own way of naming a key; the rules and the
// wording of what is wrong are the same. With those namings a missing or unknown key is named by
// its whole path.
TEST(ConfigCheck, EachNamingWritesTheSameProblemsWithTheKeyInItsPlace) {
  const YamlDocument d = yaml("limits: {rate: x, burst: 3, port: 70000}\n");
  std::vector<std::string> got;
  for (ConfigCheck::Naming naming : {ConfigCheck::Naming::Quoted, ConfigCheck::Naming::Label, ConfigCheck::Naming::Bare}) {
    ConfigCheck check("f.yaml", &d.texts, naming);
    const json& limits = d.root["limits"];
    check.onlyKeys(limits, "limits", {"rate", "port", "wait"}, "limit");
    double rate = 1;
    int port = 0;
    std::string wait;
    EXPECT_FALSE(check.readNumber(limits, "limits", "rate", rate, 0.0, 1e6, "requests per second"));
    EXPECT_FALSE(check.readNumber(limits, "limits", "port", port, 1, 65535));
    EXPECT_FALSE(check.readString(limits, "limits", "wait", wait, ConfigCheck::Required));
    EXPECT_EQ(rate, 1) << "a refused value leaves the default";
    got.push_back(check.error().message);
  }
  EXPECT_EQ(got[0],
            "f.yaml: 'limits' has an unknown limit 'burst' (known: rate, port, wait)\n"
            "f.yaml: 'limits.rate' must be a number of requests per second, not 'x'\n"
            "f.yaml: 'limits.port' must be between 1 and 65535, not 70000\n"
            "f.yaml: 'limits' is missing field 'wait' (a string)");
  EXPECT_EQ(got[1],
            "f.yaml: unknown limit 'limits.burst' (known: rate, port, wait)\n"
            "f.yaml: limits.rate: must be a number of requests per second, not 'x'\n"
            "f.yaml: limits.port: must be between 1 and 65535, not 70000\n"
            "f.yaml: limits.wait: missing (a string)");
  EXPECT_EQ(got[2],
            "f.yaml: unknown limit 'limits.burst' (known: rate, port, wait)\n"
            "f.yaml: limits.rate must be a number of requests per second, not 'x'\n"
            "f.yaml: limits.port must be between 1 and 65535, not 70000\n"
            "f.yaml: limits.wait is missing (a string)");
}

TEST(ConfigCheck, ABoundIsWrittenWithAllItsDigitsAndARangeWithItsUnit) {
  const YamlDocument d = yaml("a: 2000000\nb: 0.5\n");
  ConfigCheck check("f.yaml", &d.texts);
  double a = 0, b = 0;
  EXPECT_FALSE(check.readNumber(d.root, "", "a", a, 0.0, 1e6));
  EXPECT_FALSE(check.readNumber(d.root, "", "b", b, 1.0, 604800.0, "seconds"));
  EXPECT_EQ(check.error().message,
            "f.yaml: 'a' must be between 0 and 1000000, not 2000000\n"
            "f.yaml: 'b' must be between 1 and 604800 seconds, not 0.5");
  EXPECT_EQ(a, 0);
}

// text() reads a scalar as a string field would, for a file's tolerant fields, and records
// nothing when the value is not one.
TEST(ConfigCheck, TextReadsAScalarAsWrittenAndRecordsNoProblem) {
  const YamlDocument d = yaml("a: 1.10\nb: [x]\nc: 'q'\n");
  ConfigCheck check("f.yaml", &d.texts);
  std::string a, b = "kept", c;
  EXPECT_TRUE(check.text(d.root["a"], "a", a));
  EXPECT_EQ(a, "1.10");
  EXPECT_FALSE(check.text(d.root["b"], "b", b));
  EXPECT_EQ(b, "kept");
  EXPECT_TRUE(check.text(d.root["c"], "c", c));
  EXPECT_EQ(c, "q");
  EXPECT_TRUE(check.ok());
}

TEST(YamlToJson, KeepsTheWrittenTextOfTypedPlainScalarsByPath) {
  PlainTexts texts;
  auto j = yamlToJson(YAML::Load("a: 1.10\nb: [x, 007, true]\nc: {d: \"2\"}\n"), &texts);
  ASSERT_TRUE(j.ok());
  EXPECT_EQ(texts, (PlainTexts{{"a", "1.10"}, {"b[1]", "007"}, {"b[2]", "true"}}));
}

TEST(YamlToJson, AliasesCannotBlowASmallFileUpIntoAHugeTree) {
  // Nine levels of ten aliases each: 10^9 values from a few hundred bytes.
  std::string text = "a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n";
  for (int i = 1; i <= 9; ++i) {
    const std::string n = std::to_string(i), prev = "*a" + std::to_string(i - 1);
    text += "a";
    text += n + ": &a" + n + " [";
    for (int k = 0; k < 10; ++k) text += (k ? ", " : "") + prev;
    text += "]\n";
  }
  auto j = yamlToJson(YAML::Load(text));
  ASSERT_FALSE(j.ok());
  EXPECT_TRUE(contains(j.error().message, "more than")) << j.error().message;
}

}  // namespace
}  // namespace akad
