// Speculative verification (Sampler::verify): greedy accepts exactly the
// argmax; sampled verification of a deterministic proposal yields tokens
// distributed exactly as sample() draws them (chi-square over 20,000 trials
// for proposals of high, middle and zero probability), and the penalties
// see the same history as sample() does. Several candidates at once
// (verify_any, a token tree's children): the output is still distributed as
// sample() draws it, each candidate taken exactly as often as p says; and
// the token is the one sample() draws from the same generator state.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "sampling/sampler.h"
#include "sampling_test_util.h"

namespace tern {
namespace {

using sampling_test::greedy_params;
using sampling_test::logits_of;
using sampling_test::plain_params;
using sampling_test::random_logits;
using sampling_test::softmax;

TEST(SamplerVerify, GreedyAcceptsOnlyTheArgmax) {
  Sampler s(greedy_params(), 500);
  for (uint32_t seed = 0; seed < 20; ++seed) {
    const std::vector<float> l = random_logits(500, seed);
    const TokenId best = static_cast<TokenId>(std::max_element(l.begin(), l.end()) - l.begin());
    std::vector<float> a = l, b = l;
    const Sampler::Verdict hit = s.verify(a, best);
    EXPECT_TRUE(hit.accepted);
    EXPECT_EQ(hit.token, best);
    const TokenId other = (best + 1 + static_cast<TokenId>(seed)) % 500;
    const Sampler::Verdict miss = s.verify(b, other);
    EXPECT_FALSE(miss.accepted);
    EXPECT_EQ(miss.token, best);  // the replacement is what sample() would give
  }
}

// Draws from verify(x) over `n` trials; the output token (x, or its replacement).
std::vector<int> verify_histogram(Sampler& s, const std::vector<float>& logits, TokenId x, int n, int& n_accepted) {
  std::vector<int> counts(logits.size(), 0);
  std::vector<float> scratch;
  n_accepted = 0;
  for (int i = 0; i < n; ++i) {
    scratch = logits;
    const Sampler::Verdict v = s.verify(scratch, x);
    n_accepted += v.accepted;
    EXPECT_TRUE(!v.accepted || v.token == x);
    EXPECT_TRUE(v.accepted || v.token != x);
    ++counts[static_cast<size_t>(v.token)];
  }
  return counts;
}

double chi_square(const std::vector<int>& counts, const std::vector<double>& p, int n) {
  double chi2 = 0.0;
  for (size_t i = 0; i < p.size(); ++i) {
    if (p[i] == 0.0) {
      EXPECT_EQ(counts[i], 0) << "token " << i << " has probability 0";
      continue;
    }
    const double e = p[i] * n;
    chi2 += (counts[i] - e) * (counts[i] - e) / e;
  }
  return chi2;
}

TEST(SamplerVerify, SampledOutputIsDistributedAsSample) {
  const std::vector<double> p = {0.30, 0.20, 0.15, 0.12, 0.10, 0.07, 0.04, 0.02};
  const std::vector<float> l = logits_of(p);
  const int n = 20000;
  for (TokenId x : {0, 3, 7}) {  // a likely, a middling and an unlikely proposal
    Sampler s(plain_params(100 + static_cast<uint64_t>(x)), 8);
    int n_accepted = 0;
    const std::vector<int> counts = verify_histogram(s, l, x, n, n_accepted);
    // 7 degrees of freedom: P(chi2 > 24.32) = 0.001.
    EXPECT_LT(chi_square(counts, p, n), 24.32) << "proposal " << x;
    // Acceptance happens with probability p(x): within 4.5 sigma.
    const double sd = std::sqrt(n * p[static_cast<size_t>(x)] * (1 - p[static_cast<size_t>(x)]));
    EXPECT_NEAR(n_accepted, n * p[static_cast<size_t>(x)], 4.5 * sd) << "proposal " << x;
  }
}

TEST(SamplerVerify, FiltersApplyAndAFilteredOutProposalIsAlwaysRejected) {
  const std::vector<double> p = {0.30, 0.20, 0.15, 0.12, 0.10, 0.07, 0.04, 0.02};
  SamplingParams params = plain_params(7);
  params.top_k = 4;
  params.temperature = 0.7f;
  const std::vector<float> l = logits_of(p);
  // The reference: softmax(l / 0.7) over the top 4, renormalised.
  std::vector<double> q = softmax(l, 0.7);
  for (size_t i = 4; i < q.size(); ++i) q[i] = 0.0;
  double sum = 0.0;
  for (double v : q) sum += v;
  for (double& v : q) v /= sum;
  const int n = 20000;
  for (TokenId x : {1, 6}) {
    Sampler s(params, 8);
    int n_accepted = 0;
    const std::vector<int> counts = verify_histogram(s, l, x, n, n_accepted);
    EXPECT_LT(chi_square(counts, q, n), 16.27) << "proposal " << x;  // 3 dof, P = 0.001
    if (x == 6) {
      EXPECT_EQ(n_accepted, 0);
    }
  }
}

TEST(SamplerVerify, SeveralCandidatesKeepTheDistribution) {
  const std::vector<double> p = {0.30, 0.20, 0.15, 0.12, 0.10, 0.07, 0.04, 0.02};
  const std::vector<float> l = logits_of(p);
  const int n = 20000;
  const std::vector<std::vector<TokenId>> sets = {{0, 1, 2}, {7, 3}, {5, 0, 6, 1}, {2}};
  for (size_t k = 0; k < sets.size(); ++k) {
    const std::vector<TokenId>& cands = sets[k];
    Sampler s(plain_params(300 + k), 8);
    std::vector<int> counts(p.size(), 0), taken(cands.size(), 0);
    std::vector<float> scratch;
    for (int i = 0; i < n; ++i) {
      scratch = l;
      const Sampler::TreeVerdict v = s.verify_any(scratch, cands);
      ASSERT_GE(v.accepted, -1);
      ASSERT_LT(v.accepted, static_cast<int>(cands.size()));
      if (v.accepted >= 0) {
        EXPECT_EQ(v.token, cands[static_cast<size_t>(v.accepted)]);
        ++taken[static_cast<size_t>(v.accepted)];
      } else {
        EXPECT_EQ(std::find(cands.begin(), cands.end(), v.token), cands.end()) << "a rejected candidate came back";
      }
      ++counts[static_cast<size_t>(v.token)];
    }
    EXPECT_LT(chi_square(counts, p, n), 24.32) << "set " << k;  // 7 dof, P = 0.001
    for (size_t i = 0; i < cands.size(); ++i) {
      const double pi = p[static_cast<size_t>(cands[i])];
      EXPECT_NEAR(taken[i], n * pi, 4.5 * std::sqrt(n * pi * (1 - pi))) << "set " << k << " candidate " << i;
    }
  }
}

TEST(SamplerVerify, TheTokenIsTheOneSampleDraws) {
  SamplingParams params = plain_params(77);
  params.top_p = 0.9f;
  params.temperature = 0.8f;
  Sampler a(params, 500), b(params, 500);
  for (uint32_t seed = 0; seed < 200; ++seed) {
    const std::vector<float> l = random_logits(500, seed);
    std::vector<float> x = l, y = l;
    const TokenId sampled = a.sample(x);
    const TokenId cands[] = {static_cast<TokenId>(seed % 500), static_cast<TokenId>((seed * 7 + 3) % 500), sampled};
    const Sampler::TreeVerdict v = b.verify_any(y, std::span(cands, seed % 3 == 0 ? 3 : 2));
    EXPECT_EQ(v.token, sampled) << seed;
  }
}

TEST(SamplerVerify, SeveralCandidatesGreedy) {
  Sampler s(greedy_params(), 500);
  for (uint32_t seed = 0; seed < 20; ++seed) {
    const std::vector<float> l = random_logits(500, seed);
    const TokenId best = static_cast<TokenId>(std::max_element(l.begin(), l.end()) - l.begin());
    const TokenId a = (best + 1) % 500, b = (best + 2) % 500;
    std::vector<float> x = l, y = l;
    const TokenId with[] = {a, best, b}, without[] = {a, b};
    const Sampler::TreeVerdict hit = s.verify_any(x, with);
    EXPECT_EQ(hit.accepted, 1);
    EXPECT_EQ(hit.token, best);
    const Sampler::TreeVerdict miss = s.verify_any(y, without);
    EXPECT_EQ(miss.accepted, -1);
    EXPECT_EQ(miss.token, best);
  }
}

TEST(SamplerVerify, PenaltiesSeeTheSameHistoryAsSample) {
  SamplingParams params = greedy_params();
  params.repetition_penalty = 3.0f;
  Sampler a(params, 4), b(params, 4);
  for (Sampler* s : {&a, &b}) s->accept(0);
  const std::vector<float> l = {2.0f, 1.0f, 0.5f, 0.0f};  // token 0 wins only without the penalty
  std::vector<float> la = l, lb = l;
  const TokenId sampled = a.sample(la);
  EXPECT_EQ(sampled, 1);
  const Sampler::Verdict v = b.verify(lb, 0);
  EXPECT_FALSE(v.accepted);
  EXPECT_EQ(v.token, sampled);
}

}  // namespace
}  // namespace tern
