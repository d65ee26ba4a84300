// tests/core/test_json.cpp — core/json.h: values, limits and errors, and the
// reader against nlohmann::json on fixed and generated texts.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>

#include "core/json.h"
#include "core/json_reference.h"

namespace tern {
namespace {

Json parse_ok(std::string_view text) {
  auto r = Json::parse(text);
  EXPECT_TRUE(r.is_ok()) << text << ": " << r.status().message();
  return r.is_ok() ? std::move(r).value() : Json();
}

std::string parse_error(std::string_view text, int max_depth = Json::kDefaultMaxDepth) {
  auto r = Json::parse(text, max_depth);
  EXPECT_FALSE(r.is_ok()) << "accepted: " << text;
  return r.status().message();
}

TEST(Json, ReadsEveryKindOfValue) {
  const Json j = parse_ok(R"( {"a": [1, -2, 3.5, true, false, null, "x"], "b": {}, "c": []} )");
  ASSERT_TRUE(j.is_object());
  ASSERT_EQ(j.size(), 3u);
  const Json& a = j["a"];
  ASSERT_TRUE(a.is_array());
  ASSERT_EQ(a.size(), 7u);
  EXPECT_EQ(*a.as_array()[0].to_int64(), 1);
  EXPECT_EQ(*a.as_array()[1].to_int64(), -2);
  EXPECT_EQ(a.as_array()[2].as_double(), 3.5);
  EXPECT_FALSE(a.as_array()[2].to_int64());  // a float is not an integer, even 3.0
  EXPECT_TRUE(a.as_array()[3].as_bool());
  EXPECT_FALSE(a.as_array()[4].as_bool());
  EXPECT_TRUE(a.as_array()[5].is_null());
  EXPECT_EQ(a.as_array()[6].as_string(), "x");
  EXPECT_TRUE(j["b"].is_object() && j["b"].empty());
  EXPECT_TRUE(j["c"].is_array() && j["c"].empty());
  EXPECT_TRUE(j["missing"].is_null());
  EXPECT_FALSE(j.contains("missing"));
  EXPECT_TRUE(a["key of an array"].is_null());  // const lookup on a non-object: null, no assert
  EXPECT_EQ(j.dump(), R"({"a":[1,-2,3.5,true,false,null,"x"],"b":{},"c":[]})");
}

TEST(Json, KeepsKeyOrderAndFindsTheLastOfARepeatedKey) {
  const Json j = parse_ok(R"({"z": 1, "a": 2, "m": 3, "a": 4})");
  EXPECT_EQ(*j["a"].to_int64(), 4);
  EXPECT_EQ(j.dump(), R"({"z":1,"a":2,"m":3,"a":4})");  // as sent
  const auto distinct = j.distinct_members();  // as Python's json.loads: first place, last value
  ASSERT_EQ(distinct.size(), 3u);
  EXPECT_EQ(distinct[0].first, "z");
  EXPECT_EQ(distinct[1].first, "a");
  EXPECT_EQ(*distinct[1].second->to_int64(), 4);
  EXPECT_EQ(distinct[2].first, "m");
  Json built;
  built["y"] = 1;
  built["b"] = "two";
  built["y"] = 3;  // replaces in place
  EXPECT_EQ(built.dump(), R"({"y":3,"b":"two"})");
}

TEST(Json, IntegersKeepAll64BitsAndLargerOnesBecomeFloats) {
  EXPECT_EQ(*parse_ok("9223372036854775807").to_int64(), INT64_MAX);
  EXPECT_EQ(*parse_ok("-9223372036854775808").to_int64(), INT64_MIN);
  const Json u = parse_ok("18446744073709551615");
  EXPECT_FALSE(u.to_int64());
  EXPECT_EQ(*u.to_uint64(), UINT64_MAX);
  EXPECT_EQ(u.dump(), "18446744073709551615");
  EXPECT_FALSE(parse_ok("-1").to_uint64());
  const Json big = parse_ok("18446744073709551616");
  EXPECT_EQ(big.type(), Json::Type::Double);
  EXPECT_EQ(big.as_double(), 18446744073709551616.0);
  EXPECT_EQ(parse_ok("-9223372036854775809").type(), Json::Type::Double);
  EXPECT_EQ(parse_ok("-0").dump(), "0");
  EXPECT_EQ(Json(uint64_t{5}).type(), Json::Type::Int);
  EXPECT_EQ(Json(UINT64_MAX).type(), Json::Type::Uint);
}

TEST(Json, FloatsReadExactlyAndWriteShortest) {
  EXPECT_EQ(parse_ok("0.1").as_double(), 0.1);
  EXPECT_EQ(parse_ok("1E2").as_double(), 100.0);
  EXPECT_EQ(parse_ok("1.0").dump(), "1.0");  // stays a float when read back
  EXPECT_EQ(parse_ok("-0.0").dump(), "-0.0");
  EXPECT_EQ(parse_ok("0.1").dump(), "0.1");
  EXPECT_EQ(parse_ok("1e100").dump(), "1e+100");
  EXPECT_EQ(parse_ok("4e-320").as_double(), 4e-320);  // subnormal
  EXPECT_EQ(parse_ok("1e-400").as_double(), 0.0);     // below the smallest subnormal: zero
  EXPECT_TRUE(std::signbit(parse_ok("-1e-400").as_double()));
  EXPECT_NE(parse_error("1e400").find("out of range"), std::string::npos);
  EXPECT_NE(parse_error("-123456789e301").find("out of range"), std::string::npos);
  EXPECT_EQ(Json(std::numeric_limits<double>::infinity()).dump(), "null");  // still valid JSON
  EXPECT_EQ(Json(std::nan("")).dump(), "null");
}

TEST(Json, StringsEscapesAndUtf8) {
  EXPECT_EQ(parse_ok(R"("a\"b\\c\/d\b\f\n\r\t")").as_string(), "a\"b\\c/d\b\f\n\r\t");
  EXPECT_EQ(parse_ok(R"("\u00e9\u20AC")").as_string(), "\xC3\xA9\xE2\x82\xAC");
  EXPECT_EQ(parse_ok(R"("\ud83d\ude00")").as_string(), "\xF0\x9F\x98\x80");
  EXPECT_EQ(parse_ok(R"("\u0000x")").as_string(), std::string("\0x", 2));
  EXPECT_EQ(parse_ok("\"\xF0\x9F\x98\x80\"").as_string(), "\xF0\x9F\x98\x80");
  EXPECT_NE(parse_error(R"("\ud83d")").find("surrogate"), std::string::npos);
  EXPECT_NE(parse_error(R"("\ude00")").find("surrogate"), std::string::npos);
  EXPECT_NE(parse_error(R"("\ud83d\u0041")").find("surrogate"), std::string::npos);
  for (const char* bad : {"\"\xC0\x80\"", "\"\xED\xA0\x80\"", "\"\xF5\x80\x80\x80\"", "\"\x80\"", "\"\xE2\x82\"",
                          "\"\xF4\x90\x80\x80\""})
    EXPECT_NE(parse_error(bad).find("UTF-8"), std::string::npos) << bad;
  EXPECT_NE(parse_error("\"a\nb\"").find("control character"), std::string::npos);
  EXPECT_NE(parse_error(R"("\x")").find("escape"), std::string::npos);
  EXPECT_NE(parse_error(R"("\u12G4")").find("hex"), std::string::npos);
  // Written back: control characters escaped, '/' and non-ASCII as they are,
  // bytes that are not UTF-8 as U+FFFD.
  EXPECT_EQ(Json(std::string("\x01\x1f\x7f/\xC3\xA9", 6)).dump(), "\"\\u0001\\u001f\x7f/\xC3\xA9\"");
  EXPECT_EQ(Json("a\xFF" "b\xE2\x82").dump(), "\"a\xEF\xBF\xBD" "b\xEF\xBF\xBD\xEF\xBF\xBD\"");
}

TEST(Json, ErrorsNameTheByte) {
  EXPECT_EQ(parse_error(R"({"a" 1})"), "invalid JSON at byte 5: expected ':'");
  EXPECT_EQ(parse_error("[1, 2"), "invalid JSON at byte 5: unexpected end of input in an array");
  EXPECT_EQ(parse_error("1 2"), "invalid JSON at byte 2: unexpected text after the value");
  EXPECT_EQ(parse_error(""), "invalid JSON at byte 0: unexpected end of input");
  EXPECT_EQ(parse_error("{\"a\": 1,\n \"b\" 2}"), "invalid JSON at line 2, column 6 (byte 14): expected ':'");
  for (const char* bad : {"   ", "[1,]", "{,}", "{\"a\":1,}", "01", "+1", ".5", "1.", "1e", "1e+", "-", "NaN",
                          "Infinity", "'a'", "[1 2]", "{\"a\"}", "{1:2}", "tru", "nul", "[", "{", "\"abc",
                          "\xEF\xBB", "[\"a\",]"})
    parse_error(bad);
  parse_error(std::string_view("1\0", 2));  // NUL is not whitespace (nlohmann stops reading there)
}

TEST(Json, NestingIsBounded) {
  const auto nested = [](int n) { return std::string(n, '[') + std::string(n, ']'); };
  parse_ok(nested(Json::kDefaultMaxDepth));
  EXPECT_NE(parse_error(nested(Json::kDefaultMaxDepth + 1)).find("nested deeper than 256 levels"), std::string::npos);
  EXPECT_EQ(parse_error(R"({"a":{"b":[1]}})", 2), "invalid JSON at byte 10: nested deeper than 2 levels (the limit here)");
  EXPECT_TRUE(Json::parse(R"({"a":{"b":[1]}})", 3).is_ok());
  // A hostile depth costs no stack: refused at the limit, not recursed into.
  parse_error(std::string(1 << 20, '['));
}

TEST(Json, ByteOrderMarkAndWhitespace) {
  EXPECT_EQ(*parse_ok("\xEF\xBB\xBF 7").to_int64(), 7);
  EXPECT_EQ(*parse_ok(" \t\r\n[ 1 , 2 ]\n").as_array()[1].to_int64(), 2);
}

TEST(Json, CopiesAreDeepAndMovesDetach) {
  Json a = parse_ok(R"({"k": [1, {"x": "y"}]})");
  Json b = a;
  b["k"].push_back(3);
  EXPECT_EQ(a.dump(), R"({"k":[1,{"x":"y"}]})");
  EXPECT_EQ(b.dump(), R"({"k":[1,{"x":"y"},3]})");
  Json c = std::move(b);
  EXPECT_TRUE(b.is_null());  // NOLINT(bugprone-use-after-move): moved-from is null by contract
  a = std::move(a["k"]);     // a value moved from inside itself
  EXPECT_EQ(a.dump(), R"([1,{"x":"y"}])");
  a = a.as_array()[1];  // copied from inside itself
  EXPECT_EQ(a.dump(), R"({"x":"y"})");
  Json arr;
  arr.push_back("s");
  arr.push_back(Json::object());
  EXPECT_EQ(arr.dump(), R"(["s",{}])");
}

TEST(Json, IndentedAsTheReferenceIndents) {
  for (const char* text : {R"({"a":[1,{"b":[]},{}],"c":"d","e":{"f":null}})", "[]", "{}", "[[]]", "3"}) {
    const Json j = parse_ok(text);
    EXPECT_EQ(j.dump(2), nlohmann::ordered_json::parse(text).dump(2)) << text;
    EXPECT_EQ(j.dump(0), nlohmann::ordered_json::parse(text).dump(0)) << text;
  }
}

TEST(Json, TypeNames) {
  EXPECT_STREQ(Json().type_name(), "null");
  EXPECT_STREQ(Json(true).type_name(), "boolean");
  EXPECT_STREQ(Json(3).type_name(), "integer");
  EXPECT_STREQ(Json(3.5).type_name(), "number");
  EXPECT_STREQ(Json("s").type_name(), "string");
  EXPECT_STREQ(Json::array().type_name(), "array");
  EXPECT_STREQ(Json::object().type_name(), "object");
}

// ---- against nlohmann::json ----

void expect_same_as_reference(const std::string& text) {
  const auto ref = nlohmann::ordered_json::parse(text, nullptr, /*allow_exceptions=*/false);
  auto ours = Json::parse(text, 1000);
  if (test::json_nesting(text) > 1000) return;
  ASSERT_EQ(ours.is_ok(), !ref.is_discarded()) << "text: " << text << "\nours: " << ours.status().message();
  if (!ours.is_ok()) return;
  EXPECT_EQ(test::json_difference(*ours, ref), "") << text;
  // What we write reads back (ours and the reference) as the same value.
  const std::string written = ours->dump();
  const auto again = nlohmann::ordered_json::parse(written, nullptr, false);
  ASSERT_FALSE(again.is_discarded()) << written;
  auto ours_again = Json::parse(written, 1000);
  ASSERT_TRUE(ours_again.is_ok()) << written;
  EXPECT_EQ(ours_again->dump(), written);
}

TEST(JsonReference, FixedTexts) {
  for (const char* text :
       {"null", "true", "[]", "{}", "0", "-0", "-0.0", "1e5", "1E-5", "2.5e+3", "123456789012345678901234567890",
        "0.30000000000000004", "5e-324", "1.7976931348623157e308", "1.7976931348623159e308", "\"\\u0000\"",
        "\"\\uD834\\uDD1E\"", "{\"a\":{\"a\":{\"a\":[[],[{}]]}}}", "[1,2,3,[4,[5]]]", "\"\xE2\x82\xAC\"", " [ ] ",
        "{\"dup\":1,\"dup\":[2]}", "[-9223372036854775808,18446744073709551615]", "1.5e-400", "[1e309]"})
    expect_same_as_reference(text);
}

// Floats are laid out as nlohmann writes them: random bit patterns and powers of ten.
TEST(JsonReference, FloatsWrittenAsTheReferenceWritesThem) {
  EXPECT_EQ(Json(1e10).dump(), "10000000000.0");
  EXPECT_EQ(Json(1e-5).dump(), "1e-05");
  EXPECT_EQ(Json(0.0001).dump(), "0.0001");
  EXPECT_EQ(Json(1e15).dump(), "1e+15");
  EXPECT_EQ(Json(123.456).dump(), "123.456");
  EXPECT_EQ(Json(-2.5).dump(), "-2.5");
  EXPECT_EQ(Json(1.7976931348623157e308).dump(), "1.7976931348623157e+308");
  std::mt19937_64 rng(7);
  for (int i = 0; i < 20000; ++i) {
    uint64_t bits = rng();
    double d;
    std::memcpy(&d, &bits, sizeof d);
    if (i % 2) d = std::ldexp(static_cast<double>(rng() >> 11), static_cast<int>(rng() % 120) - 90);
    if (i % 7 == 0) d = std::pow(10.0, static_cast<int>(rng() % 40) - 20);
    if (!std::isfinite(d)) continue;
    // Same notation as the reference, never longer (its Grisu2 digits are not always the
    // shortest, nor the closest of 17), and read back to the same bits.
    const std::string ours = Json(d).dump(), ref = nlohmann::json(d).dump();
    ASSERT_EQ(ours.find('e') == std::string::npos, ref.find('e') == std::string::npos) << ours << " " << ref;
    ASSERT_LE(ours.size(), ref.size()) << ours << " " << ref;
    const double back = Json::parse(ours)->as_double();
    ASSERT_EQ(std::memcmp(&back, &d, sizeof d), 0) << ours;
  }
}

// Random JSON texts (valid by construction), then each mutated a byte at a time:
// both readers accept and reject the same texts and read the same values.
std::string random_text(std::mt19937& rng, int depth) {
  std::uniform_int_distribution<int> pick(0, depth > 4 ? 5 : 7);
  static const char* kStrings[] = {"\"\"", "\"a b\"", "\"\\n\\u00e9\\\"\"", "\"\xC3\xA9\xF0\x9F\x98\x80\"",
                                   "\"\\ud83d\\ude00\"", "\"key\"", "\"\\/\""};
  static const char* kNumbers[] = {"0", "-1", "42", "3.25", "-0.5e-3", "1E+2", "18446744073709551615",
                                   "-9223372036854775808", "1e-320", "99999999999999999999", "0.1"};
  switch (pick(rng)) {
    case 0: return "null";
    case 1: return rng() % 2 ? "true" : "false";
    case 2: return kNumbers[rng() % std::size(kNumbers)];
    case 3:
    case 4:
    case 5: return kStrings[rng() % std::size(kStrings)];
    case 6: {
      std::string s = "[";
      const int n = static_cast<int>(rng() % 4);
      for (int i = 0; i < n; ++i) s += (i ? ", " : "") + random_text(rng, depth + 1);
      return s + "]";
    }
    default: {
      std::string s = "{";
      const int n = static_cast<int>(rng() % 4);
      for (int i = 0; i < n; ++i)
        s += (i ? "," : "") + std::string(kStrings[rng() % std::size(kStrings)]) + " : " + random_text(rng, depth + 1);
      return s + "}";
    }
  }
}

TEST(JsonReference, GeneratedAndMutatedTexts) {
  std::mt19937 rng(20261205);
  static const char kBytes[] = "[]{}\",:\\u0123456789-+.eEtrufalsn \t\n\x80\xC3\xED\xF0\x01";
  int accepted = 0, total = 0;
  for (int round = 0; round < 400; ++round) {
    const std::string text = random_text(rng, 0);
    expect_same_as_reference(text);
    for (int m = 0; m < 10; ++m) {
      std::string t = text;
      const size_t at = rng() % (t.size() + 1);
      switch (rng() % 3) {
        case 0: if (at < t.size()) t[at] = kBytes[rng() % (sizeof kBytes - 1)]; break;
        case 1: t.insert(t.begin() + static_cast<std::ptrdiff_t>(at), kBytes[rng() % (sizeof kBytes - 1)]); break;
        default: if (at < t.size()) t.erase(at, 1); break;
      }
      expect_same_as_reference(t);
      accepted += Json::parse(t).is_ok();
      ++total;
    }
    if (HasFailure()) return;
  }
  // Both outcomes were exercised, not just one.
  EXPECT_GT(accepted, total / 10);
  EXPECT_LT(accepted, total * 9 / 10);
}

}  // namespace
}  // namespace tern
