//===- JsonTest.cpp - The strict JSON reader and writer -------------------===//

#include "runtime/io/Json.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>

using namespace tetra::io;

namespace {

::testing::AssertionResult contains(const std::string &text,
                                    const std::string &part) {
  if (text.find(part) != std::string::npos)
    return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << "\"" << text << "\" does not contain \"" << part << "\"";
}

JsonValue parseOk(std::string_view text, const JsonParseOptions &options = {}) {
  Expected<JsonValue> value = parseJson(text, options);
  EXPECT_TRUE(value.ok()) << "for " << text << ": "
                          << (value ? "" : value.error().message());
  return value ? value.take() : JsonValue();
}

std::string parseError(std::string_view text,
                       const JsonParseOptions &options = {}) {
  Expected<JsonValue> value = parseJson(text, options);
  EXPECT_FALSE(value.ok()) << "accepted: " << text;
  return value ? std::string() : value.error().message();
}

TEST(JsonTest, Literals) {
  EXPECT_TRUE(parseOk("null").isNull());
  EXPECT_TRUE(parseOk("true").isBool());
  EXPECT_TRUE(parseOk("true").asBool());
  EXPECT_FALSE(parseOk("false").asBool());
  EXPECT_TRUE(parseOk(" \t\r\n null \n").isNull());
}

TEST(JsonTest, Integers) {
  JsonValue zero = parseOk("0");
  EXPECT_TRUE(zero.isInteger());
  EXPECT_EQ(zero.asInt64(), 0);
  EXPECT_EQ(parseOk("-45").asInt64(), -45);
  // Beyond 2^53: exact as an int64, where a double would round.
  JsonValue big = parseOk("9007199254740993");
  EXPECT_TRUE(big.isInteger());
  EXPECT_EQ(big.asInt64(), INT64_C(9007199254740993));
  EXPECT_EQ(parseOk("9223372036854775807").asInt64(), INT64_MAX);
  EXPECT_EQ(parseOk("-9223372036854775808").asInt64(), INT64_MIN);
  // Beyond int64: a double, not an integer.
  JsonValue huge = parseOk("9223372036854775808");
  EXPECT_FALSE(huge.isInteger());
  EXPECT_DOUBLE_EQ(huge.asDouble(), 9223372036854775808.0);
}

TEST(JsonTest, Doubles) {
  EXPECT_DOUBLE_EQ(parseOk("1.5").asDouble(), 1.5);
  EXPECT_FALSE(parseOk("1.5").isInteger());
  EXPECT_DOUBLE_EQ(parseOk("-0.25e2").asDouble(), -25.0);
  EXPECT_DOUBLE_EQ(parseOk("1E-3").asDouble(), 1e-3);
  EXPECT_DOUBLE_EQ(parseOk("1e+3").asDouble(), 1000.0);
  // Integral values written with a fraction or exponent count as integers
  // up to 2^53.
  EXPECT_TRUE(parseOk("2.0").isInteger());
  EXPECT_EQ(parseOk("1e3").asInt64(), 1000);
  EXPECT_FALSE(parseOk("1e300").isInteger());
  // Correctly rounded.
  EXPECT_EQ(parseOk("0.1").asDouble(), 0.1);
  EXPECT_EQ(parseOk("2.2250738585072014e-308").asDouble(),
            std::numeric_limits<double>::min());
  EXPECT_EQ(parseOk("1.7976931348623157e308").asDouble(),
            std::numeric_limits<double>::max());
  // Underflow is zero; overflow is an error.
  EXPECT_EQ(parseOk("1e-400").asDouble(), 0.0);
  EXPECT_TRUE(std::signbit(parseOk("-1e-400").asDouble()));
  EXPECT_TRUE(contains(parseError("1e400"), "out of the range of a double"));
  EXPECT_TRUE(
      contains(parseError("-123456e400"), "out of the range of a double"));
  EXPECT_EQ(parseOk("0e99999").asDouble(), 0.0);
}

TEST(JsonTest, MalformedNumbers) {
  EXPECT_TRUE(contains(parseError("01"), "leading zeros"));
  EXPECT_TRUE(contains(parseError("-"), "expected a digit"));
  EXPECT_TRUE(contains(parseError("1."), "expected a digit after '.'"));
  EXPECT_TRUE(contains(parseError("1e"), "exponent"));
  EXPECT_TRUE(contains(parseError("1e+"), "exponent"));
  EXPECT_TRUE(contains(parseError(".5"), "expected a JSON value"));
  EXPECT_TRUE(contains(parseError("+1"), "expected a JSON value"));
  EXPECT_TRUE(contains(parseError("NaN"), "expected a JSON value"));
  EXPECT_TRUE(contains(parseError("Infinity"), "expected a JSON value"));
  EXPECT_TRUE(contains(parseError("0x10"), "after the JSON value"));
}

TEST(JsonTest, StringEscapes) {
  EXPECT_EQ(parseOk(R"("plain")").asString(), "plain");
  EXPECT_EQ(parseOk(R"("")").asString(), "");
  EXPECT_EQ(parseOk(R"("\"\\\/\b\f\n\r\t")").asString(), "\"\\/\b\f\n\r\t");
  EXPECT_EQ(parseOk(R"("\u0041\u00e9\u20AC")").asString(),
            "A\xC3\xA9\xE2\x82\xAC");
  EXPECT_EQ(parseOk(R"("\u0000")").asString(), std::string(1, '\0'));
  // A surrogate pair is one code point, U+1F600, four bytes of UTF-8.
  EXPECT_EQ(parseOk(R"("\uD83D\uDE00")").asString(), "\xF0\x9F\x98\x80");
  EXPECT_EQ(parseOk(R"("\udbff\udfff")").asString(), "\xF4\x8F\xBF\xBF");
  // Raw UTF-8 passes through.
  EXPECT_EQ(parseOk("\"caf\xC3\xA9 \xF0\x9F\x98\x80\"").asString(),
            "caf\xC3\xA9 \xF0\x9F\x98\x80");
}

TEST(JsonTest, MalformedStrings) {
  EXPECT_TRUE(contains(parseError(R"("abc)"), "unterminated string"));
  EXPECT_TRUE(contains(parseError(R"("abc\)"), "unterminated string"));
  EXPECT_TRUE(contains(parseError(R"("\x")"), "invalid escape sequence '\\x'"));
  EXPECT_TRUE(contains(parseError(R"("\u12")"), "four hex digits"));
  EXPECT_TRUE(contains(parseError(R"("\u12G4")"), "four hex digits"));
  EXPECT_TRUE(contains(parseError(R"("\uDE00")"), "unpaired low surrogate"));
  EXPECT_TRUE(contains(parseError(R"("\uD83D")"), "not followed by a low"));
  EXPECT_TRUE(contains(parseError(R"("\uD83Dx")"), "not followed by a low"));
  EXPECT_TRUE(
      contains(parseError(R"("\uD83D\u0041")"), "not followed by a low"));
  EXPECT_TRUE(contains(parseError("\"a\nb\""), "control character"));
  EXPECT_TRUE(contains(parseError("\"a\tb\""), "must be escaped"));
  // Invalid UTF-8: a lone continuation byte, an overlong form, an encoded
  // surrogate, a code point above U+10FFFF, a truncated sequence.
  for (const char *text :
       {"\"\x80\"", "\"\xC0\x80\"", "\"\xED\xA0\x80\"", "\"\xF4\x90\x80\x80\"",
        "\"\xF5\x80\x80\x80\"", "\"\xE2\x82\"", "\"\xE2\x82"})
    EXPECT_TRUE(contains(parseError(text), "invalid UTF-8")) << text;
}

TEST(JsonTest, ArraysAndObjects) {
  JsonValue value = parseOk(
      R"({"b": [1, 2.5, "x", null, true, [], {}], "a": {"nested": [[]]}})");
  ASSERT_TRUE(value.isObject());
  ASSERT_EQ(value.members().size(), 2u);
  // Document order, not sorted.
  EXPECT_EQ(value.members()[0].key, "b");
  EXPECT_EQ(value.members()[1].key, "a");
  const JsonValue *b = value.find("b");
  ASSERT_NE(b, nullptr);
  ASSERT_EQ(b->items().size(), 7u);
  EXPECT_EQ(b->items()[0].asInt64(), 1);
  EXPECT_EQ(b->items()[2].asString(), "x");
  EXPECT_TRUE(b->items()[5].isArray());
  EXPECT_TRUE(b->items()[6].isObject());
  EXPECT_EQ(value.find("missing"), nullptr);
  EXPECT_EQ(b->find("anything"), nullptr); // Not an object.
  // get(): the member itself, or a null value.
  EXPECT_EQ(&value.get("b"), b);
  EXPECT_TRUE(value.get("missing").isNull());
  EXPECT_TRUE(b->get("anything").isNull());
  EXPECT_TRUE(parseOk("[ ]").items().empty());
  EXPECT_TRUE(parseOk("{ }").members().empty());
}

TEST(JsonTest, MalformedStructure) {
  EXPECT_TRUE(contains(parseError("[1,]"), "expected a JSON value"));
  EXPECT_TRUE(contains(parseError("[1 2]"), "expected ',' or ']'"));
  EXPECT_TRUE(contains(parseError("[1"), "found end of input"));
  EXPECT_TRUE(contains(parseError(R"({"a":1,})"), "expected a string key"));
  EXPECT_TRUE(contains(parseError(R"({"a" 1})"), "expected ':'"));
  EXPECT_TRUE(contains(parseError(R"({"a":1 "b":2})"), "expected ',' or '}'"));
  EXPECT_TRUE(contains(parseError("{a:1}"), "expected a string key"));
  EXPECT_TRUE(contains(parseError(""), "found end of input"));
  EXPECT_TRUE(contains(parseError("   "), "found end of input"));
  EXPECT_TRUE(contains(parseError("tru"), "expected 'true'"));
  EXPECT_TRUE(contains(parseError("nul"), "expected 'null'"));
  EXPECT_TRUE(contains(parseError("1 2"), "unexpected '2' after the JSON"));
  EXPECT_TRUE(contains(parseError("{} // comment"), "unexpected '/'"));
  EXPECT_TRUE(contains(parseError("[\x01]"), "byte 0x01"));
}

TEST(JsonTest, DuplicateKeys) {
  EXPECT_TRUE(
      contains(parseError(R"({"a":1,"b":2,"a":3})"), "duplicate key \"a\""));
  // The hashed path for large objects, and the position of the duplicate.
  std::string big = "{";
  for (int i = 0; i < 40; ++i)
    big += "\"k" + std::to_string(i) + "\":" + std::to_string(i) + ",";
  big += "\"k7\":0}";
  std::string message = parseError(big);
  EXPECT_TRUE(contains(message, "duplicate key \"k7\""));
  EXPECT_TRUE(
      contains(message, "(byte " + std::to_string(big.rfind("\"k7\"")) + ")"));
  JsonParseOptions allow;
  allow.allowDuplicateKeys = true;
  JsonValue value = parseOk(R"({"a":1,"a":2})", allow);
  EXPECT_EQ(value.members().size(), 2u);
  EXPECT_EQ(value.find("a")->asInt64(), 1); // The first.
}

TEST(JsonTest, ErrorPositions) {
  EXPECT_EQ(parseError("{\n  \"a\": tru\n}"),
            "line 2, column 8 (byte 9): invalid literal; expected 'true'");
  EXPECT_EQ(parseError("[1,\n2,\n\n  x]"),
            "line 4, column 3 (byte 10): expected a JSON value, found 'x'");
  EXPECT_TRUE(contains(parseError("\"abc"), "line 1, column 1 (byte 0)"));
}

TEST(JsonTest, DepthLimit) {
  std::string ok(256, '[');
  ok += std::string(256, ']');
  EXPECT_TRUE(parseJson(ok).ok());
  std::string deep(257, '[');
  deep += std::string(257, ']');
  EXPECT_TRUE(contains(parseError(deep), "nested deeper than 256"));
  // No stack overflow however deep the input.
  std::string hostile(1000000, '[');
  EXPECT_TRUE(contains(parseError(hostile), "nested deeper"));
  std::string objects;
  for (int i = 0; i < 100000; ++i)
    objects += "{\"a\":";
  EXPECT_TRUE(contains(parseError(objects), "nested deeper"));
  JsonParseOptions shallow;
  shallow.maxDepth = 2;
  EXPECT_TRUE(parseJson("[[1]]", shallow).ok());
  EXPECT_FALSE(parseJson("[[[1]]]", shallow).ok());
}

TEST(JsonTest, WriterEscapesAndNumbers) {
  std::string out;
  appendJsonString(out, std::string("a\"b\\c\n\x01\x1f/\xC3\xA9", 11));
  EXPECT_EQ(out, "\"a\\\"b\\\\c\\n\\u0001\\u001f/\xC3\xA9\"");
  EXPECT_EQ(writeJson(JsonValue::number(0.1)), "0.1");
  EXPECT_EQ(writeJson(JsonValue::number(1e300)), "1e+300");
  EXPECT_EQ(writeJson(JsonValue::number(-2.0)), "-2");
  EXPECT_EQ(writeJson(JsonValue::integer(INT64_MIN)), "-9223372036854775808");
  EXPECT_EQ(writeJson(JsonValue::number(NAN)), "null");
  EXPECT_EQ(writeJson(JsonValue::number(INFINITY)), "null");
}

TEST(JsonTest, WriterBuildsObjects) {
  JsonValue object = JsonValue::object();
  object.set("dtype", JsonValue::string("F32"));
  JsonValue shape = JsonValue::array();
  shape.push(JsonValue::integer(2));
  shape.push(JsonValue::integer(3));
  object.set("shape", std::move(shape));
  object.set("dtype", JsonValue::string("BF16")); // Replaces, keeps order.
  object.set("ok", JsonValue::boolean(true));
  object.set("none", JsonValue::null());
  EXPECT_EQ(writeJson(object),
            R"({"dtype":"BF16","shape":[2,3],"ok":true,"none":null})");
}

TEST(JsonTest, RoundTrip) {
  const char *text =
      R"({"text":"Tetra \u00e9\ud83d\ude00\n\"q\"","ts":"2019-04-25T12:57:54Z",)"
      R"("n":[0,-1,9007199254740993,1.25,-3.5e-7,1e+300,true,false,null],)"
      R"("o":{"":{},"x":[[],[{}]]}})";
  JsonValue first = parseOk(text);
  std::string written = writeJson(first);
  JsonValue second = parseOk(written);
  EXPECT_EQ(writeJson(second), written);
  EXPECT_EQ(second.find("text")->asString(),
            "Tetra \xC3\xA9\xF0\x9F\x98\x80\n\"q\"");
  EXPECT_EQ(second.find("n")->items()[2].asInt64(), INT64_C(9007199254740993));
  EXPECT_EQ(second.find("n")->items()[4].asDouble(), -3.5e-7);
}

TEST(JsonTest, C4Line) {
  JsonValue record = parseOk(
      R"({"text":"Beginners BBQ Class Taking Place in Missoula!\nDo you want to get better at making delicious BBQ?","timestamp":"2019-04-25T12:57:54Z","url":"https://klyq.com/beginners-bbq-class-taking-place-in-missoula/"})");
  ASSERT_NE(record.find("text"), nullptr);
  EXPECT_EQ(record.find("text")->asString().find('\n'), 45u);
  EXPECT_EQ(record.find("url")->asString(),
            "https://klyq.com/beginners-bbq-class-taking-place-in-missoula/");
}

TEST(JsonTest, KindNames) {
  EXPECT_EQ(JsonValue::kindName(JsonValue::Kind::Object), "object");
  EXPECT_EQ(JsonValue::kindName(JsonValue::Kind::Number), "number");
}

} // namespace
