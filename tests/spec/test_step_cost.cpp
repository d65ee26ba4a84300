// The step cost model (spec/step_cost.h) and the choice of k it feeds
// (choose_spec_k): on a machine whose steps are flat up to 8 tokens and
// proportional beyond, the model learns both regimes from observed steps,
// interpolates between them and extends the end segments (the prior rule
// with one size seen); the
// choice proposes many tokens where extra tokens are free, few or none
// where they cost a step each, probes ever more rarely when it chose none,
// and needs a larger predicted gain to turn on than to stay on.
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "engine/speculator.h"
#include "spec/step_cost.h"

namespace tern {
namespace {

// 40 ms while reading weights, 5 ms per token once arithmetic dominates.
double roofline_s(int64_t n) { return std::max(0.040, 0.005 * static_cast<double>(n)); }

TEST(StepCost, LearnsTheFlatAndTheSteepRegime) {
  StepCost c;
  EXPECT_LT(c.seconds(4), 0);  // nothing seen
  EXPECT_NEAR(c.ratio(4, 4), 1.08, 1e-9);  // the prior: 0.08 of a step per token and sequence
  for (int rep = 0; rep < 20; ++rep)
    for (int64_t n : {1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 64}) c.observe(n, roofline_s(n));
  EXPECT_NEAR(c.seconds(1), 0.040, 1e-6);
  EXPECT_NEAR(c.ratio(1, 3), 1.0, 0.02);   // decode at batch 1: extra tokens are free
  EXPECT_NEAR(c.ratio(16, 16), 2.0, 0.05);  // compute-bound: twice the tokens, twice the time
  EXPECT_NEAR(c.ratio(4, 28), roofline_s(32) / roofline_s(4), 0.05);
  // Beyond the largest step seen, and below the smallest: the end segments extended.
  EXPECT_NEAR(c.seconds(128), 0.640, 0.01);
  StepCost steep;  // only compute-bound steps seen: the base size's cost comes from their slope
  for (int rep = 0; rep < 20; ++rep)
    for (int64_t n : {8, 16}) steep.observe(n, 0.005 * static_cast<double>(n));
  EXPECT_NEAR(steep.seconds(4), 0.020, 0.001);
  EXPECT_NEAR(steep.ratio(4, 4), 2.0, 0.05);
  StepCost one;  // one size seen: the prior rule around it
  for (int rep = 0; rep < 5; ++rep) one.observe(4, 0.040);
  EXPECT_NEAR(one.ratio(4, 8), 1.16, 1e-6);
  // Never cheaper for more tokens.
  for (double n = 1; n < 100; n += 0.5) EXPECT_LE(c.seconds(n), c.seconds(n + 0.5) + 1e-12) << n;
}

TEST(StepCost, FollowsAChangeOfSpeed) {
  StepCost c;
  for (int i = 0; i < 50; ++i) c.observe(4, 0.040);
  for (int i = 0; i < 100; ++i) c.observe(4, 0.080);  // the machine got busier
  EXPECT_NEAR(c.seconds(4), 0.080, 0.002);
}

std::vector<double> costs(const StepCost& c, double n_base, int n_seqs, int k_max) {
  std::vector<double> v(static_cast<size_t>(k_max) + 1, 1.0);
  for (int k = 1; k <= k_max; ++k) v[static_cast<size_t>(k)] = c.ratio(n_base, n_seqs * k);
  return v;
}

TEST(ChooseSpecK, ManyWhereFreeNoneWhereEachTokenCostsAStep) {
  StepCost c;
  for (int rep = 0; rep < 20; ++rep)
    for (int64_t n : {1, 2, 4, 8, 16, 32, 64, 128}) c.observe(n, roofline_s(n));
  SpecPacing idle;
  // Batch 1: up to 8 tokens cost nothing more, so a good proposer gets 7.
  EXPECT_EQ(choose_spec_k(0.9, costs(c, 1, 1, 16), idle), 7);
  // Batch 16, fully compute-bound: one more token per sequence is a whole
  // step more; at 70% acceptance nothing pays.
  EXPECT_EQ(choose_spec_k(0.7, costs(c, 16, 16, 16), idle), 0);
  // A draft costing 30% of a step per pass shortens the batch-1 choice.
  std::vector<double> with_draft = costs(c, 1, 1, 16);
  for (size_t k = 1; k < with_draft.size(); ++k) with_draft[k] += 0.3 * static_cast<double>(k);
  const int k_draft = choose_spec_k(0.7, with_draft, idle);
  EXPECT_GT(k_draft, 0);
  EXPECT_LT(k_draft, 4);
  // Having chosen none, a request probes with one proposal after 16 idle
  // steps, then 32, 64, 128, 128, ...; a step that pays resets the pace.
  // (Each proposal costs 0.75 of a step: not at 70% acceptance, but at 100% it would pay.)
  std::vector<double> dear(17);
  for (size_t k = 0; k < dear.size(); ++k) dear[k] = 1.0 + 0.75 * static_cast<double>(k);
  idle = SpecPacing{};
  std::vector<int> probe_steps;
  for (int s = 1; s <= 600; ++s)
    if (choose_spec_k(0.7, dear, idle) > 0) probe_steps.push_back(s);
  EXPECT_EQ(probe_steps, (std::vector<int>{16, 48, 112, 240, 368, 496}));
  EXPECT_GT(choose_spec_k(0.9, costs(c, 1, 1, 16), idle), 0);
  EXPECT_EQ(idle.probe_every, 16);
  // Where even proposals that are always right cannot pay, a probe only
  // every 128 steps (the costs may have been misjudged).
  idle = SpecPacing{};
  std::vector<double> hopeless(17);
  for (size_t k = 0; k < hopeless.size(); ++k) hopeless[k] = 1.0 + 1.5 * static_cast<double>(k);
  int probes = 0;
  for (int s = 0; s < 640; ++s) probes += choose_spec_k(0.7, hopeless, idle);
  EXPECT_EQ(probes, 5);
  // A draft model's request never probes.
  idle = SpecPacing{};
  probes = 0;
  for (int s = 0; s < 640; ++s) probes += choose_spec_k(0.7, dear, idle, /*probe=*/false);
  EXPECT_EQ(probes, 0);
}

TEST(ChooseSpecK, AMarginalGainKeepsItOnButDoesNotTurnItOn) {
  // One proposal at 70% acceptance for 0.6 of a step more: 1.7 / 1.6, a
  // predicted 6% gain — below the 10% that turns speculation on, above the
  // 3% that keeps it on.
  const std::vector<double> marginal{1.0, 1.6};
  SpecPacing off;
  EXPECT_EQ(choose_spec_k(0.7, marginal, off, /*probe=*/false), 0);
  EXPECT_FALSE(off.on);
  SpecPacing on;
  EXPECT_EQ(choose_spec_k(0.9, marginal, on, /*probe=*/false), 1);  // 1.9 / 1.6: turns on
  EXPECT_TRUE(on.on);
  EXPECT_EQ(choose_spec_k(0.7, marginal, on, /*probe=*/false), 1);  // stays on
  EXPECT_EQ(choose_spec_k(0.6, marginal, on, /*probe=*/false), 0);  // 1.6 / 1.6: off
  EXPECT_FALSE(on.on);
  EXPECT_EQ(choose_spec_k(0.7, marginal, on, /*probe=*/false), 0);  // and stays off
}

}  // namespace
}  // namespace tern
