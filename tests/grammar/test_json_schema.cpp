// JSON Schema and regex constraints: random sentences of each compiled grammar
// must be instances the independent validator accepts (and parse), hand-made
// near misses must be refused, integer ranges are exact, regexes agree with
// std::regex, and unsupported or malformed schemas are errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "grammar/constraint.h"
#include "grammar/json_schema.h"
#include "grammar/matcher.h"
#include "grammar/regex.h"
#include "schema_validator.h"

namespace tern::grammar {
namespace {

using ojson = nlohmann::ordered_json;

std::shared_ptr<const Grammar> compile(ConstraintKind kind, const std::string& text) {
  auto g = compile_constraint({kind, text});
  EXPECT_TRUE(g.is_ok()) << g.status().message() << "\n" << text;
  return g.is_ok() ? *g : nullptr;
}

bool matches(const std::shared_ptr<const Grammar>& g, const std::string& s) {
  Matcher m(g);
  return m.accept(s) && m.can_end();
}

const TokenTrie& byte_trie() {
  static const TokenTrie trie([] {
    std::vector<std::string> v;
    for (int b = 0; b < 256; ++b) v.emplace_back(1, static_cast<char>(b));
    return v;
  }());
  return trie;
}

// A random sentence of the grammar, byte by byte (structural ASCII favoured
// so sentences end); empty when it did not end within max_bytes.
std::string random_sentence(const std::shared_ptr<const Grammar>& g, std::mt19937& rng, size_t max_bytes = 3000) {
  Matcher m(g);
  std::string out;
  std::vector<uint8_t> allowed;
  while (out.size() < max_bytes) {
    m.mask(byte_trie(), allowed);
    std::vector<int> choices;
    std::vector<double> weights;
    for (int b = 0; b < 256; ++b)
      if (allowed[static_cast<size_t>(b)]) {
        choices.push_back(b);
        weights.push_back(b < 128 && !std::isalpha(b) ? 40.0 : b < 128 ? 4.0 : 0.2);
      }
    if (m.can_end() && (choices.empty() || rng() % 4 == 0)) return out;
    if (choices.empty()) return {};
    std::discrete_distribution<size_t> pick(weights.begin(), weights.end());
    const char c = static_cast<char>(choices[pick(rng)]);
    EXPECT_TRUE(m.accept(std::string(1, c)));
    out += c;
  }
  return {};
}

struct Case {
  const char* name;
  const char* schema;
  std::vector<const char*> valid, invalid;
};

const std::vector<Case>& cases() {
  static const std::vector<Case> c = {
      {"person",
       R"({"type":"object","properties":{"name":{"type":"string","minLength":1,"maxLength":12},
           "age":{"type":"integer","minimum":0,"maximum":150},"email":{"type":"string","format":"email"},
           "tags":{"type":"array","items":{"type":"string","enum":["a","b","c"]},"maxItems":3}},
           "required":["name","age"]})",
       {R"({"name":"Ann","age":30})", R"({"name": "Bo", "age": 150, "tags": ["a", "c"]})",
        R"({"name":"é","age":0,"email":"x.y@mail.example.org"})"},
       {R"({"age":30,"name":"Ann"})", R"({"name":"","age":3})", R"({"name":"Ann","age":151})", R"({"name":"Ann"})",
        R"({"name":"Ann","age":-1})", R"({"name":"Ann","age":3,"extra":1})", R"({"name":"Ann","age":3,"tags":["d"]})",
        R"({"name":"Ann","age":3,"tags":["a","a","a","a"]})", R"({"name":"Ann","age":07})"}},
      {"optional-only",
       R"({"type":"object","properties":{"a":{"type":"boolean"},"b":{"type":"null"},"c":{"type":"number"}}})",
       {"{}", R"({"b":null})", R"({"a":true,"c":-1.5e3})", R"({"c":0})"},
       {R"({"b":null,"a":true})", R"({"a":1})", R"({,"a":true})", R"({"a":true,})"}},
      {"tree",
       R"({"$defs":{"node":{"type":"object","properties":{"v":{"type":"integer"},
           "kids":{"type":"array","items":{"$ref":"#/$defs/node"}}},"required":["v"]}},"$ref":"#/$defs/node"})",
       {R"({"v":1})", R"({"v":1,"kids":[{"v":2},{"v":3,"kids":[]}]})"},
       {R"({"kids":[]})", R"({"v":1,"kids":[{"kids":[]}]})"}},
      {"union-and-tuple",
       R"({"type":"array","prefixItems":[{"type":"string","pattern":"^[A-Z]{2}-\\d{3}$"},{"anyOf":[{"type":"integer"},{"type":"null"}]}],
           "items":false})",
       {R"(["AB-123",null])", R"(["ZZ-000", -42])"},
       {R"(["ab-123",1])", R"(["AB-123"])", R"(["AB-123",1,2])", R"(["AB-1234",1])"}},
      {"formats-and-enums",
       R"({"type":"object","properties":{"when":{"type":"string","format":"date-time"},"day":{"type":"string","format":"date"},
           "id":{"type":"string","format":"uuid"},"kind":{"enum":["x",1,null,{"k":[true]}]},"fixed":{"const":"yes"}},
           "required":["when","day","id","kind","fixed"],"additionalProperties":false})",
       {R"({"when":"2026-12-04T10:00:00Z","day":"2026-02-28","id":"123e4567-e89b-12d3-a456-426614174000","kind":{"k":[true]},"fixed":"yes"})"},
       {R"({"when":"2026-12-04 10:00:00","day":"2026-02-28","id":"123e4567-e89b-12d3-a456-426614174000","kind":1,"fixed":"yes"})",
        R"({"when":"2026-12-04T10:00:00Z","day":"2026-13-01","id":"123e4567-e89b-12d3-a456-426614174000","kind":1,"fixed":"yes"})",
        R"({"when":"2026-12-04T10:00:00Z","day":"2026-02-28","id":"123e4567-e89b-12d3-a456-426614174000","kind":2,"fixed":"yes"})"}},
      {"extras",
       R"({"type":"object","properties":{"id":{"type":"integer"}},"required":["id"],"additionalProperties":{"type":"string"}})",
       {R"({"id":1})", R"({"id":1,"x":"y","z":""})"},
       {R"({"id":1,"x":2})", R"({"x":"y","id":1})"}},
      {"any-object", R"({"type":"object"})", {"{}", R"({"a":[1,{"b":null}]})"}, {"[]", "1"}},
      {"all-of",
       R"({"allOf":[{"type":"object","properties":{"a":{"type":"string"}},"required":["a"]},
                    {"type":"object","properties":{"b":{"type":"integer","exclusiveMinimum":-3,"exclusiveMaximum":3}},"required":["b"]}]})",
       {R"({"a":"","b":-2})", R"({"a":"q","b":2})"}, {R"({"a":"","b":3})", R"({"a":"","b":-3})", R"({"b":0})"}},
  };
  return c;
}

