// The step cost model (engine/step_cost.h) and the choice of k it feeds
// (choose_spec_k): on a machine whose steps are flat up to 8 tokens and
// proportional beyond, the model learns both regimes from observed steps,
// interpolates between them, and extrapolates with the prior rule; the
// choice proposes many tokens where extra tokens are free, few or none
// where they cost a step each, and probes every 16 steps when it chose none.
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "engine/speculator.h"
#include "engine/step_cost.h"

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
  // Beyond the largest step seen: the prior slope from there.
  EXPECT_NEAR(c.seconds(128), 0.320 * (1 + 0.08 * 16 * 64 / 64.0), 0.01);
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
  int idle = 0;
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
  // Having chosen none, a request probes with one proposal every 16th step.
  idle = 0;
  int probes = 0;
  for (int s = 0; s < 64; ++s) probes += choose_spec_k(0.7, costs(c, 16, 16, 16), idle);
  EXPECT_EQ(probes, 4);
}

}  // namespace
}  // namespace tern
