// GBNF parsing and whole-string matching: each grammar accepts what it
// describes and refuses near misses; errors name the problem and the place.
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "grammar/gbnf.h"
#include "grammar/matcher.h"
#include "grammars.h"

namespace tern::grammar {
namespace {

using testing::compile;

// The whole string is a sentence of the grammar.
bool matches(const std::shared_ptr<const Grammar>& g, const std::string& s) {
  Matcher m(g);
  return m.accept(s) && m.can_end();
}

// Fed one byte at a time, as tokens that split characters would feed it.
bool matches_bytewise(const std::shared_ptr<const Grammar>& g, const std::string& s) {
  Matcher m(g);
  for (char c : s)
    if (!m.accept(std::string(1, c))) return false;
  return m.can_end();
}

std::string parse_error(const char* text) {
  auto g = parse_gbnf(text);
  EXPECT_FALSE(g.is_ok()) << text;
  return g.is_ok() ? "" : g.status().message();
}

TEST(Gbnf, JsonAcceptsDocumentsAndRefusesNearMisses) {
  const auto g = compile(testing::kJson);
  for (const char* ok : {R"({"a": [1, 2.5e-3, -0, true, null], "b": {"c": "x\"y\u00e9"}})", "[]", "{}", " 42 ",
                         R"("é😀 unicode")", R"([[[[[]]]]])", "-1.0E+10", R"({"k":"v"})"})
    EXPECT_TRUE(matches(g, ok)) << ok;
  for (const char* bad : {R"({"a" 1})", "[1,]", "01", "{'a': 1}", R"("unterminated)", "tru", "[1 2]",
                          "\"tab\tinside\"", "1.", "+1", R"({"a":1}})"})
    EXPECT_FALSE(matches(g, bad)) << bad;
}

TEST(Gbnf, ByteAtATimeEqualsWholeString) {
  const auto g = compile(testing::kJson);
  for (const char* s : {R"({"é": ["😀", 1e5]})", "[1,]", R"("\u12G4")", R"(["a\nb"])"})
    EXPECT_EQ(matches(g, s), matches_bytewise(g, s)) << s;
}

TEST(Gbnf, ArithmeticListAndCLike) {
  const auto arith = compile(testing::kArithmetic);
  EXPECT_TRUE(matches(arith, "1+2*(3-4)\n-5/6\n"));
  EXPECT_TRUE(matches(arith, "((7))\n"));
  EXPECT_FALSE(matches(arith, "1+\n"));
  EXPECT_FALSE(matches(arith, "1234567\n"));  // {1,6} digits
  EXPECT_FALSE(matches(arith, "(1\n"));

  const auto list = compile(testing::kList);
  EXPECT_TRUE(matches(list, "- milk\n"));
  EXPECT_TRUE(matches(list, "- a\n- b c\n- d\n"));
  EXPECT_FALSE(matches(list, ""));
  EXPECT_FALSE(matches(list, "- a\n- b\n- c\n- d\n"));  // at most 3
  EXPECT_FALSE(matches(list, "- A\n"));

  const auto c = compile(testing::kCLike);
  EXPECT_TRUE(matches(c, "int x = 3;\nwhile (x > 0) {\nx = x - 1;\nif (x == 1) {\nchar y;\n}\n}\n"));
  EXPECT_FALSE(matches(c, "int x = ;\n"));
  EXPECT_FALSE(matches(c, "while (x) {\n}\n"));  // a condition needs a comparison
}

TEST(Gbnf, CharacterClassesMatchWholeUtf8Characters) {
  const auto g = compile(R"(root ::= [^"a] [α-ω] . [\u00e9\U0001F600]?)");
  EXPECT_TRUE(matches(g, "éβ😀"));
  EXPECT_TRUE(matches(g, "😀ωx\u00e9"));
  EXPECT_TRUE(matches(g, "\xF0\x9F\x98\x80\xCE\xB1\xE4\xB8\xAD\xF0\x9F\x98\x80"));
  EXPECT_FALSE(matches(g, "\"βx"));           // excluded by ^
  EXPECT_FALSE(matches(g, "aβx"));
  EXPECT_FALSE(matches(g, "bax"));            // a is not in α-ω
  EXPECT_FALSE(matches(g, "b\xCE"));          // a character cut short
  EXPECT_FALSE(matches(g, "bβ\xFF"));         // '.' never matches a byte that is not UTF-8
  EXPECT_FALSE(matches(g, "bβ\xED\xA0\x80")); // nor an encoded surrogate
  EXPECT_FALSE(matches(g, "bβ\xC0\x80"));     // nor an overlong encoding
}

