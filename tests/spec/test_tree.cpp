// Token trees of proposals (spec::TokenTree) and prompt lookup's several
// continuations (spec::propose_ngram_paths): paths merge where they share a
// prefix, parents come first, the first path is a chain at the front, the
// node cap holds; lookup finds different continuations, most recent and
// longest suffix first, and never the same one twice.
#include <gtest/gtest.h>

#include <vector>

#include "spec/ngram.h"
#include "spec/tree.h"

namespace tern::spec {
namespace {

TEST(TokenTree, PathsMergeWhereTheyShareAPrefix) {
  TokenTree t;
  EXPECT_EQ(t.add_path(std::vector<TokenId>{5, 6, 7}, 16), 3u);
  EXPECT_EQ(t.add_path(std::vector<TokenId>{5, 6, 9}, 16), 1u);
  EXPECT_EQ(t.add_path(std::vector<TokenId>{8}, 16), 1u);
  EXPECT_EQ(t.add_path(std::vector<TokenId>{5, 6}, 16), 0u);
  EXPECT_EQ(t.tokens, (std::vector<TokenId>{5, 6, 7, 9, 8}));
  EXPECT_EQ(t.parents, (std::vector<int32_t>{-1, 0, 1, 1, -1}));
  EXPECT_EQ(t.children(-1), (std::vector<int32_t>{0, 4}));
  EXPECT_EQ(t.children(1), (std::vector<int32_t>{2, 3}));
  EXPECT_EQ(t.depth(), 3);
  for (size_t i = 0; i < t.size(); ++i) EXPECT_LT(t.parents[i], static_cast<int32_t>(i));
}

TEST(TokenTree, TheNodeCapHolds) {
  TokenTree t;
  t.add_path(std::vector<TokenId>{1, 2, 3}, 4);
  EXPECT_EQ(t.add_path(std::vector<TokenId>{1, 4, 5}, 4), 1u);  // 4 fits, 5 does not
  EXPECT_EQ(t.tokens, (std::vector<TokenId>{1, 2, 3, 4}));
  EXPECT_EQ(t.parents, (std::vector<int32_t>{-1, 0, 1, 0}));
  const TokenTree c = TokenTree::chain(std::vector<TokenId>{3, 4});
  EXPECT_EQ(c.parents, (std::vector<int32_t>{-1, 0}));
}

TEST(NgramPaths, DifferentContinuationsMostRecentFirst) {
  // "6 7" is followed by 8 9, later by 3 4, and the sequence ends in 6 7.
  const std::vector<TokenId> t = {6, 7, 8, 9, 1, 6, 7, 3, 4, 2, 6, 7, 3, 4, 5, 6, 7};
  const auto paths = propose_ngram_paths(t, 2, 4);
  // The 3-gram "5 6 7" does not recur; "6 7" gives 3 4, 3 4 again (skipped),
  // then 8 9; the 1-gram "7" adds nothing new.
  ASSERT_EQ(paths.size(), 2u);
  EXPECT_EQ(paths[0], (std::vector<TokenId>{3, 4}));
  EXPECT_EQ(paths[1], (std::vector<TokenId>{8, 9}));
  EXPECT_EQ(paths[0], propose_ngram(t, 2));
  EXPECT_EQ(propose_ngram_paths(t, 2, 1).size(), 1u);
  EXPECT_TRUE(propose_ngram_paths(t, 0, 3).empty());
}

TEST(NgramPaths, ShorterSuffixesAddContinuationsTheLongerOnesLack) {
  // "1 2" recurs once (then 3); "2" alone also precedes 9.
  const std::vector<TokenId> t = {1, 2, 3, 5, 2, 9, 7, 1, 2};
  const auto paths = propose_ngram_paths(t, 1, 3);
  ASSERT_EQ(paths.size(), 2u);
  EXPECT_EQ(paths[0], (std::vector<TokenId>{3}));
  EXPECT_EQ(paths[1], (std::vector<TokenId>{9}));
}

}  // namespace
}  // namespace tern::spec
