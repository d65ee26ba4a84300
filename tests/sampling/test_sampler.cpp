// Sampler chain: greedy, determinism, distribution, filters, temperature, params.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <set>

#include "sampling/sampler.h"
#include "sampling_test_util.h"

namespace tern {
namespace {

using sampling_test::greedy_params;
using sampling_test::histogram;
using sampling_test::logits_of;
using sampling_test::plain_params;
using sampling_test::random_logits;
using sampling_test::softmax;

TokenId argmax_ref(const std::vector<float>& l) {
  return static_cast<TokenId>(std::max_element(l.begin(), l.end()) - l.begin());  // first max
}

// ---- greedy ----------------------------------------------------------------

TEST(SamplerGreedy, IsArgmax) {
  Sampler s(greedy_params(), 1000);
  for (uint32_t seed = 0; seed < 20; ++seed) {
    std::vector<float> l = random_logits(1000, seed);
    const TokenId want = argmax_ref(l);
    EXPECT_EQ(s.sample(l), want);
  }
}

TEST(SamplerGreedy, TiesGoToLowestId) {
  Sampler s(greedy_params(), 6);
  std::vector<float> l = {1.0f, 3.0f, 2.0f, 3.0f, 3.0f, -1.0f};
  EXPECT_EQ(s.sample(l), 1);
  std::vector<float> flat(6, 0.5f);
  EXPECT_EQ(s.sample(flat), 0);
}

TEST(SamplerGreedy, NanIsMaskedAndAllMaskedGivesZero) {
  Sampler s(greedy_params(), 4);
  std::vector<float> l = {NAN, 1.0f, NAN, 2.0f};
  EXPECT_EQ(s.sample(l), 3);
  std::vector<float> masked(4, -INFINITY);
  EXPECT_EQ(s.sample(masked), 0);
}

TEST(SamplerGreedy, TopK1MatchesGreedyAtAnyTemperature) {
  SamplingParams p = plain_params(7);
  p.top_k = 1;
  p.temperature = 1.5f;
  for (int n_vocab : {5, 2000}) {  // both the nth_element and the heap top-k paths
    Sampler s(p, n_vocab);
    for (uint32_t seed = 0; seed < 50; ++seed) {
      std::vector<float> l = random_logits(static_cast<size_t>(n_vocab), seed);
      if (seed % 5 == 0) l[static_cast<size_t>(n_vocab) - 1] = l[static_cast<size_t>(argmax_ref(l))];  // a tie
      const TokenId want = argmax_ref(l);
      EXPECT_EQ(s.sample(l), want) << "n_vocab=" << n_vocab << " seed=" << seed;
    }
  }
}

// ---- determinism -----------------------------------------------------------

std::vector<TokenId> draw_sequence(uint64_t seed, int n) {
  SamplingParams p;  // the defaults: every filter on
  p.seed = seed;
  p.temperature = 1.2f;
  Sampler s(p, 500);
  const std::vector<float> logits = random_logits(500, 99, 1.0f);
  std::vector<TokenId> out;
  std::vector<float> scratch;
  for (int i = 0; i < n; ++i) {
    scratch = logits;
    out.push_back(s.sample(scratch));
  }
  return out;
}

TEST(SamplerSeed, SameSeedSameSequence) {
  const std::vector<TokenId> a = draw_sequence(1234, 1000);
  const std::vector<TokenId> b = draw_sequence(1234, 1000);
  EXPECT_EQ(a, b);
  EXPECT_GT(std::set<TokenId>(a.begin(), a.end()).size(), 5u) << "the draws should actually vary";
}

TEST(SamplerSeed, DifferentSeedDifferentSequence) {
  EXPECT_NE(draw_sequence(1234, 1000), draw_sequence(1235, 1000));
  EXPECT_NE(draw_sequence(0, 1000), draw_sequence(1, 1000));
}

TEST(SamplerSeed, RandomSeedIsDrawnAndReported) {
  SamplingParams p = plain_params(SamplingParams::kRandomSeed);
  Sampler a(p, 10), b(p, 10);
  EXPECT_NE(a.seed(), b.seed());  // fails with probability 2^-64
  SamplingParams fixed = plain_params(5);
  EXPECT_EQ(Sampler(fixed, 10).seed(), 5u);
}

// Pins the RNG -> token mapping: with equal logits every weight is exactly 1,
// so no libm call is involved and these ids must match on every platform.
TEST(SamplerSeed, GoldenSequenceOnFlatLogits) {
  Sampler s(plain_params(2024), 1000);
  std::vector<TokenId> got;
  for (int i = 0; i < 12; ++i) {
    std::vector<float> l(1000, 0.25f);
    got.push_back(s.sample(l));
  }
  // Reference: token = floor(u * 1000), u = (mt19937_64(2024)() >> 11) * 2^-53.
  std::mt19937_64 ref(2024);
  std::vector<TokenId> want;
  for (int i = 0; i < 12; ++i) {
    const double u = static_cast<double>(ref() >> 11) * 0x1.0p-53;
    want.push_back(static_cast<TokenId>(u * 1000.0));
  }
  EXPECT_EQ(got, want);
}

// One RNG output per non-greedy call, whatever the filters keep: a sampler
// whose min-p cuts most tokens stays in step with an unfiltered one.
TEST(SamplerSeed, FiltersDoNotShiftTheStream) {
  SamplingParams filtered = plain_params(555);
  filtered.min_p = 0.3f;
  Sampler a(filtered, 300), b(plain_params(555), 300);
  const std::vector<float> logits = random_logits(300, 6);
  for (int i = 0; i < 25; ++i) {
    std::vector<float> la = logits, lb = logits;
    (void)a.sample(la);
    (void)b.sample(lb);
  }
  // On flat logits min-p keeps everything, so aligned streams must agree.
  for (int i = 0; i < 20; ++i) {
    std::vector<float> la(300, 0.0f), lb(300, 0.0f);
    EXPECT_EQ(a.sample(la), b.sample(lb)) << i;
  }
}

// ---- distribution ----------------------------------------------------------

TEST(SamplerDistribution, MatchesSoftmaxAtTemperatureOne) {
  const std::vector<float> logits = {2.0f, 1.0f, 0.5f, 0.0f, -0.5f, -1.0f, 1.5f, -3.0f, 0.25f, 1.75f};
  const std::vector<double> want = softmax(logits);
  Sampler s(plain_params(31337), static_cast<int>(logits.size()));
  const int n_draws = 200000;
  const std::vector<int> counts = histogram(s, logits, n_draws);
  double chi2 = 0.0;
  for (size_t i = 0; i < logits.size(); ++i) {
    const double freq = static_cast<double>(counts[i]) / n_draws;
    EXPECT_NEAR(freq, want[i], 0.01) << "token " << i;
    const double expected = want[i] * n_draws;
    chi2 += (counts[i] - expected) * (counts[i] - expected) / expected;
  }
  // 9 degrees of freedom: P(chi2 > 27.88) = 0.001.
  EXPECT_LT(chi2, 27.88);
}

TEST(SamplerDistribution, TemperatureScalesLogits) {
  const std::vector<float> logits = {1.0f, 0.0f, -1.0f, 0.5f};
  for (float t : {0.5f, 2.0f}) {
    SamplingParams p = plain_params(77);
    p.temperature = t;
    Sampler s(p, 4);
    const std::vector<double> want = softmax(logits, t);
    const int n_draws = 100000;
    const std::vector<int> counts = histogram(s, logits, n_draws);
    for (size_t i = 0; i < logits.size(); ++i) {
      EXPECT_NEAR(static_cast<double>(counts[i]) / n_draws, want[i], 0.01) << "t=" << t << " token " << i;
    }
  }
}

TEST(SamplerDistribution, LargeTemperatureFlattens) {
  const std::vector<float> logits = {0.0f, 1.0f, 2.0f, 3.0f};
  SamplingParams p = plain_params(3);
  p.temperature = 1000.0f;
  Sampler s(p, 4);
  const int n_draws = 100000;
  const std::vector<int> counts = histogram(s, logits, n_draws);
  for (int c : counts) EXPECT_NEAR(static_cast<double>(c) / n_draws, 0.25, 0.01);
}

TEST(SamplerDistribution, SmallTemperatureSharpens) {
  const std::vector<float> logits = {0.0f, 1.0f, 2.0f, 2.5f};
  SamplingParams p = plain_params(3);
  p.temperature = 0.01f;
  Sampler s(p, 4);
  const std::vector<int> counts = histogram(s, logits, 2000);
  EXPECT_EQ(counts[3], 2000);
}

TEST(SamplerDistribution, MaskedTokensAreNeverDrawn) {
  std::vector<float> logits(50, -INFINITY);
  logits[7] = 0.0f;
  logits[21] = 0.0f;
  logits[30] = NAN;
  Sampler s(plain_params(9), 50);
  const std::vector<int> counts = histogram(s, logits, 5000);
  EXPECT_EQ(counts[7] + counts[21], 5000);
  EXPECT_GT(counts[7], 2000);
  EXPECT_GT(counts[21], 2000);
}

TEST(SamplerDistribution, InfiniteLogitsFallBackToBest) {
  Sampler s(plain_params(9), 4);
  std::vector<float> all_masked(4, -INFINITY);
  EXPECT_EQ(s.sample(all_masked), 0);
  std::vector<float> with_inf = {0.0f, INFINITY, 1.0f, INFINITY};
  EXPECT_EQ(s.sample(with_inf), 1);
}

// ---- filters: draws stay inside the set each filter defines ---------------

std::set<TokenId> drawn_set(const SamplingParams& p, const std::vector<float>& logits, int n_draws) {
  Sampler s(p, static_cast<int>(logits.size()));
  const std::vector<int> counts = histogram(s, logits, n_draws);
  std::set<TokenId> out;
  for (size_t i = 0; i < counts.size(); ++i) {
    if (counts[i] > 0) out.insert(static_cast<TokenId>(i));
  }
  return out;
}

TEST(SamplerFilters, TopKKeepsTheKBest) {
  // Heap path (k * 8 <= n) and selection path (k * 8 > n).
  for (int n_vocab : {1000, 12}) {
    std::vector<float> logits(static_cast<size_t>(n_vocab), -2.0f);
    const std::set<TokenId> best = {3, 5, 8, 10, 11};
    for (TokenId id : best) logits[static_cast<size_t>(id)] = 1.0f + 0.1f * id;
    logits[0] = 0.9f;  // sixth best: close, but out
    SamplingParams p = plain_params(11);
    p.top_k = 5;
    EXPECT_EQ(drawn_set(p, logits, 20000), best) << "n_vocab=" << n_vocab;
  }
}

TEST(SamplerFilters, TopKTieAtTheEdgeKeepsLowerIds) {
  std::vector<float> logits(100, 0.0f);  // all tied
  SamplingParams p = plain_params(12);
  p.top_k = 3;
  EXPECT_EQ(drawn_set(p, logits, 5000), (std::set<TokenId>{0, 1, 2}));
}

TEST(SamplerFilters, TopPKeepsTheSmallestNucleus) {
  const std::vector<float> logits = logits_of({0.05, 0.5, 0.15, 0.3});
  SamplingParams p = plain_params(13);
  p.top_p = 0.7f;  // 0.5 < 0.7 <= 0.8: ids 1 and 3
  EXPECT_EQ(drawn_set(p, logits, 20000), (std::set<TokenId>{1, 3}));
  p.top_p = 0.85f;  // 0.8 < 0.85 <= 0.95: adds id 2
  EXPECT_EQ(drawn_set(p, logits, 20000), (std::set<TokenId>{1, 2, 3}));
  p.top_p = 0.3f;  // the top token alone already covers it
  EXPECT_EQ(drawn_set(p, logits, 2000), (std::set<TokenId>{1}));
}

// A big vocabulary with no top-k exercises the chunked partial sort: the
// nucleus (241 of 300 tied tokens) is larger than the first sorted chunk.
TEST(SamplerFilters, TopPOnLargeVocabWithoutTopK) {
  const size_t n_vocab = 10000;
  std::vector<float> logits(n_vocab, 0.0f);
  std::vector<TokenId> group;
  for (size_t i = 0; i < 300; ++i) group.push_back(static_cast<TokenId>((i * 7919) % n_vocab));
  for (TokenId id : group) logits[static_cast<size_t>(id)] = 10.0f;
  std::sort(group.begin(), group.end());

  SamplingParams p = plain_params(14);
  p.top_p = 0.8f;
  // Expected cut in double: the group tokens are equal, ties keep the lowest ids.
  const double w = std::exp(10.0);
  const double z = 300 * w + static_cast<double>(n_vocab - 300);
  const double x = static_cast<double>(p.top_p) * z / w;
  ASSERT_GT(x - std::floor(x), 0.1);
  ASSERT_LT(x - std::floor(x), 0.9);
  const size_t n_keep = static_cast<size_t>(std::ceil(x));
  const std::set<TokenId> allowed(group.begin(), group.begin() + static_cast<long>(n_keep));

  const std::set<TokenId> drawn = drawn_set(p, logits, 3000);
  EXPECT_TRUE(std::includes(allowed.begin(), allowed.end(), drawn.begin(), drawn.end()));
  EXPECT_GT(drawn.size(), n_keep * 9 / 10);
}

TEST(SamplerFilters, MinPKeepsTokensAboveFractionOfMax) {
  const std::vector<float> logits = logits_of({0.1, 0.4, 0.05, 0.3, 0.1, 0.05});
  SamplingParams p = plain_params(15);
  p.min_p = 0.2f;  // threshold 0.08: ids 0, 1, 3, 4
  EXPECT_EQ(drawn_set(p, logits, 20000), (std::set<TokenId>{0, 1, 3, 4}));
  p.min_p = 1.0f;  // only the max survives
  EXPECT_EQ(drawn_set(p, logits, 2000), (std::set<TokenId>{1}));
}

TEST(SamplerFilters, MinPUsesTemperatureScaledProbabilities) {
  // At temperature 1 the ratio p2/p0 is 0.3679, at temperature 0.5 it is 0.1353.
  const std::vector<float> logits = {1.0f, -5.0f, 0.0f};
  SamplingParams p = plain_params(16);
  p.min_p = 0.25f;
  EXPECT_EQ(drawn_set(p, logits, 10000), (std::set<TokenId>{0, 2}));
  p.temperature = 0.5f;
  EXPECT_EQ(drawn_set(p, logits, 5000), (std::set<TokenId>{0}));
}

TEST(SamplerFilters, ChainKeepsTheIntersection) {
  // probabilities: 0.3 0.25 0.2 0.1 0.08 0.04 0.03
  const std::vector<float> logits = logits_of({0.03, 0.3, 0.1, 0.25, 0.04, 0.2, 0.08});
  SamplingParams p = plain_params(17);
  p.top_k = 5;   // {1, 3, 5, 2, 6}; renormalised over 0.93
  p.top_p = 0.8f;  // cum 0.3/0.93=.32 .59 .81 -> {1, 3, 5}
  p.min_p = 0.0f;
  EXPECT_EQ(drawn_set(p, logits, 20000), (std::set<TokenId>{1, 3, 5}));
  p.top_p = 0.95f;  // cum .32 .59 .81 .92 1.0 -> all five
  p.min_p = 0.5f;   // threshold 0.15 -> {1, 3, 5}
  EXPECT_EQ(drawn_set(p, logits, 20000), (std::set<TokenId>{1, 3, 5}));
  p.min_p = 0.3f;   // threshold 0.09 -> {1, 3, 5, 2}
  EXPECT_EQ(drawn_set(p, logits, 20000), (std::set<TokenId>{1, 2, 3, 5}));
}

TEST(SamplerFilters, FilteredDrawsFollowRenormalisedProbabilities) {
  const std::vector<float> logits = logits_of({0.4, 0.3, 0.2, 0.1});
  SamplingParams p = plain_params(18);
  p.top_k = 2;
  Sampler s(p, 4);
  const int n_draws = 100000;
  const std::vector<int> counts = histogram(s, logits, n_draws);
  EXPECT_NEAR(static_cast<double>(counts[0]) / n_draws, 0.4 / 0.7, 0.01);
  EXPECT_NEAR(static_cast<double>(counts[1]) / n_draws, 0.3 / 0.7, 0.01);
}

TEST(SamplerFilters, DefaultsOnLargeVocabStayInTopK) {
  const int n_vocab = 256000;
  std::vector<float> logits = random_logits(static_cast<size_t>(n_vocab), 5, 2.0f);
  std::vector<float> sorted = logits;
  std::nth_element(sorted.begin(), sorted.begin() + 39, sorted.end(), std::greater<float>());
  const float kth = sorted[39];
  SamplingParams p;  // top_k 40, top_p 0.95, min_p 0.05, temperature 0.8
  p.seed = 19;
  Sampler s(p, n_vocab);
  std::vector<float> scratch;
  for (int i = 0; i < 200; ++i) {
    scratch = logits;
    const TokenId id = s.sample(scratch);
    EXPECT_GE(logits[static_cast<size_t>(id)], kth);
  }
}

// ---- params -----------------------------------------------------------------

void expect_rejected(const SamplingParams& p, const char* field) {
  const Status st = p.validate();
  EXPECT_FALSE(st.is_ok()) << field;
  EXPECT_EQ(st.kind(), ErrorKind::InvalidArgument) << field;
  EXPECT_NE(st.message().find(field), std::string::npos) << st.message();
}

TEST(SamplingParamsValidate, AcceptsDefaultsAndEdges) {
  EXPECT_TRUE(SamplingParams{}.validate().is_ok());
  SamplingParams p;
  p.temperature = 0.0f;
  p.top_p = 1.0f;
  p.min_p = 0.0f;
  p.frequency_penalty = -2.0f;
  p.presence_penalty = 2.0f;
  p.penalty_last_n = -1;
  p.top_k = -5;
  EXPECT_TRUE(p.validate().is_ok());
  p.min_p = 1.0f;
  p.penalty_last_n = 0;
  p.temperature = 100.0f;
  EXPECT_TRUE(p.validate().is_ok());
}

TEST(SamplingParamsValidate, RejectsBadValues) {
  auto with = [](auto mutate) {
    SamplingParams p;
    mutate(p);
    return p;
  };
  for (float t : {-0.1f, NAN, INFINITY}) expect_rejected(with([&](auto& p) { p.temperature = t; }), "temperature");
  for (float v : {0.0f, -0.5f, 1.01f, NAN}) expect_rejected(with([&](auto& p) { p.top_p = v; }), "top_p");
  for (float v : {-0.01f, 1.5f, NAN}) expect_rejected(with([&](auto& p) { p.min_p = v; }), "min_p");
  for (float v : {0.0f, -1.0f, NAN, INFINITY}) {
    expect_rejected(with([&](auto& p) { p.repetition_penalty = v; }), "repetition_penalty");
  }
  for (float v : {2.01f, -2.5f, NAN}) {
    expect_rejected(with([&](auto& p) { p.frequency_penalty = v; }), "frequency_penalty");
    expect_rejected(with([&](auto& p) { p.presence_penalty = v; }), "presence_penalty");
  }
  expect_rejected(with([](auto& p) { p.penalty_last_n = -2; }), "penalty_last_n");
}

TEST(SamplingParamsValidate, MessageShowsTheValue) {
  SamplingParams p;
  p.top_p = 1.5f;
  EXPECT_EQ(p.validate().message(), "top_p must be in (0, 1] (1 = off) (got 1.5)");
}

}  // namespace
}  // namespace tern
