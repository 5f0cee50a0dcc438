// Json: RFC 8259 conformance on the cases that matter for our files (exact integers, duplicate
// keys, strict grammar, UTF-8), and dump → parse round trips.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "tttlab/io/json.hpp"

namespace tttlab {
namespace {

TEST(Json, ParsesNestedDocumentAndKeepsOrder) {
  const Json j = Json::parse(R"( {"b": [1, -2, 3.5, true, null], "a": {"x": "y"}} )");
  ASSERT_TRUE(j.is_object());
  ASSERT_EQ(j.as_object().size(), 2u);
  EXPECT_EQ(j.as_object()[0].first, "b");
  EXPECT_EQ(j.as_object()[1].first, "a");
  const auto& b = j.find("b")->as_array();
  EXPECT_EQ(b[0].as_u64(), 1u);
  EXPECT_EQ(b[1].as_i64(), -2);
  EXPECT_DOUBLE_EQ(b[2].as_double(), 3.5);
  EXPECT_TRUE(b[3].as_bool());
  EXPECT_TRUE(b[4].is_null());
  EXPECT_EQ(j.find("a")->find("x")->as_string(), "y");
  EXPECT_EQ(j.find("zzz"), nullptr);
}

TEST(Json, IntegersAreExactUpTo2To64) {
  const Json j = Json::parse("[18446744073709551615, 9007199254740993, -9223372036854775808, 18446744073709551616]");
  const auto& a = j.as_array();
  EXPECT_EQ(a[0].as_u64(), 18446744073709551615ull);
  EXPECT_EQ(a[1].as_u64(), 9007199254740993ull);  // 2^53 + 1: a double would lose it
  EXPECT_EQ(a[2].as_i64(), INT64_MIN);
  EXPECT_FALSE(a[3].is_integer());  // beyond uint64: a double
  EXPECT_DOUBLE_EQ(a[3].as_double(), 18446744073709551616.0);
  EXPECT_THROW(a[2].as_u64(), JsonError);
  EXPECT_THROW(Json::parse("1.0").as_u64(), JsonError);
  EXPECT_THROW(Json::parse("1e2").as_u64(), JsonError);
  EXPECT_THROW(a[0].as_i64(), JsonError);
}

TEST(Json, RejectsDuplicateKeysUnlessAllowed) {
  try {
    Json::parse(R"({"a": 1, "a": 2})");
    FAIL() << "duplicate key accepted";
  } catch (const JsonError& e) {
    EXPECT_NE(std::string(e.what()).find("duplicate key \"a\""), std::string::npos) << e.what();
    EXPECT_EQ(e.offset(), 9u);
  }
  const Json j = Json::parse(R"({"a": 1, "a": 2})", {.max_depth = 64, .allow_duplicate_keys = true});
  EXPECT_EQ(j.as_object().size(), 2u);
}

TEST(Json, StringsEscapesAndUtf8) {
  const Json j = Json::parse(R"("a\"b\\c\/d\n\t\u00e9\ud83d\ude00")");
  EXPECT_EQ(j.as_string(), "a\"b\\c/d\n\t\xC3\xA9\xF0\x9F\x98\x80");
  EXPECT_EQ(Json::parse("\"\xC3\xA9\"").as_string(), "\xC3\xA9");
}

TEST(Json, RejectsInvalidDocuments) {
  const char* bad[] = {
      "",          "   ",        "{",          "[1,]",       "{\"a\":1,}", "[01]",       "[1.]",
      "[.5]",      "[1e]",       "[-]",        "tru",        "nul",        "NaN",        "Infinity",
      "'a'",       "\"a",        "\"\\x\"",    "\"\\u12\"",  "\"\\ud800\"", "\"\\udc00\"", "\"\x01\"",
      "\"\xC0\x80\"", "\"\xED\xA0\x80\"", "\"\xFF\"", "{1:2}",   "{\"a\" 1}",  "[1 2]",      "1 2",
      "[1e999]",   "// c\n1",    "[1]x",
  };
  for (const char* text : bad) EXPECT_THROW(Json::parse(text), JsonError) << "accepted: " << text;
}

TEST(Json, DepthLimit) {
  std::string deep(100, '[');
  deep += std::string(100, ']');
  EXPECT_THROW(Json::parse(deep), JsonError);
  EXPECT_NO_THROW(Json::parse(deep, {.max_depth = 200, .allow_duplicate_keys = false}));
}

TEST(Json, DumpRoundTrips) {
  Json j = Json::object();
  j["name"] = "tiny \"model\"\n";
  j["steps"] = 1000;
  j["lr"] = 3e-4;
  j["ratio"] = 2.0;
  j["neg"] = -7;
  j["ok"] = true;
  j["nothing"] = nullptr;
  Json list = Json::array();
  list.push_back(1u);
  list.push_back(0.1);
  j["list"] = std::move(list);
  for (int indent : {-1, 2}) {
    const Json back = Json::parse(j.dump(indent));
    EXPECT_EQ(back, j) << j.dump(indent);
  }
  EXPECT_EQ(j.find("ratio")->dump(), "2.0");  // stays a double when read back
  EXPECT_EQ(Json(0.1).dump(), "0.1");          // shortest round-trip form
  EXPECT_THROW(Json(std::nan("")).dump(), JsonError);
  EXPECT_THROW(Json(std::string("\xFF")).dump(), JsonError);
  EXPECT_EQ(Json(std::string("\x01")).dump(), "\"\\u0001\"");
}

}  // namespace
}  // namespace tttlab
