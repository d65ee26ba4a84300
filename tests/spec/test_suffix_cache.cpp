// The cross-request suffix cache of prompt lookup: what a finished sequence
// had after the same three tokens, the most recent first; bounded by tokens
// (the oldest sequences go, their index entries with them); and through the
// engine, a request that repeats an earlier one is proposed its output.
#include <gtest/gtest.h>

#include "../engine/engine_run_util.h"
#include "spec/suffix_cache.h"

namespace tern::spec {
namespace {

TEST(SuffixCache, ProposesWhatFollowedTheSameThreeTokens) {
  SuffixCache c;
  c.add(std::vector<TokenId>{1, 2, 3, 4, 5, 6, 7});
  EXPECT_EQ(c.propose(std::vector<TokenId>{9, 9, 2, 3, 4}, 2), (std::vector<TokenId>{5, 6}));
  EXPECT_EQ(c.propose(std::vector<TokenId>{3, 4, 5}, 10), (std::vector<TokenId>{6, 7}));
  EXPECT_TRUE(c.propose(std::vector<TokenId>{5, 6, 7}, 3).empty());  // nothing followed it
  EXPECT_TRUE(c.propose(std::vector<TokenId>{2, 4, 3}, 3).empty());
  EXPECT_TRUE(c.propose(std::vector<TokenId>{3, 4}, 3).empty());  // shorter than the n-gram
  c.add(std::vector<TokenId>{8, 2, 3, 4, 42});
  EXPECT_EQ(c.propose(std::vector<TokenId>{2, 3, 4}, 2), (std::vector<TokenId>{42}));  // the latest wins
}

TEST(SuffixCache, TheOldestSequencesGoPastTheBound) {
  SuffixCache c(10);
  c.add(std::vector<TokenId>{1, 2, 3, 4, 5, 6});
  c.add(std::vector<TokenId>{7, 8, 9, 10, 11});
  EXPECT_EQ(c.n_sequences(), 1u);
  EXPECT_EQ(c.n_tokens(), 5);
  EXPECT_TRUE(c.propose(std::vector<TokenId>{1, 2, 3}, 2).empty());  // evicted: its entries are stale
  EXPECT_EQ(c.propose(std::vector<TokenId>{7, 8, 9}, 2), (std::vector<TokenId>{10, 11}));
  c.add(std::vector<TokenId>(11, 5));  // longer than the whole cache: not kept
  EXPECT_EQ(c.n_sequences(), 1u);
}

TEST(SuffixCache, ARepeatedRequestIsProposedTheEarlierOutput) {
  TERN_REQUIRE_STORIES();
  EngineConfig c = test::base_config();
  c.spec = SpecMethod::Ngram;
  c.spec_k = 8;
  c.spec_adaptive = false;  // k = 8 whenever there is a match: the counts below do not hang on step timings
  auto core = test::make_core(c);
  ASSERT_TRUE(core);
  GenerationRequest r = test::golden_request();
  r.prompt_tokens = core->tokenizer().encode("Once upon a time, a bird", true, false);
  const auto first = test::run_all(*core, {r});
  const EngineStats mid = core->stats();
  const auto second = test::run_all(*core, {r});
  const EngineStats end = core->stats();
  EXPECT_EQ(first[0].tokens, second[0].tokens);
  const int64_t acc_first = mid.spec_accepted, acc_second = end.spec_accepted - mid.spec_accepted;
  EXPECT_GT(acc_second, 150) << "the second run copies the first's output";
  EXPECT_GT(acc_second, acc_first + 50);
  EXPECT_LT(end.n_steps - mid.n_steps, mid.n_steps / 2);
}

}  // namespace
}  // namespace tern::spec
