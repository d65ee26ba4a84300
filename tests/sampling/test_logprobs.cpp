// log_softmax_at and top_logprobs against a double-precision reference.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "sampling/sampler.h"
#include "sampling_test_util.h"

namespace tern {
namespace {

using sampling_test::random_logits;

std::vector<double> log_softmax_ref(const std::vector<float>& l) {
  double max = -INFINITY;
  for (float x : l) max = std::max(max, static_cast<double>(x));
  double sum = 0.0;
  for (float x : l) sum += std::exp(static_cast<double>(x) - max);
  std::vector<double> out;
  for (float x : l) out.push_back(static_cast<double>(x) - max - std::log(sum));
  return out;
}

TEST(SamplerLogprobs, LogSoftmaxAtMatchesDouble) {
  for (size_t n : {size_t{2}, size_t{1000}, size_t{256000}}) {
    const std::vector<float> l = random_logits(n, static_cast<uint32_t>(n), 4.0f);
    const std::vector<double> want = log_softmax_ref(l);
    for (size_t i = 0; i < n; i += std::max<size_t>(1, n / 200)) {
      const float got = Sampler::log_softmax_at(l, static_cast<TokenId>(i));
      EXPECT_NEAR(got, want[i], 1e-5 * std::max(1.0, std::abs(want[i]))) << "n=" << n << " i=" << i;
    }
  }
}

TEST(SamplerLogprobs, LogSoftmaxAtHandlesExtremes) {
  const std::vector<float> big = {1000.0f, 999.0f, -1000.0f};
  EXPECT_NEAR(Sampler::log_softmax_at(big, 0), -std::log1p(std::exp(-1.0)), 1e-6);
  EXPECT_NEAR(Sampler::log_softmax_at(big, 2), -2000.0 - std::log1p(std::exp(-1.0)), 1e-3);
  const std::vector<float> masked = {0.0f, -INFINITY, NAN, 0.0f};
  EXPECT_NEAR(Sampler::log_softmax_at(masked, 0), std::log(0.5), 1e-7);
  EXPECT_EQ(Sampler::log_softmax_at(masked, 1), -INFINITY);
  EXPECT_EQ(Sampler::log_softmax_at(masked, 2), -INFINITY);
}

TEST(SamplerLogprobs, LogSoftmaxIgnoresSamplerState) {
  // logprobs are of the raw row: no temperature, no filter, no penalty.
  const std::vector<float> l = {2.0f, 1.0f, 0.0f};
  const std::vector<double> want = log_softmax_ref(l);
  for (TokenId i = 0; i < 3; ++i) EXPECT_NEAR(Sampler::log_softmax_at(l, i), want[static_cast<size_t>(i)], 1e-6);
}

TEST(SamplerLogprobs, TopLogprobsMatchesSortedDouble) {
  const std::vector<float> l = random_logits(5000, 8, 3.0f);
  const std::vector<double> want = log_softmax_ref(l);
  std::vector<TokenId> order(l.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](TokenId a, TokenId b) {
    return l[static_cast<size_t>(a)] > l[static_cast<size_t>(b)];
  });
  const auto got = Sampler::top_logprobs(l, 20);
  ASSERT_EQ(got.size(), 20u);
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].first, order[i]) << "rank " << i;
    EXPECT_NEAR(got[i].second, want[static_cast<size_t>(order[i])], 1e-5) << "rank " << i;
  }
}

TEST(SamplerLogprobs, TopLogprobsTiesAndClamping) {
  const std::vector<float> l = {1.0f, 3.0f, 1.0f, 3.0f};
  const auto got = Sampler::top_logprobs(l, 10);
  ASSERT_EQ(got.size(), 4u);
  EXPECT_EQ(got[0].first, 1);
  EXPECT_EQ(got[1].first, 3);
  EXPECT_EQ(got[2].first, 0);
  EXPECT_EQ(got[3].first, 2);
  EXPECT_FLOAT_EQ(got[0].second, got[1].second);
  double total = 0.0;
  for (const auto& [id, lp] : got) total += std::exp(lp);
  EXPECT_NEAR(total, 1.0, 1e-6);
  EXPECT_TRUE(Sampler::top_logprobs(l, 0).empty());
  EXPECT_TRUE(Sampler::top_logprobs(l, -3).empty());
}

TEST(SamplerLogprobs, TopLogprobsAgreesWithLogSoftmaxAt) {
  const std::vector<float> l = random_logits(300, 4);
  for (const auto& [id, lp] : Sampler::top_logprobs(l, 5)) {
    EXPECT_FLOAT_EQ(lp, Sampler::log_softmax_at(l, id));
  }
}

}  // namespace
}  // namespace tern
