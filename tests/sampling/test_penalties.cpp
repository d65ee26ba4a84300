// Penalties: exact logit changes, the window, and their effect on the choice.
#include <gtest/gtest.h>

#include "sampling/sampler.h"
#include "sampling_test_util.h"

namespace tern {
namespace {

using sampling_test::greedy_params;

// sample() applies the penalties to its argument in place (documented: the
// logits are scratch), so greedy sampling exposes the penalised row.
std::vector<float> penalised(Sampler& s, std::vector<float> logits) {
  (void)s.sample(logits);
  return logits;
}

TEST(SamplerPenalties, RepetitionDividesPositiveAndMultipliesNegative) {
  SamplingParams p = greedy_params();
  p.repetition_penalty = 2.0f;
  Sampler s(p, 6);
  for (TokenId id : {1, 2, 3}) s.accept(id);
  const std::vector<float> got = penalised(s, {3.0f, 3.0f, -3.0f, 0.0f, 5.0f, -1.0f});
  EXPECT_EQ(got, (std::vector<float>{3.0f, 1.5f, -6.0f, 0.0f, 5.0f, -1.0f}));
}

TEST(SamplerPenalties, RepetitionIgnoresHowOften) {
  SamplingParams p = greedy_params();
  p.repetition_penalty = 1.25f;
  Sampler s(p, 3);
  for (int i = 0; i < 5; ++i) s.accept(1);
  EXPECT_EQ(penalised(s, {1.0f, 2.5f, 1.0f}), (std::vector<float>{1.0f, 2.0f, 1.0f}));
}

TEST(SamplerPenalties, FrequencyScalesWithCount) {
  SamplingParams p = greedy_params();
  p.frequency_penalty = 0.5f;
  Sampler s(p, 4);
  for (TokenId id : {2, 2, 2, 0}) s.accept(id);
  EXPECT_EQ(penalised(s, {1.0f, 1.0f, 1.0f, 1.0f}), (std::vector<float>{0.5f, 1.0f, -0.5f, 1.0f}));
}

TEST(SamplerPenalties, PresenceIsFlat) {
  SamplingParams p = greedy_params();
  p.presence_penalty = 0.25f;
  Sampler s(p, 4);
  for (TokenId id : {2, 2, 2, 0}) s.accept(id);
  EXPECT_EQ(penalised(s, {1.0f, 1.0f, 1.0f, 1.0f}), (std::vector<float>{0.75f, 1.0f, 0.75f, 1.0f}));
}

TEST(SamplerPenalties, NegativeFrequencyAndPresenceEncourage) {
  SamplingParams p = greedy_params();
  p.frequency_penalty = -1.0f;
  p.presence_penalty = -0.5f;
  Sampler s(p, 3);
  s.accept(1);
  s.accept(1);
  EXPECT_EQ(penalised(s, {0.0f, 0.0f, 0.0f}), (std::vector<float>{0.0f, 2.5f, 0.0f}));
}

TEST(SamplerPenalties, AllThreeCompose) {
  // repetition first, then frequency, then presence: 4 / 2 - 3 * 0.5 - 0.25 = 0.25
  SamplingParams p = greedy_params();
  p.repetition_penalty = 2.0f;
  p.frequency_penalty = 0.5f;
  p.presence_penalty = 0.25f;
  Sampler s(p, 2);
  for (int i = 0; i < 3; ++i) s.accept(0);
  EXPECT_EQ(penalised(s, {4.0f, -1.0f}), (std::vector<float>{0.25f, -1.0f}));
}

TEST(SamplerPenalties, WindowForgetsOldTokens) {
  SamplingParams p = greedy_params();
  p.frequency_penalty = 1.0f;
  p.penalty_last_n = 3;
  Sampler s(p, 5);
  for (TokenId id : {0, 1, 1, 2}) s.accept(id);  // window: 1 1 2
  EXPECT_EQ(penalised(s, std::vector<float>(5, 0.0f)), (std::vector<float>{0.0f, -2.0f, -1.0f, 0.0f, 0.0f}));
  s.accept(3);  // window: 1 2 3
  EXPECT_EQ(penalised(s, std::vector<float>(5, 0.0f)), (std::vector<float>{0.0f, -1.0f, -1.0f, -1.0f, 0.0f}));
  for (TokenId id : {4, 4, 4}) s.accept(id);  // window: 4 4 4
  EXPECT_EQ(penalised(s, std::vector<float>(5, 0.0f)), (std::vector<float>{0.0f, 0.0f, 0.0f, 0.0f, -3.0f}));
}

TEST(SamplerPenalties, WholeHistoryWithMinusOne) {
  SamplingParams p = greedy_params();
  p.frequency_penalty = 0.125f;
  p.penalty_last_n = -1;
  Sampler s(p, 3);
  for (int i = 0; i < 100; ++i) s.accept(1);
  EXPECT_EQ(penalised(s, {0.0f, 20.0f, 0.0f}), (std::vector<float>{0.0f, 7.5f, 0.0f}));
}

TEST(SamplerPenalties, ZeroWindowAndNeutralValuesDisable) {
  SamplingParams p = greedy_params();
  p.repetition_penalty = 2.0f;
  p.frequency_penalty = 1.0f;
  p.penalty_last_n = 0;
  Sampler off(p, 3);
  off.accept(1);
  EXPECT_EQ(penalised(off, {1.0f, 1.0f, 1.0f}), (std::vector<float>{1.0f, 1.0f, 1.0f}));

  Sampler neutral(greedy_params(), 3);
  neutral.accept(1);
  EXPECT_EQ(penalised(neutral, {1.0f, 1.0f, 1.0f}), (std::vector<float>{1.0f, 1.0f, 1.0f}));
}

TEST(SamplerPenalties, ChangeTheGreedyChoice) {
  SamplingParams p = greedy_params();
  p.repetition_penalty = 1.5f;
  Sampler s(p, 3);
  std::vector<float> l = {5.0f, 4.0f, 1.0f};
  EXPECT_EQ(s.sample(l), 0);
  s.accept(0);
  l = {5.0f, 4.0f, 1.0f};
  EXPECT_EQ(s.sample(l), 1);  // 5 / 1.5 = 3.33 < 4
}

TEST(SamplerPenalties, LongRunWithSmallWindowKeepsCountsRight) {
  // Many evictions through the ring and the count map, checked against a
  // direct count over the last n tokens.
  SamplingParams p = greedy_params();
  p.frequency_penalty = 1.0f;
  p.penalty_last_n = 17;
  const int n_vocab = 40;
  Sampler s(p, n_vocab);
  std::vector<TokenId> history;
  std::mt19937 rng(3);
  for (int step = 0; step < 2000; ++step) {
    const auto id = static_cast<TokenId>(rng() % (step % 3 == 0 ? 5 : n_vocab));
    s.accept(id);
    history.push_back(id);
    if (step % 97 != 0) continue;
    std::vector<float> want(n_vocab, 0.0f);
    const size_t from = history.size() > 17 ? history.size() - 17 : 0;
    for (size_t i = from; i < history.size(); ++i) want[static_cast<size_t>(history[i])] -= 1.0f;
    EXPECT_EQ(penalised(s, std::vector<float>(n_vocab, 0.0f)), want) << "step " << step;
  }
}

}  // namespace
}  // namespace tern
