#include <gtest/gtest.h>

#include <cmath>
#include <complex>
#include <random>
#include <vector>

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
