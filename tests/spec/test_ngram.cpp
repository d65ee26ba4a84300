// Prompt lookup (spec::propose_ngram): the continuation of the most recent
// earlier occurrence of the longest recurring suffix, capped at k tokens.
#include <gtest/gtest.h>

#include <vector>

#include "spec/ngram.h"

namespace tern::spec {
namespace {

TEST(Ngram, CopiesWhatFollowedTheLongestRecurringSuffix) {
  // ... 5 6 7 | 8 9 ... and later 6 7 again: propose 8 9 10.
  const std::vector<TokenId> t = {1, 5, 6, 7, 8, 9, 10, 11, 2, 6, 7};
  EXPECT_EQ(propose_ngram(t, 3), (std::vector<TokenId>{8, 9, 10}));
  EXPECT_EQ(propose_ngram(t, 1), (std::vector<TokenId>{8}));
  EXPECT_TRUE(propose_ngram(t, 0).empty());
}

TEST(Ngram, PrefersTheLongerMatchAndTheMostRecentOccurrence) {
  // "7" recurs twice (followed by 3, then by 4); "6 7" only where 4 follows.
  const std::vector<TokenId> t = {6, 7, 4, 4, 0, 7, 3, 3, 6, 7};
  EXPECT_EQ(propose_ngram(t, 2), (std::vector<TokenId>{4, 4}));
  const std::vector<TokenId> u = {7, 4, 0, 7, 3, 9, 7};  // only 1-grams recur: the latest one
  EXPECT_EQ(propose_ngram(u, 2), (std::vector<TokenId>{3, 9}));
  NgramConfig two{3, 2};
  EXPECT_TRUE(propose_ngram(u, 2, two).empty());  // n_min 2: a single token is not enough
}

TEST(Ngram, StopsAtTheEndAndProposesNothingWithoutARepeat) {
  const std::vector<TokenId> t = {3, 4, 3};  // 3 recurs; only 4 3 follows it
  EXPECT_EQ(propose_ngram(t, 5), (std::vector<TokenId>{4, 3}));
  EXPECT_TRUE(propose_ngram(std::vector<TokenId>{1, 2, 3, 4}, 4).empty());
  EXPECT_TRUE(propose_ngram(std::vector<TokenId>{}, 4).empty());
  EXPECT_TRUE(propose_ngram(std::vector<TokenId>{9}, 4).empty());
}

}  // namespace
}  // namespace tern::spec
