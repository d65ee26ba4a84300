// The matcher's token masks against brute force (each token's acceptance
// recomputed byte by byte on a fresh copy), accept/rollback, and the bound on
// ambiguous grammars.
#include <gtest/gtest.h>

#include <memory>
#include <random>
#include <string>
#include <vector>

#include "grammar/gbnf.h"
#include "grammar/matcher.h"
#include "grammars.h"

namespace tern::grammar {
namespace {

using testing::compile;

// A small vocabulary like a real one: single bytes (all 256, so any text can
// be spelled), JSON-ish multi-character pieces, pieces that end inside a UTF-8
// character or start with a continuation byte, and empty (special) tokens.
std::vector<std::string> vocabulary() {
  std::vector<std::string> v;
  for (int b = 0; b < 256; ++b) v.emplace_back(1, static_cast<char>(b));
  for (const char* p : {"{\"", "\":", "\": ", ", \"", "\"}", "[1", "0.", "e-", "true", "tru", "null", "nul",
                        "false", "  ", "\n", "\\u", "\\n", "00", "12", "\"a\"", "]}", "}]", "é", "\xC3", "\xA9\"",
                        "😀", "\xF0\x9F", "\x98\x80", " {", "{}", "[]", "x = ", "int ", "while (", ") {\n",
                        ";\n", "- ", "ab", "abc", "+(", "*-", "1\n"})
    v.emplace_back(p);
  v.emplace_back();  // a special token: no bytes
  v.emplace_back();
  return v;
}

// Every token's mask bit equals whether a copy of the matcher accepts it.
void expect_mask_exact(Matcher& m, const TokenTrie& trie, const std::vector<std::string>& vocab) {
  std::vector<uint8_t> allowed;
  m.mask(trie, allowed);
  ASSERT_EQ(allowed.size(), vocab.size());
  for (size_t t = 0; t < vocab.size(); ++t) {
    Matcher copy = m;
    const bool brute = !vocab[t].empty() && copy.accept(vocab[t]);
    ASSERT_EQ(allowed[t] != 0, brute) << "token " << t << " after " << m.n_accepted() << " tokens";
  }
}

class MaskAgainstBruteForce : public ::testing::TestWithParam<const char*> {};

TEST_P(MaskAgainstBruteForce, AlongRandomWalks) {
  const auto g = compile(GetParam());
  const auto vocab = vocabulary();
  const TokenTrie trie(vocab);
  std::mt19937 rng(1234);
  for (int walk = 0; walk < 12; ++walk) {
    Matcher m(g);
    for (int step = 0; step < 40; ++step) {
      expect_mask_exact(m, trie, vocab);
      std::vector<uint8_t> allowed;
      m.mask(trie, allowed);
      std::vector<size_t> ok;
      for (size_t t = 0; t < allowed.size(); ++t)
        if (allowed[t]) ok.push_back(t);
      if (ok.empty()) {
        EXPECT_TRUE(m.can_end()) << "a dead end that cannot end: the grammar would trap generation";
        break;
      }
      ASSERT_TRUE(m.accept(vocab[ok[rng() % ok.size()]]));
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Grammars, MaskAgainstBruteForce,
                         ::testing::Values(testing::kJson, testing::kArithmetic, testing::kList, testing::kCLike,
                                           R"(root ::= [^"a] [α-ω] . [é😀]?)"));

TEST(Matcher, RejectedTokenLeavesStateUnchanged) {
  const auto g = compile(testing::kJson);
  Matcher m(g);
  ASSERT_TRUE(m.accept("{\"a"));
  EXPECT_FALSE(m.accept("\":}"));  // the first two bytes fit, the third does not
  EXPECT_EQ(m.n_accepted(), 1u);
  EXPECT_TRUE(m.accept("\": 1}"));
  EXPECT_TRUE(m.can_end());
}

TEST(Matcher, RollbackRestoresEarlierMasks) {
  const auto g = compile(testing::kJson);
  const auto vocab = vocabulary();
  const TokenTrie trie(vocab);
  Matcher m(g);
  ASSERT_TRUE(m.accept("["));
  std::vector<uint8_t> before, after;
  m.mask(trie, before);
  const bool could_end = m.can_end();
  for (const char* t : {"1", ", ", "\"x", "\"", "]"}) ASSERT_TRUE(m.accept(t)) << t;
  EXPECT_TRUE(m.can_end());
  m.rollback(5);
  EXPECT_EQ(m.n_accepted(), 1u);
  m.mask(trie, after);
  EXPECT_EQ(before, after);
  EXPECT_EQ(could_end, m.can_end());
  // Rolling back more than was accepted stops at the start.
  m.rollback(10);
  EXPECT_EQ(m.n_accepted(), 0u);
  EXPECT_TRUE(m.accept("{}"));
}

TEST(Matcher, CanEndAndFinished) {
  const auto g = compile(R"(root ::= "a" "b"?)");
  Matcher m(g);
  EXPECT_FALSE(m.can_end());
  ASSERT_TRUE(m.accept("a"));
  EXPECT_TRUE(m.can_end());
  EXPECT_FALSE(m.finished());  // "b" may still come
  ASSERT_TRUE(m.accept("b"));
  EXPECT_TRUE(m.finished());
  EXPECT_TRUE(m.allows(""));
  EXPECT_FALSE(m.allows("b"));
}

TEST(Matcher, DeepNestingDoesNotExhaustTheStack) {
  const auto g = compile(testing::kJson);
  Matcher m(g);
  const int depth = 20000;
  for (int i = 0; i < depth; ++i) ASSERT_TRUE(m.accept("["));
  for (int i = 0; i < depth; ++i) ASSERT_TRUE(m.accept("]"));
  EXPECT_TRUE(m.can_end());
}

TEST(Matcher, AmbiguityIsBoundedNotUnbounded) {
  // After n a's, each of the 2^n ways to close them (b or c per level) is a
  // distinct live stack: the bound must refuse the step, not allocate 2^n.
  const auto g = compile(R"(root ::= s
s ::= "a" s "b" | "a" s "c" | "")");
  Matcher m(g);
  int accepted = 0;
  while (accepted < 40 && m.accept("a")) ++accepted;
  EXPECT_TRUE(m.overflowed());
  EXPECT_GE(accepted, 10);  // small sets were fine
  EXPECT_LT(accepted, 20);  // and 2^20 stacks were never built
  EXPECT_TRUE(m.accept("b"));  // the state before the refused step is intact
}

}  // namespace
}  // namespace tern::grammar
