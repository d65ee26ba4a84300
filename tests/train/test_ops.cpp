// Every training op's backward against central finite differences of its
// forward in double precision: for a fixed random upstream gradient g, the
// scalar L = Σ g · f(inputs), differentiated numerically in each input
// element, must equal what backward accumulates (to 1e-6 relative, 1e-8
// absolute). Forwards are checked against plain formulas written here, and
// the threaded ops against themselves on 1 and 3 threads, bit for bit.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <random>
#include <vector>

#include "train/ops.h"

namespace tern::train {
namespace {

using Vec = std::vector<double>;

Vec random_vec(size_t n, uint32_t seed, double scale = 1.0) {
  std::mt19937 rng(seed);
  std::normal_distribution<double> d(0.0, scale);
  Vec v(n);
  for (double& x : v) x = d(rng);
  return v;
}

double dot(const Vec& a, const Vec& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

// Checks `analytic` (dL/dx from backward) against central differences of `loss` in every element of x.
void expect_gradient(Vec& x, const std::function<double()>& loss, const Vec& analytic, const char* what) {
  ASSERT_EQ(x.size(), analytic.size()) << what;
  const double h = 1e-5;
  double worst = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const double keep = x[i];
    x[i] = keep + h;
    const double up = loss();
    x[i] = keep - h;
    const double down = loss();
    x[i] = keep;
    const double numeric = (up - down) / (2 * h);
    const double err = std::fabs(numeric - analytic[i]) / (1e-2 + std::fabs(numeric));
    worst = std::max(worst, err);
    EXPECT_NEAR(analytic[i], numeric, 1e-8 + 1e-6 * std::fabs(numeric)) << what << " element " << i;
  }
  EXPECT_GT(dot(analytic, analytic), 1e-12) << what << ": a zero gradient checks nothing";
}

TEST(TrainOps, EmbeddingGradientAddsUpRowsOfRepeatedTokens) {
  const int64_t V = 7, C = 5, T = 6;
  const std::vector<int32_t> tokens = {3, 1, 3, 6, 0, 3};
  Vec table = random_vec(V * C, 1), g = random_vec(T * C, 2), out(T * C);
  auto loss = [&] {
    embedding_forward(table.data(), tokens.data(), T, C, out.data());
    return dot(g, out);
  };
  loss();
  for (int64_t t = 0; t < T; ++t)
    for (int64_t i = 0; i < C; ++i) EXPECT_EQ(out[t * C + i], table[tokens[t] * C + i]);
  Vec dtable(V * C, 0.0);
  embedding_backward(g.data(), tokens.data(), T, C, dtable.data());
  expect_gradient(table, loss, dtable, "dtable");
}

TEST(TrainOps, RmsNormGradients) {
  const int64_t T = 3, C = 8;
  Vec x = random_vec(T * C, 3), w = random_vec(C, 4), g = random_vec(T * C, 5), out(T * C), rstd(T);
  auto loss = [&] {
    rmsnorm_forward(x.data(), w.data(), T, C, 1e-5, out.data(), rstd.data());
    return dot(g, out);
  };
  loss();
  for (int64_t t = 0; t < T; ++t) {
    double ss = 0;
    for (int64_t i = 0; i < C; ++i) ss += x[t * C + i] * x[t * C + i];
    for (int64_t i = 0; i < C; ++i) EXPECT_NEAR(out[t * C + i], x[t * C + i] / std::sqrt(ss / C + 1e-5) * w[i], 1e-12);
  }
  Vec dx(T * C, 0.0), dw(C, 0.0);
  rmsnorm_backward(g.data(), x.data(), w.data(), rstd.data(), T, C, dx.data(), dw.data());
  expect_gradient(x, loss, dx, "dx");
  expect_gradient(w, loss, dw, "dw");
}

TEST(TrainOps, LinearGradientsAndThreadCountIndependence) {
  const int64_t T = 4, K = 6, N = 5;
  Vec x = random_vec(T * K, 6), W = random_vec(N * K, 7), g = random_vec(T * N, 8), out(T * N);
  ThreadPool pool(2);
  auto loss = [&] {
    linear_forward(x.data(), W.data(), T, K, N, out.data(), pool);
    return dot(g, out);
  };
  loss();
  for (int64_t t = 0; t < T; ++t)
    for (int64_t n = 0; n < N; ++n) {
      double s = 0;
      for (int64_t k = 0; k < K; ++k) s += x[t * K + k] * W[n * K + k];
      EXPECT_NEAR(out[t * N + n], s, 1e-12);
    }
  Vec dx(T * K, 0.0), dW(N * K, 0.0);
  linear_backward(g.data(), x.data(), W.data(), T, K, N, dx.data(), dW.data(), pool);
  expect_gradient(x, loss, dx, "dx");
  expect_gradient(W, loss, dW, "dW");

  // float, 1 vs 3 threads: the same bits.
  const int64_t T2 = 37, K2 = 64, N2 = 29;
  std::vector<float> xf(T2 * K2), wf(N2 * K2), gf(T2 * N2);
  std::mt19937 rng(9);
  std::normal_distribution<float> d;
  for (auto* v : {&xf, &wf, &gf})
    for (float& e : *v) e = d(rng);
  std::vector<float> o[2], dxs[2], dws[2];
  for (int run = 0; run < 2; ++run) {
    ThreadPool p(run == 0 ? 1 : 3);
    o[run].resize(T2 * N2);
    dxs[run].assign(T2 * K2, 0.0f);
    dws[run].assign(N2 * K2, 0.0f);
    linear_forward(xf.data(), wf.data(), T2, K2, N2, o[run].data(), p);
    linear_backward(gf.data(), xf.data(), wf.data(), T2, K2, N2, dxs[run].data(), dws[run].data(), p);
  }
  EXPECT_EQ(o[0], o[1]);
  EXPECT_EQ(dxs[0], dxs[1]);
  EXPECT_EQ(dws[0], dws[1]);
}

TEST(TrainOps, SwigluGradients) {
  const int64_t n = 12;
  Vec gate = random_vec(n, 10, 2.0), up = random_vec(n, 11), g = random_vec(n, 12), out(n);
  auto loss = [&] {
    swiglu_forward(gate.data(), up.data(), n, out.data());
    return dot(g, out);
  };
  loss();
  for (int64_t i = 0; i < n; ++i) EXPECT_NEAR(out[i], gate[i] / (1 + std::exp(-gate[i])) * up[i], 1e-14);
  Vec dgate(n, 0.0), dup(n, 0.0);
  swiglu_backward(g.data(), gate.data(), up.data(), n, dgate.data(), dup.data());
  expect_gradient(gate, loss, dgate, "dgate");
  expect_gradient(up, loss, dup, "dup");
}

TEST(TrainOps, RopeGradientsInBothLayouts) {
  const int64_t T = 5, H = 2, D = 8;
  for (bool neox : {false, true}) {
    SCOPED_TRACE(neox ? "neox" : "adjacent pairs");
    Vec x = random_vec(T * H * D, 13), g = random_vec(T * H * D, 14);
    auto loss = [&] {
      Vec y = x;
      rope_forward(y.data(), T, H, D, 10000.0, neox);
      return dot(g, y);
    };
    // Forward: pair i of head h at token t turned by t · 10000^(-2i/D).
    Vec y = x;
    rope_forward(y.data(), T, H, D, 10000.0, neox);
    const int64_t t = 3, h = 1, i = 1;
    const double th = t * std::pow(10000.0, -2.0 * i / D);
    const int64_t a = (t * H + h) * D + (neox ? i : 2 * i), b = (t * H + h) * D + (neox ? i + D / 2 : 2 * i + 1);
    EXPECT_NEAR(y[a], x[a] * std::cos(th) - x[b] * std::sin(th), 1e-12);
    EXPECT_NEAR(y[b], x[a] * std::sin(th) + x[b] * std::cos(th), 1e-12);
    Vec dx = g;
    rope_backward(dx.data(), T, H, D, 10000.0, neox);
    expect_gradient(x, loss, dx, "dx");
  }
}

// The plain T×T softmax attention, written here.
Vec naive_attention(const Vec& q, const Vec& k, const Vec& v, int64_t T, int64_t H, int64_t Hkv, int64_t D, double scale) {
  Vec out(T * H * D, 0.0);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t h = 0; h < H; ++h) {
      const int64_t kh = h / (H / Hkv);
      std::vector<double> s(t + 1);
      double sum = 0;
      for (int64_t j = 0; j <= t; ++j) {
        double d = 0;
        for (int64_t i = 0; i < D; ++i) d += q[(t * H + h) * D + i] * k[(j * Hkv + kh) * D + i];
        sum += s[j] = std::exp(d * scale);
      }
      for (int64_t j = 0; j <= t; ++j)
        for (int64_t i = 0; i < D; ++i) out[(t * H + h) * D + i] += s[j] / sum * v[(j * Hkv + kh) * D + i];
    }
  return out;
}

TEST(TrainOps, CausalAttentionGradientsWithGroupedHeads) {
  const int64_t T = 6, H = 4, Hkv = 2, D = 4;
  const double scale = 1.0 / std::sqrt(double(D));
  Vec q = random_vec(T * H * D, 15), k = random_vec(T * Hkv * D, 16), v = random_vec(T * Hkv * D, 17),
      g = random_vec(T * H * D, 18), out(T * H * D), lse(T * H);
  ThreadPool pool(2);
  auto loss = [&] {
    attention_forward(q.data(), k.data(), v.data(), T, H, Hkv, D, scale, out.data(), lse.data(), pool);
    return dot(g, out);
  };
  loss();
  const Vec want = naive_attention(q, k, v, T, H, Hkv, D, scale);
  for (size_t i = 0; i < out.size(); ++i) EXPECT_NEAR(out[i], want[i], 1e-12);
  Vec dq(q.size(), 0.0), dk(k.size(), 0.0), dv(v.size(), 0.0);
  attention_backward(g.data(), q.data(), k.data(), v.data(), out.data(), lse.data(), T, H, Hkv, D, scale, dq.data(),
                     dk.data(), dv.data(), pool);
  expect_gradient(q, loss, dq, "dq");
  expect_gradient(k, loss, dk, "dk");
  expect_gradient(v, loss, dv, "dv");
  // 1 vs 2 threads (out and lse again of the unperturbed inputs).
  loss();
  Vec dk1(k.size(), 0.0), dq1(q.size(), 0.0), dv1(v.size(), 0.0);
  ThreadPool one(1);
  attention_backward(g.data(), q.data(), k.data(), v.data(), out.data(), lse.data(), T, H, Hkv, D, scale, dq1.data(),
                     dk1.data(), dv1.data(), one);
  EXPECT_EQ(dk1, dk);
  EXPECT_EQ(dq1, dq);
  EXPECT_EQ(dv1, dv);
}

TEST(TrainOps, CrossEntropyGradientSkipsUnscoredRows) {
  const int64_t T = 4, V = 6;
  const std::vector<int32_t> targets = {2, -1, 5, 0};
  Vec z = random_vec(T * V, 19, 2.0);
  auto loss = [&] { return cross_entropy<double>(z.data(), targets.data(), T, V, nullptr); };
  // Mean over the 3 scored rows of log Σ exp − z_target.
  double want = 0;
  for (int64_t t : {0, 2, 3}) {
    double s = 0;
    for (int64_t i = 0; i < V; ++i) s += std::exp(z[t * V + i]);
    want += std::log(s) - z[t * V + targets[t]];
  }
  EXPECT_NEAR(loss(), want / 3, 1e-12);
  Vec dz(T * V, 0.0);
  cross_entropy(z.data(), targets.data(), T, V, dz.data());
  for (int64_t i = 0; i < V; ++i) EXPECT_EQ(dz[1 * V + i], 0.0);
  expect_gradient(z, loss, dz, "dlogits");
}

TEST(TrainOps, DistillationKlGradientAtSeveralTemperatures) {
  const int64_t T = 3, V = 7;
  for (double tau : {1.0, 2.0, 0.5}) {
    SCOPED_TRACE(tau);
    Vec s = random_vec(T * V, 20, 2.0), t = random_vec(T * V, 21, 2.0);
    auto loss = [&] { return kl_distill<double>(s.data(), t.data(), T, V, tau, nullptr); };
    EXPECT_GT(loss(), 0.0);
    EXPECT_NEAR(kl_distill<double>(t.data(), t.data(), T, V, tau, nullptr), 0.0, 1e-12);  // a student equal to its teacher
    Vec ds(T * V, 0.0);
    kl_distill(s.data(), t.data(), T, V, tau, ds.data());
    expect_gradient(s, loss, ds, "dstudent");
  }
}

}  // namespace
}  // namespace tern::train
