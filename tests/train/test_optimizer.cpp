// AdamW, gradient clipping and the learning-rate schedule against values
// worked out by hand from their definitions (train/optimizer.h).
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "train/optimizer.h"

namespace tern::train {
namespace {

// Two steps on a decayed and an undecayed parameter, β1 0.9, β2 0.999,
// ε 1e-8, weight decay 0.01: step 1 g = 0.5, lr 0.1; step 2 g = −0.25, lr 0.05.
//   decayed from 1:    1 − 0.1·0.01 = 0.999; m̂ = 0.5, v̂ = 0.25: 0.999 − 0.1·0.5/0.5 = 0.899000002
//                      then ×(1 − 0.05·0.01); m = 0.02, v = 0.00031225; m̂ = 0.02/0.19,
//                      v̂ = 0.00031225/0.001999: 0.88523365035
//   undecayed from −2: −2.099999998, then −2.11331684965
TEST(AdamW, TwoStepsMatchTheHandComputedUpdate) {
  const AdamWConfig c{0.9, 0.999, 1e-8, 0.01};
  std::vector<float> p = {1.0f}, q = {-2.0f}, mp = {0.0f}, vp = {0.0f}, mq = {0.0f}, vq = {0.0f};
  const float g1[] = {0.5f}, g2[] = {-0.25f};
  adamw_step(c, p, g1, mp, vp, 1, 0.1, true);
  adamw_step(c, q, g1, mq, vq, 1, 0.1, false);
  EXPECT_NEAR(p[0], 0.899000002, 1e-7);
  EXPECT_NEAR(q[0], -2.099999998, 1e-7);
  EXPECT_NEAR(mp[0], 0.05, 1e-8);  // moments are stored as float
  EXPECT_NEAR(vp[0], 0.00025, 1e-10);
  adamw_step(c, p, g2, mp, vp, 2, 0.05, true);
  adamw_step(c, q, g2, mq, vq, 2, 0.05, false);
  EXPECT_NEAR(p[0], 0.88523365035, 1e-6);
  EXPECT_NEAR(q[0], -2.11331684965, 1e-6);
  EXPECT_NEAR(mp[0], 0.02, 1e-8);
  EXPECT_NEAR(vp[0], 0.00031225, 1e-10);
}

TEST(AdamW, ZeroGradientOnlyDecays) {
  const AdamWConfig c{0.9, 0.95, 1e-8, 0.1};
  std::vector<float> p = {3.0f, -1.0f}, m(2, 0.0f), v(2, 0.0f);
  const std::vector<float> g(2, 0.0f);
  adamw_step(c, p, g, m, v, 1, 0.5, true);
  EXPECT_FLOAT_EQ(p[0], 3.0f * 0.95f);
  EXPECT_FLOAT_EQ(p[1], -0.95f);
}

TEST(ClipGradNorm, ScalesAllGradientsJointlyOnlyAboveTheLimit) {
  std::vector<float> a = {3.0f}, b = {0.0f, 4.0f};
  std::vector<std::span<float>> gs = {a, b};
  EXPECT_DOUBLE_EQ(clip_grad_norm(gs, 10.0), 5.0);
  EXPECT_EQ(a[0], 3.0f);  // under the limit: unchanged
  EXPECT_DOUBLE_EQ(clip_grad_norm(gs, 1.0), 5.0);
  EXPECT_FLOAT_EQ(a[0], 0.6f);
  EXPECT_FLOAT_EQ(b[1], 0.8f);
  EXPECT_NEAR(clip_grad_norm(gs, 0.0), 1.0, 1e-7);  // 0: measure only
  EXPECT_FLOAT_EQ(a[0], 0.6f);
}

TEST(LrSchedule, WarmsUpLinearlyThenFollowsTheCosineDown) {
  const LrSchedule s{1.0, 0.1, 10, 110};
  EXPECT_DOUBLE_EQ(s.at(0), 0.1);
  EXPECT_DOUBLE_EQ(s.at(4), 0.5);
  EXPECT_DOUBLE_EQ(s.at(9), 1.0);
  EXPECT_DOUBLE_EQ(s.at(10), 1.0);
  EXPECT_NEAR(s.at(60), 0.55, 1e-12);                                        // half way: the mean of max and min
  EXPECT_NEAR(s.at(35), 0.1 + 0.45 * (1 + std::cos(M_PI * 0.25)), 1e-12);
  EXPECT_NEAR(s.at(110), 0.1, 1e-12);
  EXPECT_NEAR(s.at(500), 0.1, 1e-12);
  const LrSchedule flat{0.3, 0.3, 0, 1};
  EXPECT_DOUBLE_EQ(flat.at(0), 0.3);
}

}  // namespace
}  // namespace tern::train
