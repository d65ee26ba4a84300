// The matcher's token masks against brute force (each token's acceptance
// recomputed byte by byte on a fresh copy), accept/rollback, and the bound on
// ambiguous grammars.
#include <gtest/gtest.h>

#include <algorithm>
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

// Every token's mask bit equals whether a copy of the matcher accepts it;
// the allowed ids go to *ok when given.
void expect_mask_exact(Matcher& m, const TokenTrie& trie, const std::vector<std::string>& vocab,
                       std::vector<size_t>* ok = nullptr) {
  std::vector<uint8_t> allowed;
  m.mask(trie, allowed);
  ASSERT_EQ(allowed.size(), vocab.size());
  if (ok) ok->clear();
  for (size_t t = 0; t < vocab.size(); ++t) {
    Matcher copy = m;
    const bool brute = !vocab[t].empty() && copy.accept(vocab[t]);
    ASSERT_EQ(allowed[t] != 0, brute) << "token " << t << " after " << m.n_accepted() << " tokens";
    if (ok && allowed[t]) ok->push_back(t);
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
      std::vector<size_t> ok;
      ASSERT_NO_FATAL_FAILURE(expect_mask_exact(m, trie, vocab, &ok));
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
                                           R"(root ::= [^"a] [α-ω] . [é😀]?)",
                                           // Counted repetitions, whose masks are cached per clamped count.
                                           R"(root ::= "{" [a-c ]{12,30} "}" ("ab" | "c"){2,3} [0-9]{0,14})",
                                           R"(root ::= ("[" ([a-z]{3,}){2,4} "]"){1,3} "\n"?)"));

// A long bounded string: masks in its middle come from one cached (clamped)
// count, and must still be exact at every count, nearest the bounds above all.
TEST(Matcher, LongCountedRepetitionMasksStayExact) {
  const auto g = compile(R"(root ::= "\"" [a-z ]{60,90} "\"" [0-9]{3})");
  // Long letter runs, some closing the string: tokens that reach a bound from
  // as far off as a token can (the clamp's edge case).
  auto vocab = vocabulary();
  for (const char* p : {"abcdefghij", "abcdefghi\"", "abcdefg\"1", "klmno", "ab cd ef", "xyz\"12", "\"123"})
    vocab.emplace_back(p);
  const TokenTrie trie(vocab);
  std::mt19937 rng(7);
  for (int walk = 0; walk < 4; ++walk) {
    Matcher m(g);
    for (int step = 0; step < 200 && !m.finished(); ++step) {
      std::vector<size_t> ok;
      ASSERT_NO_FATAL_FAILURE(expect_mask_exact(m, trie, vocab, &ok));
      ASSERT_FALSE(ok.empty());
      // Walk 0 goes one letter at a time, so every count is checked; the
      // others prefer the longest tokens half the time, so counts also move
      // in steps of several.
      size_t pick = ok[rng() % ok.size()];
      if (walk == 0 && std::find(ok.begin(), ok.end(), size_t{'a'}) != ok.end()) pick = 'a';
      else if (rng() % 2)
        for (size_t t : ok)
          if (vocab[t].size() > vocab[pick].size()) pick = t;
      ASSERT_TRUE(m.accept(vocab[pick]));
    }
    EXPECT_TRUE(m.finished());
  }
}

// Matchers sharing a MaskCache: the second walk down the same path finds
// every mask in the cache (no entry added), and the masks stay exact.
TEST(Matcher, SharedMaskCacheServesOtherMatchers) {
  const auto g = compile(R"(root ::= "{\"s\": \"" [a-z ]{40,} "\"}")");
  const auto vocab = vocabulary();
  const TokenTrie trie(vocab);
  auto cache = std::make_shared<MaskCache>();
  const std::vector<std::string> path = {"{\"", "s", "\": ", "\"", "ab", "abc", " ", "x"};
  size_t after_first = 0;
  for (int round = 0; round < 2; ++round) {
    Matcher m(g);
    m.share_masks(cache);
    for (const std::string& t : path) {
      expect_mask_exact(m, trie, vocab);
      ASSERT_TRUE(m.accept(t)) << t;
    }
    expect_mask_exact(m, trie, vocab);
    if (round == 0) {
      after_first = cache->size();
      EXPECT_EQ(cache->hits(), 0u);
    }
  }
  EXPECT_GT(after_first, 0u);
  EXPECT_EQ(cache->size(), after_first);
  EXPECT_EQ(cache->hits(), after_first);  // each of the first walk's masks, found once
}

TEST(MaskCache, StaysWithinItsBytes) {
  MaskCache cache(10 * (8 * 4 + 4));  // room for 10 four-word masks under 4-byte keys
  for (int i = 0; i < 50; ++i) {
    const std::string key = std::to_string(1000 + i);
    cache.insert(key, std::make_shared<const std::vector<uint64_t>>(4, static_cast<uint64_t>(i)));
    ASSERT_NE(cache.find(key), nullptr);
  }
  EXPECT_EQ(cache.size(), 10u);
  EXPECT_EQ(cache.find("1000"), nullptr);  // the oldest went first
  ASSERT_NE(cache.find("1049"), nullptr);
  EXPECT_EQ((*cache.find("1049"))[0], 49u);
}

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
