// Request parsing and parameter validation of protocol v1 (common/protocol.h).
#include <gtest/gtest.h>

#include "common/protocol.h"

namespace akad::protocol {
namespace {

Result<Request> parse(std::string_view line, json& id) { return parseRequest(line, id); }

TEST(Protocol, ParsesAValidRequest) {
  json id;
  auto r = parse(R"({"id":7,"method":"run.get","params":{"id":"r-00000001"}})", id);
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->id, 7);
  EXPECT_EQ(r->method, "run.get");
  EXPECT_EQ(r->params.at("id"), "r-00000001");
}

TEST(Protocol, MissingOrNullParamsBecomeAnEmptyObject) {
  json id;
  auto a = parse(R"({"id":"x","method":"daemon.ping"})", id);
  ASSERT_TRUE(a);
  EXPECT_TRUE(a->params.is_object() && a->params.empty());
  auto b = parse(R"({"id":"x","method":"daemon.ping","params":null})", id);
  ASSERT_TRUE(b);
  EXPECT_TRUE(b->params.is_object());
}

TEST(Protocol, InvalidJsonIsAParseError) {
  json id = "stale";
  auto r = parse("{\"id\":1,\"method\":", id);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, kParseError);
  EXPECT_TRUE(id.is_null());
}

TEST(Protocol, WrongShapesAreInvalidRequestsAndKeepTheIdWhenReadable) {
  struct Case {
    const char* line;
    json id;
  } cases[] = {
      {R"([1,2])", nullptr},
      {R"("just a string")", nullptr},
      {R"({"method":"daemon.ping"})", nullptr},
      {R"({"id":{"a":1},"method":"daemon.ping"})", nullptr},
      {R"({"id":1.5,"method":"daemon.ping"})", nullptr},
      {R"({"id":3,"method":42})", 3},
      {R"({"id":4})", 4},
      {R"({"id":"five","method":"daemon.ping","params":[1]})", "five"},
      {R"({"id":6,"method":"daemon.ping","extra":true})", 6},
  };
  for (const auto& c : cases) {
    json id;
    auto r = parse(c.line, id);
    ASSERT_FALSE(r) << c.line;
    EXPECT_EQ(r.error().code, kInvalidRequest) << c.line;
    EXPECT_EQ(id, c.id) << c.line;
    EXPECT_FALSE(r.error().message.empty());
  }
}

TEST(Protocol, OversizedLineIsRefusedBeforeParsing) {
  std::string line(kMaxLineBytes + 1, ' ');
  json id;
  auto r = parse(line, id);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, kRequestTooLarge);
}

TEST(Protocol, DeepNestingIsRefusedWithoutRecursing) {
  std::string deep = R"({"id":1,"method":"daemon.ping","params":{"x":)" + std::string(500000, '[') + "}}";
  json id;
  auto r = parse(deep, id);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, kInvalidRequest);
  // Brackets inside strings are not nesting.
  std::string inString = R"({"id":1,"method":"m","params":{"s":")" + std::string(1000, '[') + "\"}}";
  EXPECT_TRUE(parse(inString, id));
}

TEST(Protocol, ResponsesAreSingleLinesAndSurviveInvalidUtf8) {
  std::string line = toLine(makeError(1, kNotFound, std::string("bad \xff byte")));
  EXPECT_EQ(line.back(), '\n');
  EXPECT_EQ(line.find('\n'), line.size() - 1);
  json back = json::parse(line);
  EXPECT_EQ(back.at("error").at("code"), kNotFound);
  EXPECT_EQ(toLine(makeResult("a", json{{"k", "multi\nline"}})).find('\n'), toLine(makeResult("a", json{{"k", "multi\nline"}})).size() - 1);
}

TEST(ProtocolParams, TypesAndRangesAreCheckedWithTheParameterNamed) {
  json p = json::parse(R"({"s":"x","n":5,"b":true,"wrong":"7","big":18446744073709551615,"neg":-3})");
  EXPECT_EQ(*requireString(p, "s"), "x");
  auto missing = requireString(p, "absent");
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().code, kInvalidParams);
  EXPECT_NE(missing.error().message.find("absent"), std::string::npos);
  auto notString = requireString(p, "n");
  ASSERT_FALSE(notString);
  EXPECT_NE(notString.error().message.find("\"n\" must be a string"), std::string::npos);
  EXPECT_EQ(*optionalInt(p, "n", 1, 1, 10), 5);
  EXPECT_EQ(*optionalInt(p, "absent", 3, 1, 10), 3);
  EXPECT_FALSE(optionalInt(p, "wrong", 1, 1, 10));
  EXPECT_FALSE(optionalInt(p, "big", 1, 1, 10));
  EXPECT_FALSE(optionalInt(p, "neg", 1, 1, 10));
  EXPECT_FALSE(optionalInt(p, "n", 1, 6, 10));
  EXPECT_TRUE(*optionalBool(p, "b", false));
  EXPECT_FALSE(optionalBool(p, "s", false));
  EXPECT_FALSE(optionalString(p, "n"));
  EXPECT_FALSE(optionalString(p, "absent")->has_value());
  auto extra = allowOnly(p, {"s", "n"});
  ASSERT_FALSE(extra);
  EXPECT_EQ(extra.error().code, kInvalidParams);
  EXPECT_TRUE(allowOnly(p, {"s", "n", "b", "wrong", "big", "neg"}));
}

}  // namespace
}  // namespace akad::protocol
