// engine/mix_knapsack.h against exhaustive search on small random instances.
#include <gtest/gtest.h>

#include <random>

#include "engine/mix_knapsack.h"

namespace tern {
namespace {

// The least cost within `budget` by trying every pick (infinity when none fits).
double brute_force(const std::vector<MixItem>& items, uint64_t budget) {
  double best = INFINITY;
  std::vector<int> pick(items.size(), 0);
  for (;;) {
    uint64_t bytes = 0;
    double cost = 0;
    for (size_t i = 0; i < items.size(); ++i) bytes += items[i][pick[i]].bytes, cost += items[i][pick[i]].cost;
    if (bytes <= budget) best = std::min(best, cost);
    size_t i = 0;
    while (i < items.size() && ++pick[i] == static_cast<int>(items[i].size())) pick[i++] = 0;
    if (i == items.size()) return best;
  }
}

std::vector<MixItem> random_items(std::mt19937& rng, uint64_t granule) {
  std::uniform_int_distribution<int> n_items(1, 6), n_options(1, 4), size(1, 40);
  std::uniform_real_distribution<double> cost(0.0, 1.0);
  std::vector<MixItem> items(n_items(rng));
  for (auto& item : items) {
    item.resize(n_options(rng));
    for (auto& o : item) o = {static_cast<uint64_t>(size(rng)) * granule, cost(rng)};
  }
  return items;
}

TEST(MixKnapsack, ExactWhenSizesAreWholeUnits) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 300; ++trial) {
    // 64 steps over a budget that is a multiple of 64: one unit per byte.
    const auto items = random_items(rng, 1);
    const uint64_t budget = 64 * std::uniform_int_distribution<int>(1, 4)(rng);
    const double want = brute_force(items, budget);
    auto got = choose_mix(items, budget, static_cast<int64_t>(budget));
    if (std::isinf(want)) {
      EXPECT_FALSE(got) << trial;
      continue;
    }
    ASSERT_TRUE(got) << trial << ": " << got.status().message();
    EXPECT_LE(got->bytes, budget);
    EXPECT_NEAR(got->cost, want, 1e-12) << trial;
    // The pick is what it reports.
    uint64_t bytes = 0;
    double cost = 0;
    for (size_t i = 0; i < items.size(); ++i) bytes += items[i][got->pick[i]].bytes, cost += items[i][got->pick[i]].cost;
    EXPECT_EQ(bytes, got->bytes);
    EXPECT_NEAR(cost, got->cost, 1e-12);
  }
}

// Coarse units: always within the byte budget, never worse than the best pick
// with one unit per item less budget, never better than the true optimum.
TEST(MixKnapsack, CoarseUnitsStayWithinBudgetAndNearTheOptimum) {
  std::mt19937 rng(11);
  int n_checked = 0;
  for (int trial = 0; trial < 300; ++trial) {
    const auto items = random_items(rng, 37);
    const uint64_t budget = std::uniform_int_distribution<uint64_t>(500, 6000)(rng);
    const int64_t steps = 50;
    const uint64_t unit = (budget + steps - 1) / steps;
    auto got = choose_mix(items, budget, steps);
    const double best = brute_force(items, budget);
    const uint64_t slack = unit * items.size();
    const double best_less = budget > slack ? brute_force(items, budget - slack) : INFINITY;
    if (!got) {
      EXPECT_TRUE(std::isinf(best_less)) << trial << ": " << got.status().message();
      continue;
    }
    ++n_checked;
    EXPECT_LE(got->bytes, budget) << trial;
    EXPECT_GE(got->cost, best - 1e-12) << trial;
    EXPECT_LE(got->cost, best_less + 1e-12) << trial;
  }
  EXPECT_GT(n_checked, 200);
}

TEST(MixKnapsack, ClearErrors) {
  auto empty = choose_mix({{{10, 0.0}}, {}}, 100);
  ASSERT_FALSE(empty);
  EXPECT_NE(empty.status().message().find("no candidate type"), std::string::npos);
  auto small = choose_mix({{{60, 0.0}, {50, 1.0}}, {{40, 0.0}, {30, 2.0}}}, 79);
  ASSERT_FALSE(small);
  EXPECT_NE(small.status().message().find("80 bytes"), std::string::npos) << small.status().message();
  // Enough for the big options of both: the zero-cost pick.
  auto all = choose_mix({{{60, 0.0}, {50, 1.0}}, {{40, 0.0}, {30, 2.0}}}, 100);
  ASSERT_TRUE(all);
  EXPECT_EQ(all->pick, (std::vector<int>{0, 0}));
  // 90 bytes: giving up 10 on the first costs 1, on the second 2.
  auto some = choose_mix({{{60, 0.0}, {50, 1.0}}, {{40, 0.0}, {30, 2.0}}}, 90);
  ASSERT_TRUE(some);
  EXPECT_EQ(some->pick, (std::vector<int>{1, 0}));
  EXPECT_EQ(some->bytes, 90u);
}

}  // namespace
}  // namespace tern