TEST(Gbnf, RepetitionCounts) {
  const auto g = compile(R"(root ::= "a"{2} "b"{1,} "c"{,2} "d"{1,3} ("xy")*)");
  EXPECT_TRUE(matches(g, "aabd"));
  EXPECT_TRUE(matches(g, "aabbbccdddxyxy"));
  EXPECT_FALSE(matches(g, "abd"));
  EXPECT_FALSE(matches(g, "aad"));
  EXPECT_FALSE(matches(g, "aabcccd"));
  EXPECT_FALSE(matches(g, "aabdddd"));
  EXPECT_FALSE(matches(g, "aabdx"));

  // Counted repetition of alternatives of different lengths, nested counts,
  // a body that can match nothing, and counts in the hundreds.
  const auto alts = compile(R"(root ::= ("ab" | "c"){3,5} ".")");
  EXPECT_TRUE(matches(alts, "abcc."));
  EXPECT_TRUE(matches(alts, "ababcabc."));
  EXPECT_FALSE(matches(alts, "abc."));     // two copies
  EXPECT_FALSE(matches(alts, "cccccc."));  // six
  EXPECT_FALSE(matches(alts, "abca."));
  const auto nested = compile(R"(root ::= ("[" [0-9]{2,3} "]"){2})");
  EXPECT_TRUE(matches(nested, "[12][345]"));
  EXPECT_FALSE(matches(nested, "[12]"));
  EXPECT_FALSE(matches(nested, "[1][23]"));
  EXPECT_FALSE(matches(nested, "[12][3456]"));
  const auto empty_body = compile(R"(root ::= ("x"?){2,4} ".")");
  EXPECT_TRUE(matches(empty_body, "."));
  EXPECT_TRUE(matches(empty_body, "xxxx."));
  EXPECT_FALSE(matches(empty_body, "xxxxx."));
  const auto long_run = compile(R"(root ::= [a-z]{500,600} "!")");
  EXPECT_FALSE(matches(long_run, std::string(499, 'q') + "!"));
  EXPECT_TRUE(matches(long_run, std::string(500, 'q') + "!"));
  EXPECT_TRUE(matches(long_run, std::string(600, 'q') + "!"));
  EXPECT_FALSE(matches(long_run, std::string(601, 'q') + "!"));
  const auto at_least = compile(R"(root ::= "a"{300,} "b")");
  EXPECT_FALSE(matches(at_least, std::string(299, 'a') + "b"));
  EXPECT_TRUE(matches(at_least, std::string(300, 'a') + "b"));
  EXPECT_TRUE(matches(at_least, std::string(5000, 'a') + "b"));
}

TEST(Gbnf, CommentsNewlinesAndNesting) {
  const auto g = compile(
      "# a comment line\n"
      "root ::= (\n"
      "    \"a\" |   # first choice\n"
      "    \"b\"\n"
      "  ) tail\n"
      "tail ::=\n"
      "  \"!\" | \"\"\n");
  EXPECT_TRUE(matches(g, "a!"));
  EXPECT_TRUE(matches(g, "b"));
  EXPECT_FALSE(matches(g, "c"));
}

TEST(Gbnf, EmptyRootMatchesOnlyTheEmptyString) {
  const auto g = compile(R"(root ::= "")");
  Matcher m(g);
  EXPECT_TRUE(m.can_end());
  EXPECT_TRUE(m.finished());
  EXPECT_FALSE(m.accept("x"));
}

TEST(Gbnf, ErrorsNameTheProblem) {
  EXPECT_NE(parse_error("root ::= foo").find("'foo' is used but not defined"), std::string::npos);
  EXPECT_NE(parse_error("start ::= \"a\"").find("no rule named 'root'"), std::string::npos);
  EXPECT_NE(parse_error("root ::= \"abc").find("unterminated string"), std::string::npos);
  EXPECT_NE(parse_error("root ::= [abc").find("unterminated character class"), std::string::npos);
  EXPECT_NE(parse_error("root ::= \"\\q\"").find("unknown escape"), std::string::npos);
  EXPECT_NE(parse_error("root ::= \"a\"\nroot ::= \"b\"").find("defined twice"), std::string::npos);
  EXPECT_NE(parse_error("root ::= * \"a\"").find("nothing to repeat"), std::string::npos);
  EXPECT_NE(parse_error("root = \"a\"").find("expected '::='"), std::string::npos);
  EXPECT_NE(parse_error("root ::= (\"a\"").find("expected ')'"), std::string::npos);
  EXPECT_NE(parse_error("root ::= [z-a]").find("backwards"), std::string::npos);
  EXPECT_NE(parse_error("root ::= \"a\"{3,1}").find("max below min"), std::string::npos);
  EXPECT_NE(parse_error("root ::= <[42]>").find("token references"), std::string::npos);
  EXPECT_NE(parse_error("root ::= \"\\uD800\"").find("surrogate"), std::string::npos);
  EXPECT_NE(parse_error("root ::= [^\\x00-\\U0010FFFF]").find("matches no character"), std::string::npos);
  // Left recursion, direct and through a nullable prefix, is refused (it
  // would make expansion loop) with a hint.
  EXPECT_NE(parse_error("root ::= root \"a\" | \"b\"").find("'root' is left-recursive"), std::string::npos);
  EXPECT_NE(parse_error("root ::= e x\ne ::= \"\" | \"z\"\nx ::= e root | \"y\"").find("left-recursive"),
            std::string::npos);
  // Errors carry the line and column.
  EXPECT_NE(parse_error("root ::= \"a\"\nfoo ::= \"b\" )").find("line 2"), std::string::npos);
  // Limits stop a hostile repetition count: counts above a million, and a
  // body that can match nothing (unrolled, so bounded by the grammar's size).
  EXPECT_NE(parse_error("root ::= \"abcdefghij\"{2000000}").find("too large"), std::string::npos);
  EXPECT_NE(parse_error("root ::= (\"a\"?){400000}").find("too large"), std::string::npos);
  // Left recursion through a repetition's body is found too.
  EXPECT_NE(parse_error("root ::= x{0,3} root \"a\" | \"b\"\nx ::= \"z\"").find("left-recursive"),
            std::string::npos);
  EXPECT_NE(parse_error("root ::= (root \"a\"){2,3} | \"b\"").find("left-recursive"), std::string::npos);
}

}  // namespace
}  // namespace tern::grammar
