// GeGLU (GELU-tanh gated unit, Gemma's FFN) and the tanh soft-cap (Gemma 2's
// logits), every CPU level against the double-precision libm references, and
// the references against the textbook formulas.
//
// Budgets (relative to |reference|; measured values are recorded in the XML
// report as geglu_<level>_* / softcap_<level>):
//  - GeGLU, |g| <= 4 (every activation a trained model produces lies here or
//    in the saturated tails): the polynomial exp (~1e-7) and a few f32
//    roundings; kGegluRel = 2e-6.
//  - GeGLU tail, g < -4: the result is g * e^x with x = -2 sqrt(2/pi)(g +
//    0.044715 g^3), and x itself is rounded in f32, which e^x turns into a
//    relative error of ~|x| ulps (the function's own condition number: one ulp
//    of g moves it as much); kGegluTailRelPerX = 2e-7 per unit of |x|. Results
//    below 1e-30 are compared in absolute terms (they are 0 where x > 88).
//  - Soft-cap: tanh from an e^z - 1 series or exp16; kSoftcapRel = 1e-6.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "kernels/elementwise.h"
#include "kernels/matmul_test_util.h"
#include "kernels/ref/ops.h"

namespace tern::kernels {
namespace {

constexpr double kGegluRel = 2e-6;
constexpr double kGegluTailRelPerX = 2e-7;
constexpr double kSoftcapRel = 1e-6;
constexpr double kTiny = 1e-30;  // below this, results are compared in absolute terms

void record(const std::string& name, double value) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3g", value);
  ::testing::Test::RecordProperty(name, buf);
}

std::vector<float> randn(size_t n, uint32_t seed, float std_dev) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, std_dev);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

// -2v of GELU's tanh form: the exponent the kernels evaluate.
double gelu_exponent(double g) { return -2.0 * std::sqrt(2.0 / M_PI) * (g + 0.044715 * g * g * g); }

// The textbook form, in long double: well conditioned where 1 + tanh(v) keeps its digits (g > -5).
long double gelu_textbook(long double g) {
  const long double v = std::sqrt(2.0L / 3.14159265358979323846264338327950288L) * (g + 0.044715L * g * g * g);
  return 0.5L * g * (1.0L + std::tanh(v));
}

TEST(Geglu, ReferenceIsTheTextbookTanhForm) {
  std::vector<float> g, up;
  for (int i = -500; i <= 500; ++i) {
    g.push_back(static_cast<float>(i) / 100.0f);  // [-5, 5]
    up.push_back(1.0f + static_cast<float>(i % 7) / 8.0f);
  }
  std::vector<float> got = g;
  geglu_reference(got.data(), up.data(), static_cast<int64_t>(got.size()));
  for (size_t i = 0; i < g.size(); ++i) {
    const long double want = gelu_textbook(g[i]) * up[i];
    // One f32 rounding of the result (2^-24 relative) plus the double evaluation.
    ASSERT_NEAR(got[i], static_cast<double>(want), 1.2e-7 * std::fabs(static_cast<double>(want)) + 1e-37) << "g " << g[i];
  }
  // Known values of gelu_tanh (up = 1): 1 -> 0.841192, -1 -> -0.158808, 3 -> 2.996363.
  std::vector<float> x = {1.0f, -1.0f, 3.0f}, ones(3, 1.0f);
  geglu_reference(x.data(), ones.data(), 3);
  EXPECT_NEAR(x[0], 0.8411919906, 1e-7);
  EXPECT_NEAR(x[1], -0.1588080094, 1e-7);
  EXPECT_NEAR(x[2], 2.9963625072, 1e-6);
}

// Every level against the reference over ordinary values, the saturating
// tails (e^x over- and underflowing), huge inputs (g^3 = inf) and tails of
// lengths that are not multiples of 16; an element's result does not depend
// on the call's length or on where in it the element sits.
TEST(Geglu, EveryLevelMatchesTheReference) {
  std::vector<float> g = randn(2000, 7, 2.0f);
  const std::vector<float> up = randn(2000, 8, 1.0f);
  const float extremes[] = {0.0f,  -0.0f, 1e-30f, -1e-30f, 4.0f,   -4.0f,   5.5f,    -5.5f,  7.0f,  -7.0f,
                            7.4f,  -7.4f, 7.6f,   -7.6f,   9.0f,   -9.0f,   20.0f,   -20.0f, 88.0f, -88.0f,
                            1e4f,  -1e4f, 1e13f,  -1e13f,  1e20f,  -1e20f,  3e38f,   -3e38f};
  for (size_t i = 0; i < sizeof extremes / sizeof extremes[0]; ++i) g[i * 37] = extremes[i];
  std::vector<float> want = g;
  geglu_reference(want.data(), up.data(), static_cast<int64_t>(want.size()));
  for (CpuLevel level : testing::available_levels()) {
    const ElementwiseKernels* k = elementwise_kernels_at(level);
    ASSERT_NE(k, nullptr);
    SCOPED_TRACE(cpu_level_name(level));
    std::vector<float> got = g;
    k->geglu(got.data(), up.data(), static_cast<int64_t>(got.size()));
    double worst_body = 0, worst_tail_per_x = 0;
    for (size_t i = 0; i < got.size(); ++i) {
      const double w = want[i], err = std::fabs(double(got[i]) - w);
      ASSERT_TRUE(std::isfinite(got[i]) || !std::isfinite(w)) << "g " << g[i];
      if (!std::isfinite(w)) {
        ASSERT_EQ(got[i], want[i]) << "g " << g[i];
        continue;
      }
      if (std::fabs(w) < kTiny) {
        ASSERT_LT(err, kTiny) << "g " << g[i];
        continue;
      }
      const double rel = err / std::fabs(w);
      if (g[i] >= -4.0f) {
        worst_body = std::max(worst_body, rel);
        ASSERT_LT(rel, kGegluRel) << "g " << g[i];
      } else {
        const double per_x = rel / std::max(1.0, std::fabs(gelu_exponent(g[i])));
        worst_tail_per_x = std::max(worst_tail_per_x, per_x);
        ASSERT_LT(per_x, kGegluTailRelPerX) << "g " << g[i];
      }
    }
    record(std::string("geglu_") + cpu_level_name(level) + "_body", worst_body);
    record(std::string("geglu_") + cpu_level_name(level) + "_tail_per_x", worst_tail_per_x);
    for (int64_t n : {1, 5, 16, 17, 33}) {
      for (int64_t at : {int64_t{0}, int64_t{100}}) {
        std::vector<float> part(g.begin() + at, g.begin() + at + n);
        k->geglu(part.data(), up.data() + at, n);
        for (int64_t i = 0; i < n; ++i) ASSERT_EQ(part[i], got[at + i]) << "n " << n << " at " << at << " i " << i;
      }
    }
  }
}

