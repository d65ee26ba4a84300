// Arrival processes: rate and burstiness over many samples.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "loadgen/arrivals.h"
#include "loadgen/stats.h"

namespace tern::loadgen {
namespace {

std::vector<double> gaps_of(const std::vector<double>& t) {
  std::vector<double> g;
  double prev = 0;
  for (double x : t) {
    g.push_back(x - prev);
    prev = x;
  }
  return g;
}

struct Case {
  double rate, burstiness;
};

class ArrivalShape : public ::testing::TestWithParam<Case> {};

TEST_P(ArrivalShape, RateAndCoefficientOfVariation) {
  const Case c = GetParam();
  constexpr size_t kN = 20000;
  const std::vector<double> t = arrival_offsets(kN, {c.rate, c.burstiness, 1234});
  ASSERT_EQ(t.size(), kN);
  for (size_t i = 1; i < kN; ++i) ASSERT_LE(t[i - 1], t[i]);
  const std::vector<double> g = gaps_of(t);
  const double m = mean(g), cv = stddev(g) / m;
  // The mean of 20k gaps is within ~1.5% (3 sigma of cv/sqrt(n) for cv <= 2) of 1/rate.
  EXPECT_NEAR(m * c.rate, 1.0, 0.045) << "observed rate " << 1.0 / m;
  EXPECT_NEAR(cv, 1.0 / std::sqrt(c.burstiness), 0.06 / std::sqrt(c.burstiness)) << "cv " << cv;
  EXPECT_NEAR(static_cast<double>(kN) / t.back(), c.rate, 0.045 * c.rate);
}

INSTANTIATE_TEST_SUITE_P(Loadgen, ArrivalShape,
                         ::testing::Values(Case{5.0, 1.0}, Case{100.0, 1.0}, Case{2.0, 0.25}, Case{10.0, 4.0},
                                           Case{0.5, 0.5}));

TEST(Arrivals, InfiniteRateSendsEverythingAtOnce) {
  const auto t = arrival_offsets(50, {std::numeric_limits<double>::infinity(), 1.0, 7});
  ASSERT_EQ(t.size(), 50u);
  for (double x : t) EXPECT_EQ(x, 0.0);
}

TEST(Arrivals, SeedReproducesAndDiffers) {
  const auto a = arrival_offsets(100, {3.0, 1.0, 42});
  const auto b = arrival_offsets(100, {3.0, 1.0, 42});
  const auto c = arrival_offsets(100, {3.0, 1.0, 43});
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  EXPECT_GT(a.front(), 0.0);  // the first request waits one gap too
}

}  // namespace
}  // namespace tern::loadgen
