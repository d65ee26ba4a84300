#include <gtest/gtest.h>

#include <cmath>
#include <complex>
#include <random>
#include <vector>

#include "kernels/elementwise.h"
#include "kernels/matmul_test_util.h"
#include "kernels/ref/ops.h"

namespace tern::kernels {
namespace {

std::vector<float> randn(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

TEST(RefOps, RmsNormMatchesDouble) {
  auto x = randn(257, 1), w = randn(257, 2);
  std::vector<float> y(257);
  rms_norm(x.data(), w.data(), y.data(), 257, 1e-6f);
  double ss = 0;
  for (float v : x) ss += double(v) * v;
  const double s = 1.0 / std::sqrt(ss / 257 + 1e-6);
  for (int i = 0; i < 257; ++i) EXPECT_NEAR(y[i], x[i] * s * w[i], 1e-5);
}

TEST(RefOps, SoftmaxIsNormalisedAndStable) {
  std::vector<float> x = {1000.0f, 999.0f, -1000.0f, 0.0f};
  softmax(x.data(), 4);
  EXPECT_NEAR(x[0] + x[1] + x[2] + x[3], 1.0f, 1e-6);
  EXPECT_NEAR(x[0] / x[1], std::exp(1.0f), 1e-4);
  EXPECT_EQ(x[2], 0.0f);
}

TEST(RefOps, SwiGlu) {
  std::vector<float> g = {-2.0f, 0.0f, 3.0f}, u = {1.0f, 5.0f, 2.0f};
  swiglu(g.data(), u.data(), 3);
  EXPECT_NEAR(g[0], -2.0 / (1 + std::exp(2.0)), 1e-6);
  EXPECT_EQ(g[1], 0.0f);
  EXPECT_NEAR(g[2], 2 * 3.0 / (1 + std::exp(-3.0)), 1e-5);
}

// Every level's vectorised SwiGLU against libm, over ordinary values, the
// saturating ends of the sigmoid (|g| up to 1e4, where e^-g over- or
// underflows) and lengths with tails; an element's result does not depend on
// the length of the call or on where in it the element sits.
TEST(RefOps, SwiGluEveryLevelMatchesLibmReference) {
  std::vector<float> g = randn(1000, 7), u = randn(1000, 8);
  for (size_t i = 0; i < g.size(); ++i) g[i] *= 4.0f;
  const float extremes[] = {0.0f, -0.0f, 1e-30f, -1e-30f, 20.0f, -20.0f, 87.0f, -87.0f, 88.5f, -88.5f, 100.0f,
                            -100.0f, 1e4f, -1e4f};
  for (size_t i = 0; i < sizeof(extremes) / sizeof(extremes[0]); ++i) g[i * 37] = extremes[i];
  std::vector<float> want = g;
  swiglu_reference(want.data(), u.data(), static_cast<int64_t>(want.size()));
  for (CpuLevel level : testing::available_levels()) {
    const ElementwiseKernels* k = elementwise_kernels_at(level);
    ASSERT_NE(k, nullptr);
    std::vector<float> got = g;
    k->swiglu(got.data(), u.data(), static_cast<int64_t>(got.size()));
    for (size_t i = 0; i < got.size(); ++i) {
      ASSERT_TRUE(std::isfinite(got[i])) << cpu_level_name(level) << " g " << g[i];
      ASSERT_NEAR(got[i], want[i], 2e-6 * std::fabs(want[i]) + 1e-30) << cpu_level_name(level) << " g " << g[i];
    }
    for (int64_t n : {1, 5, 16, 17, 33}) {
      for (int64_t at : {int64_t{0}, int64_t{100}}) {
        std::vector<float> part(g.begin() + at, g.begin() + at + n);
        k->swiglu(part.data(), u.data() + at, n);
        for (int64_t i = 0; i < n; ++i)
          ASSERT_EQ(part[i], got[at + i]) << cpu_level_name(level) << " n " << n << " at " << at << " i " << i;
      }
    }
  }
}

// RoPE as complex multiplication: pair (a, b) -> (a + ib) * e^{i pos theta_k}.
void naive_rope(std::vector<float>& x, int n_heads, int head_dim, int n_rot, int pos, float base, bool neox) {
  for (int h = 0; h < n_heads; ++h)
    for (int k = 0; k < n_rot / 2; ++k) {
      const int a = neox ? k : 2 * k, b = neox ? k + n_rot / 2 : 2 * k + 1;
      const double theta = pos * std::pow(double(base), -2.0 * k / n_rot);
      std::complex<double> z(x[h * head_dim + a], x[h * head_dim + b]);
      z *= std::polar(1.0, theta);
      x[h * head_dim + a] = float(z.real());
      x[h * head_dim + b] = float(z.imag());
    }
}

TEST(RefOps, RopeLayoutsMatchComplexRotation) {
  for (bool neox : {false, true})
    for (int n_rot : {16, 8}) {
      auto x = randn(3 * 16, 5);
      auto want = x;
      RopeParams p;
      p.layout = neox ? RopeLayout::NeoX : RopeLayout::Normal;
      p.n_rot = n_rot;
      p.freq_base = 10000.0f;
      rope(x.data(), 3, 16, 37, p);
      naive_rope(want, 3, 16, n_rot, 37, 10000.0f, neox);
      for (size_t i = 0; i < x.size(); ++i) ASSERT_NEAR(x[i], want[i], 1e-4) << "neox " << neox << " i " << i;
    }
}

TEST(RefOps, RopePreservesNormAndRelativePosition) {
  // <rope(q, m), rope(k, n)> depends only on m - n.
  RopeParams p;
  p.n_rot = 16;
  auto q = randn(16, 8), k = randn(16, 9);
  auto dot_at = [&](int m, int n) {
    auto qq = q, kk = k;
    rope(qq.data(), 1, 16, m, p);
    rope(kk.data(), 1, 16, n, p);
    double d = 0;
    for (int i = 0; i < 16; ++i) d += double(qq[i]) * kk[i];
    return d;
  };
  EXPECT_NEAR(dot_at(10, 3), dot_at(107, 100), 1e-3);
  EXPECT_GT(std::fabs(dot_at(10, 3) - dot_at(10, 9)), 1e-3);
}

// matmul() itself (any level, quantized activations) is tested in test_matmul_driver.cpp.

}  // namespace
}  // namespace tern::kernels