// GELU is not SiLU: the same inputs through SwiGLU differ by far more than
// the budget (a GeGLU call wired to SwiGLU could not pass the test above).
TEST(Geglu, DiffersFromSwiglu) {
  std::vector<float> g = randn(256, 3, 2.0f), up = randn(256, 4, 1.0f);
  std::vector<float> a = g, b = g;
  geglu(a.data(), up.data(), 256);
  swiglu(b.data(), up.data(), 256);
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::fabs(double(a[i]) - b[i]) / (std::fabs(double(a[i])) + 1e-3));
  EXPECT_GT(worst, 1e4 * kGegluRel);
}

TEST(Softcap, ReferenceIsCapTimesTanh) {
  std::vector<float> x = {0.0f, 1.0f, -30.0f, 100.0f, -1e6f};
  softcap_reference(x.data(), static_cast<int64_t>(x.size()), 30.0f);
  EXPECT_EQ(x[0], 0.0f);
  EXPECT_NEAR(x[1], 30.0 * std::tanh(1.0 / 30.0), 1e-6);
  EXPECT_NEAR(x[2], -30.0 * std::tanh(1.0), 1e-5);
  EXPECT_NEAR(x[3], 30.0 * std::tanh(100.0 / 30.0), 1e-5);
  EXPECT_FLOAT_EQ(x[4], -30.0f);
}

// Small arguments (where tanh y ~ y and an e^z - 1 by subtraction would have
// lost them), the switch between the series and exp16 at 2|y| = ln2 / 2,
// saturation and infinities, at every level and any length.
TEST(Softcap, EveryLevelMatchesTheReference) {
  for (float cap : {30.0f, 50.0f, 1.0f}) {
    std::vector<float> x = randn(1000, 9, 2.0f * cap);
    const float extremes[] = {0.0f, -0.0f, 1e-30f, -1e-30f, 1e-6f * cap, -1e-4f * cap, 0.17f * cap, -0.1733f * cap,
                              0.1734f * cap, 0.5f * cap, 9.0f * cap, -9.1f * cap, 44.0f * cap, 1e30f, -1e30f,
                              INFINITY, -INFINITY};
    for (size_t i = 0; i < sizeof extremes / sizeof extremes[0]; ++i) x[i * 41] = extremes[i];
    std::vector<float> want = x;
    softcap_reference(want.data(), static_cast<int64_t>(want.size()), cap);
    for (CpuLevel level : testing::available_levels()) {
      const ElementwiseKernels* k = elementwise_kernels_at(level);
      ASSERT_NE(k, nullptr);
      SCOPED_TRACE(::testing::Message() << cpu_level_name(level) << " cap " << cap);
      std::vector<float> got = x;
      k->softcap(got.data(), static_cast<int64_t>(got.size()), cap);
      double worst = 0;
      for (size_t i = 0; i < got.size(); ++i) {
        const double w = want[i], err = std::fabs(double(got[i]) - w);
        ASSERT_LE(std::fabs(got[i]), cap) << "x " << x[i];
        if (std::fabs(w) < kTiny) {
          ASSERT_LT(err, kTiny) << "x " << x[i];
          continue;
        }
        worst = std::max(worst, err / std::fabs(w));
        ASSERT_LT(err / std::fabs(w), kSoftcapRel) << "x " << x[i];
      }
      record(std::string("softcap_") + cpu_level_name(level) + "_cap_" + std::to_string(int(cap)), worst);
      for (int64_t n : {1, 7, 16, 31}) {
        std::vector<float> part(x.begin() + 200, x.begin() + 200 + n);
        k->softcap(part.data(), n, cap);
        for (int64_t i = 0; i < n; ++i) ASSERT_EQ(part[i], got[200 + i]) << "n " << n << " i " << i;
      }
    }
  }
}

}  // namespace
}  // namespace tern::kernels