TEST(JsonSchema, RandomSentencesAreValidInstances) {
  std::mt19937 rng(42);
  for (const Case& c : cases()) {
    SCOPED_TRACE(c.name);
    const auto g = compile(ConstraintKind::JsonSchema, c.schema);
    ASSERT_TRUE(g);
    const testing::SchemaValidator validator(ojson::parse(c.schema));
    std::set<std::string> distinct;
    int n = 0;
    for (int i = 0; i < 150; ++i) {
      const std::string s = random_sentence(g, rng);
      if (s.empty()) continue;
      ++n;
      distinct.insert(s);
      const ojson v = ojson::parse(s, nullptr, false);
      ASSERT_FALSE(v.is_discarded()) << s;
      ASSERT_TRUE(validator.valid(v)) << s;
    }
    EXPECT_GE(n, 50) << "too few sentences ended";
    EXPECT_GE(distinct.size(), static_cast<size_t>(n) / 3);
  }
}

TEST(JsonSchema, ValidAndInvalidInstances) {
  for (const Case& c : cases()) {
    SCOPED_TRACE(c.name);
    const auto g = compile(ConstraintKind::JsonSchema, c.schema);
    ASSERT_TRUE(g);
    const testing::SchemaValidator validator(ojson::parse(c.schema));
    for (const char* v : c.valid) {
      EXPECT_TRUE(matches(g, v)) << v;
      EXPECT_TRUE(validator.valid(ojson::parse(v))) << "the oracle disagrees on " << v;
    }
    for (const char* v : c.invalid) EXPECT_FALSE(matches(g, v)) << v;
  }
}

