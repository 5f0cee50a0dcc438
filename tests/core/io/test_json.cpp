// tttlab/io/json.hpp: the checks the project adds on top of nlohmann-json — the source and byte
// offset in parse errors, the nesting cap (deep input fails cleanly), duplicate keys with where they
// are, non-finite numbers refused, exact 64-bit integers, typed field reads whose errors name the
// file and the field, and writing that never throws on content (null for non-finite, U+FFFD for
// invalid UTF-8).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>

#include "tttlab/io/json.hpp"

namespace tttlab {
namespace {

// The message of the JsonError `f` throws ("" and a test failure when it throws none).
template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const JsonError& e) {
    return e.what();
  }
  ADD_FAILURE() << "no JsonError";
  return {};
}

TEST(Json, ParsesAndKeepsDocumentOrder) {
  const Json j = parse_json(R"( {"b": [1, -2, 3.5, true, null], "a": {"x": "y"}} )", "t.json");
  ASSERT_TRUE(j.is_object());
  EXPECT_EQ(j.begin().key(), "b");
  EXPECT_EQ(j.dump(), R"({"b":[1,-2,3.5,true,null],"a":{"x":"y"}})");
}

TEST(Json, ParseErrorNamesTheSourceAndTheByte) {
  const std::string msg = error_of([] { parse_json("{\"a\": 1,, }", "config.json"); });
  EXPECT_EQ(msg.rfind("config.json: JSON parse error at byte 9: ", 0), 0u) << msg;
  EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
  EXPECT_EQ(msg.find("[json.exception"), std::string::npos) << msg;
  for (const char* bad : {"", "{", "[1,]", "[01]", "NaN", "'a'", "\"\\ud800\"", "\"\xFF\"", "[1]x", "// c\n1"})
    EXPECT_THROW(parse_json(bad, "x"), JsonError) << "accepted: " << bad;
}

TEST(Json, NestingCapFailsCleanlyOnDeepInput) {
  std::string ok(64, '[');
  ok += std::string(64, ']');
  EXPECT_NO_THROW(parse_json(ok, "x"));
  std::string deep(65, '[');
  deep += std::string(65, ']');
  EXPECT_NE(error_of([&] { parse_json(deep, "deep.json"); }).find("deep.json: JSON nested deeper than 64 levels"),
            std::string::npos);
  // A million levels (unclosed): refused at level 65, long before memory or the stack matter.
  const std::string hostile(1'000'000, '[');
  EXPECT_THROW(parse_json(hostile, "x"), JsonError);
  std::string objects;
  for (int i = 0; i < 100'000; ++i) objects += "{\"a\":";
  EXPECT_THROW(parse_json(objects, "x"), JsonError);
  EXPECT_NO_THROW(parse_json(deep, "x", {.max_depth = 100}));
}

TEST(Json, DuplicateKeysAreRefusedWithTheirPlace) {
  try {
    parse_json(R"({"t": [{"k": 1}, {"k": 2, "k": 3}]})", "h.json");
    FAIL() << "duplicate key accepted";
  } catch (const JsonDuplicateKey& e) {
    EXPECT_EQ(e.key(), "k");
    EXPECT_EQ(e.path(), (std::vector<std::string>{"t", "[1]"}));
    EXPECT_STREQ(e.what(), "h.json: duplicate key 'k' in 't.[1]'");
  }
  EXPECT_NO_THROW(parse_json(R"({"a": {"k": 1}, "b": {"k": 2}})", "x"));  // same key, other objects
  const Json last = parse_json(R"({"a": 1, "a": 2})", "x", {.max_depth = 64, .reject_duplicate_keys = false});
  EXPECT_EQ(last["a"].get<int>(), 2);
}

TEST(Json, IntegersAreExactAndHugeNumbersRefused) {
  const Json j = parse_json("[18446744073709551615, 9007199254740993, -9223372036854775808, 1.0]", "x");
  EXPECT_TRUE(j[0].is_number_unsigned());
  EXPECT_EQ(j[0].get<std::uint64_t>(), 18446744073709551615ull);
  EXPECT_EQ(j[1].get<std::uint64_t>(), 9007199254740993ull);  // 2^53 + 1: a double would lose it
  EXPECT_EQ(j[2].get<std::int64_t>(), std::numeric_limits<std::int64_t>::min());
  EXPECT_TRUE(j[3].is_number_float());
  EXPECT_NE(error_of([] { parse_json("[1e999]", "big.json"); }).find("big.json"), std::string::npos);
}

TEST(Json, FieldReadsNameTheFileAndTheField) {
  const Json j = parse_json(
      R"({"hidden_size": 64.5, "layers": 4, "big": 5000000000, "neg": -1, "lr": 3, "on": 1, "name": 7, "ok": true})",
      "config.json");
  const JsonFields f(j, "config.json");
  int i = 0;
  EXPECT_EQ(error_of([&] { f.read("hidden_size", i); }), "config.json: field 'hidden_size' must be an integer");
  EXPECT_EQ(error_of([&] { f.read("big", i); }), "config.json: field 'big' is out of range");
  long l = 0;
  EXPECT_TRUE(f.read("big", l));
  EXPECT_EQ(l, 5000000000L);
  std::uint64_t u = 0;
  EXPECT_EQ(error_of([&] { f.read("neg", u); }), "config.json: field 'neg' must be a non-negative integer");
  double d = 0;
  EXPECT_TRUE(f.read("lr", d));  // an integer is a number
  EXPECT_EQ(d, 3.0);
  bool b = false;
  EXPECT_EQ(error_of([&] { f.read("on", b); }), "config.json: field 'on' must be true or false");
  std::string s;
  EXPECT_EQ(error_of([&] { f.read("name", s); }), "config.json: field 'name' must be a string");
  EXPECT_EQ(error_of([&] { f.require<int>("missing"); }), "config.json: field 'missing' is missing");
  i = 17;
  EXPECT_FALSE(f.read("absent", i));
  EXPECT_EQ(i, 17);  // left as it was
  EXPECT_EQ(f.require<int>("layers"), 4);
  EXPECT_TRUE(f.require<bool>("ok"));
  EXPECT_EQ(error_of([] { JsonFields(Json::array(), "list.json"); }), "list.json: expected a JSON object");
}

TEST(Json, WritingNeverThrowsOnContent) {
  Json j = Json::object();
  j["nan"] = std::nan("");
  j["inf"] = std::numeric_limits<double>::infinity();
  j["bad"] = std::string("a\xFF" "b");
  j["x"] = 0.1;
  EXPECT_EQ(dump_json(j), "{\"nan\":null,\"inf\":null,\"bad\":\"a\xEF\xBF\xBD" "b\",\"x\":0.1}");
  EXPECT_EQ(parse_json(dump_json(j), "x")["x"].get<double>(), 0.1);  // shortest form that reads back
}

}  // namespace
}  // namespace tttlab