TEST(JsonSchema, IntegerRangesAreExact) {
  const std::pair<const char*, std::pair<int, int>> ranges[] = {
      {R"({"type":"integer","minimum":0,"maximum":7})", {0, 7}},
      {R"({"type":"integer","minimum":5,"maximum":123})", {5, 123}},
      {R"({"type":"integer","minimum":-1000,"maximum":-17})", {-1000, -17}},
      {R"({"type":"integer","minimum":-45,"maximum":1099})", {-45, 1099}},
      {R"({"type":"integer","exclusiveMinimum":9.5,"maximum":100.9})", {10, 100}},
      {R"({"type":"integer","minimum":990})", {990, 1000000}},
      {R"({"type":"integer","maximum":-5})", {-1000000, -5}},
  };
  for (const auto& [schema, range] : ranges) {
    SCOPED_TRACE(schema);
    const auto g = compile(ConstraintKind::JsonSchema, schema);
    ASSERT_TRUE(g);
    for (int x = -1200; x <= 1200; ++x) ASSERT_EQ(matches(g, std::to_string(x)), x >= range.first && x <= range.second) << x;
    EXPECT_FALSE(matches(g, "007"));
    EXPECT_FALSE(matches(g, "-0"));
  }
}

TEST(JsonSchema, ErrorsNameTheKeyword) {
  auto err = [](const char* schema) {
    auto g = compile_constraint({ConstraintKind::JsonSchema, schema});
    EXPECT_FALSE(g.is_ok()) << schema;
    return g.is_ok() ? std::string() : g.status().message();
  };
  EXPECT_NE(err(R"({"type":"array","uniqueItems":true})").find("'uniqueItems' is not supported"), std::string::npos);
  EXPECT_NE(err(R"({"not":{"type":"string"}})").find("'not'"), std::string::npos);
  EXPECT_NE(err(R"({"type":"number","minimum":0})").find("'minimum' on type number"), std::string::npos);
  EXPECT_NE(err(R"({"$ref":"http://example.com/s.json"})").find("$ref"), std::string::npos);
  EXPECT_NE(err(R"({"type":"widget"})").find("unknown type 'widget'"), std::string::npos);
  EXPECT_NE(err(R"({"type":"object",)").find("not valid JSON"), std::string::npos);
  EXPECT_NE(err("false").find("matches nothing"), std::string::npos);
  EXPECT_NE(err(R"({"type":"string","pattern":"(a)\\1"})").find("backreferences"), std::string::npos);
  EXPECT_NE(err(R"({"type":"integer","minimum":5,"maximum":4})").find("no integer"), std::string::npos);
  EXPECT_NE(err(R"({"type":"object","properties":{},"required":["x"]})").find("'x'"), std::string::npos);
}

TEST(Regex, AgreesWithStdRegex) {
  const char* patterns[] = {R"([a-z]+@[a-z]+\.com)", R"(\d{3}-\d{4})", "(ab|cd)*e?", "a.c", "[^0-9]+", "x{2,3}y",
                            "(?:foo|bar)+baz", R"(\w+\s\w+)", R"([-+]?[0-9]*\.?[0-9]+)", "^(a|b)*abb$", "[\\]a]+|\\]",
                            "colou?r|gr[ae]y", R"([\d\s]{2,})"};
  std::mt19937 rng(7);
  const std::string alphabet = "abcdexy019-+.@ \t\n]rgoulfzm";
  for (const char* p : patterns) {
    SCOPED_TRACE(p);
    const auto g = compile(ConstraintKind::Regex, p);
    ASSERT_TRUE(g);
    const std::regex re(p);
    int n_match = 0;
    for (int i = 0; i < 3000; ++i) {
      std::string s;
      const size_t len = rng() % 9;
      for (size_t k = 0; k < len; ++k) s += alphabet[rng() % alphabet.size()];
      const bool expect = std::regex_match(s, re);
      n_match += expect;
      ASSERT_EQ(matches(g, s), expect) << "'" << s << "'";
    }
    // And the grammar's own random sentences all match (ASCII ones: std::regex
    // reads bytes, where '.' and [^...] take one byte, not one character).
    for (int i = 0; i < 100; ++i) {
      const std::string s = random_sentence(g, rng, 200);
      const bool ascii = std::all_of(s.begin(), s.end(), [](char c) { return static_cast<unsigned char>(c) < 0x80; });
      if ((!s.empty() || matches(g, "")) && ascii) {
        ASSERT_TRUE(std::regex_match(s, re)) << "'" << s << "'";
      }
    }
    (void)n_match;
  }
}

TEST(Regex, UnsupportedConstructsAreErrors) {
  for (const char* p : {"(?=a)b", "(a)\\1", "a\\bc", "a^b", "(a$)", "a**", "[z-a]", "(ab", "ab)", "\\"}) {
    auto r = regex_to_gbnf(p);
    EXPECT_FALSE(r.is_ok()) << p;
  }
}

}  // namespace
}  // namespace tern::grammar
