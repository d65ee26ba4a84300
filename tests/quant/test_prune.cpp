// Pruning (quant/prune.h): exact counts and patterns, the order each method
// zeroes by, SparseGPT against a straightforward implementation written here
// from the paper (explicit inverse, Cholesky, one row at a time), and the
// layer-output error each method leaves on calibration inputs.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "core/thread_pool.h"
#include "obs_reference.h"
#include "quant/prune.h"
#include "quant_test_data.h"

namespace tern::quant {
namespace {

std::vector<double> column_sq(const Layer& l) {
  std::vector<double> s(l.n_cols);
  for (int j = 0; j < l.n_cols; ++j) s[j] = l.h[static_cast<size_t>(j) * l.n_cols + j];
  return s;
}

std::vector<float> run(const Layer& l, PruneMethod m, double sparsity, NmPattern p = {}, int threads = 2) {
  ThreadPool pool(threads);
  std::vector<float> w = l.w;
  const PruneOptions o{.method = m, .sparsity = p.active() ? p.sparsity() : sparsity, .pattern = p};
  const std::vector<double> cs = column_sq(l);
  auto s = prune_matrix(o, w, l.n_rows, l.n_cols, cs, l.h, pool);
  EXPECT_TRUE(s) << s.message();
  return w;
}

int64_t zeros(const float* w, int64_t n) {
  int64_t z = 0;
  for (int64_t i = 0; i < n; ++i) z += w[i] == 0.0f ? 1 : 0;
  return z;
}

// sum over samples and rows of ((W - Ŵ) x)².
double output_error(const Layer& l, const std::vector<float>& pruned) {
  double e = 0;
  for (int r = 0; r < l.n_rows; ++r)
    for (int s = 0; s < l.n_samples; ++s) {
      double d = 0;
      for (int j = 0; j < l.n_cols; ++j) {
        const size_t i = static_cast<size_t>(r) * l.n_cols + j;
        d += (static_cast<double>(l.w[i]) - pruned[i]) * l.x[static_cast<size_t>(s) * l.n_cols + j];
      }
      e += d * d;
    }
  return e;
}

// The paper's loop one row at a time: per block, zero the smallest w² / U_jj²
// of the compensated weights, and spread each zeroed weight's error over the later columns.
std::vector<float> reference_sparsegpt(const Layer& l, double sparsity, NmPattern p, int64_t block, double damp) {
  const int n = l.n_cols;
  const Matrix u = reference_factor(l, damp);
  const int64_t group = p.active() ? p.m : block;
  std::vector<float> out(l.w.size());
  for (int r = 0; r < l.n_rows; ++r) {
    std::vector<double> w(n);
    for (int j = 0; j < n; ++j)
      w[j] = l.h[static_cast<size_t>(j) * n + j] == 0.0 ? 0.0 : l.w[static_cast<size_t>(r) * n + j];
    std::vector<bool> zero(n, false);
    for (int64_t g0 = 0; g0 < n; g0 += group) {
      const int64_t g1 = std::min<int64_t>(n, g0 + group);
      const int64_t k = p.active() ? p.m - p.n
                                   : std::llround(sparsity * static_cast<double>(g1)) -
                                         std::llround(sparsity * static_cast<double>(g0));
      // k times: the smallest score not yet taken (lowest index on ties).
      for (int64_t t = 0; t < k; ++t) {
        int64_t best = -1;
        for (int64_t j = g0; j < g1; ++j) {
          if (zero[j]) continue;
          const double sj = w[j] * w[j] / (u[j][j] * u[j][j]);
          if (best < 0 || sj < w[best] * w[best] / (u[best][best] * u[best][best])) best = j;
        }
        zero[best] = true;
      }
      for (int64_t i = g0; i < g1; ++i) {
        if (!zero[i]) continue;
        const double e = w[i] / u[i][i];
        for (int k2 = static_cast<int>(i) + 1; k2 < n; ++k2) w[k2] -= e * u[i][k2];
        w[i] = 0.0;
      }
    }
    for (int j = 0; j < n; ++j) out[static_cast<size_t>(r) * n + j] = static_cast<float>(w[j]);
  }
  return out;
}

TEST(Prune, CountsAreExactForEveryMethod) {
  const Layer l = make_layer(24, 200, 300, 11);  // 200 columns: SparseGPT's last block is short
  for (double s : {0.0, 0.3, 0.5, 0.77}) {
    const std::vector<float> mag = run(l, PruneMethod::Magnitude, s);
    EXPECT_EQ(zeros(mag.data(), mag.size()), std::llround(s * static_cast<double>(mag.size()))) << s;
    for (PruneMethod m : {PruneMethod::Wanda, PruneMethod::SparseGpt}) {
      const std::vector<float> w = run(l, m, s);
      for (int r = 0; r < l.n_rows; ++r)
        EXPECT_EQ(zeros(&w[static_cast<size_t>(r) * l.n_cols], l.n_cols), std::llround(s * l.n_cols))
            << prune_method_name(m) << " sparsity " << s << " row " << r;
    }
  }
}

TEST(Prune, PatternsLeaveAtMostNOfEveryM) {
  const Layer l = make_layer(16, 128, 200, 12);
  for (NmPattern p : {NmPattern{2, 4}, NmPattern{1, 4}, NmPattern{4, 8}})
    for (PruneMethod m : {PruneMethod::Magnitude, PruneMethod::Wanda, PruneMethod::SparseGpt}) {
      const std::vector<float> w = run(l, m, 0, p);
      for (size_t g = 0; g < w.size(); g += p.m)
        ASSERT_EQ(zeros(&w[g], p.m), p.m - p.n) << prune_method_name(m) << " " << p.text() << " group at " << g;
    }
}

TEST(Prune, MagnitudeAndWandaZeroTheSmallestScoresAndKeepTheRest) {
  const Layer l = make_layer(12, 96, 200, 13);
  const std::vector<double> cs = column_sq(l);
  // Magnitude: every zeroed |w| is at most every kept |w| over the whole matrix.
  const std::vector<float> mag = run(l, PruneMethod::Magnitude, 0.5);
  float max_zeroed = 0, min_kept = std::numeric_limits<float>::infinity();
  for (size_t i = 0; i < mag.size(); ++i) {
    if (mag[i] == 0.0f) max_zeroed = std::max(max_zeroed, std::fabs(l.w[i]));
    else {
      min_kept = std::min(min_kept, std::fabs(l.w[i]));
      EXPECT_EQ(mag[i], l.w[i]);
    }
  }
  EXPECT_LE(max_zeroed, min_kept);
  // Wanda: per row by |w|·‖x‖; kept weights unchanged.
  const std::vector<float> wanda = run(l, PruneMethod::Wanda, 0.5);
  for (int r = 0; r < l.n_rows; ++r) {
    double zeroed = 0, kept = std::numeric_limits<double>::infinity();
    for (int j = 0; j < l.n_cols; ++j) {
      const size_t i = static_cast<size_t>(r) * l.n_cols + j;
      const double score = std::fabs(l.w[i]) * std::sqrt(cs[j]);
      if (wanda[i] == 0.0f) zeroed = std::max(zeroed, score);
      else {
        kept = std::min(kept, score);
        EXPECT_EQ(wanda[i], l.w[i]);
      }
    }
    EXPECT_LE(zeroed, kept) << "row " << r;
  }
}

TEST(Prune, TiesGoToTheLowerIndex) {
  // Every weight the same magnitude: the first half of the matrix (and of each group) goes.
  Layer l = make_layer(4, 16, 40, 14);
  for (size_t i = 0; i < l.w.size(); ++i) l.w[i] = (i % 3 == 0) ? -0.5f : 0.5f;
  const std::vector<float> mag = run(l, PruneMethod::Magnitude, 0.5);
  for (size_t i = 0; i < mag.size(); ++i) EXPECT_EQ(mag[i] == 0.0f, i < mag.size() / 2) << i;
  const std::vector<float> nm = run(l, PruneMethod::Magnitude, 0, {2, 4});
  for (size_t i = 0; i < nm.size(); ++i) EXPECT_EQ(nm[i] == 0.0f, i % 4 < 2) << i;
}

TEST(Prune, SparseGptMatchesThePapersLoop) {
  for (uint64_t seed : {21, 22}) {
    const Layer l = make_layer(9, 160, 400, seed, /*dead_col=*/7);
    struct Case {
      double sparsity;
      NmPattern p;
      int64_t block;
    };
    for (const Case c : {Case{0.5, {}, 128}, Case{0.6, {}, 32}, Case{0, {2, 4}, 128}}) {
      ThreadPool pool(3);
      std::vector<float> w = l.w;
      const PruneOptions o{.method = PruneMethod::SparseGpt,
                           .sparsity = c.p.active() ? c.p.sparsity() : c.sparsity,
                           .pattern = c.p,
                           .damp = 0.01,
                           .block_cols = c.block};
      ASSERT_TRUE(prune_matrix(o, w, l.n_rows, l.n_cols, {}, l.h, pool));
      const std::vector<float> ref = reference_sparsegpt(l, o.sparsity, c.p, c.block, 0.01);
      double scale = 0;
      for (float v : ref) scale = std::max(scale, std::fabs(static_cast<double>(v)));
      for (size_t i = 0; i < w.size(); ++i) {
        ASSERT_EQ(w[i] == 0.0f, ref[i] == 0.0f) << "seed " << seed << " element " << i;
        ASSERT_NEAR(w[i], ref[i], 1e-5 * scale) << "seed " << seed << " element " << i;
      }
      // The dead input column is zero in every row.
      for (int r = 0; r < l.n_rows; ++r) EXPECT_EQ(w[static_cast<size_t>(r) * l.n_cols + 7], 0.0f);
    }
  }
}

TEST(Prune, CalibratedMethodsLeaveLessLayerOutputErrorOnEverySeed) {
  for (uint64_t seed = 31; seed < 35; ++seed) {
    const Layer l = make_layer(32, 128, 512, seed);
    for (NmPattern p : {NmPattern{}, NmPattern{2, 4}}) {
      const double mag = output_error(l, run(l, PruneMethod::Magnitude, 0.5, p));
      const double wanda = output_error(l, run(l, PruneMethod::Wanda, 0.5, p));
      const double sgpt = output_error(l, run(l, PruneMethod::SparseGpt, 0.5, p));
      EXPECT_LT(wanda, mag) << "seed " << seed << " pattern " << p.text();
      EXPECT_LT(sgpt, wanda) << "seed " << seed << " pattern " << p.text();
    }
  }
}

TEST(Prune, ResultDoesNotDependOnTheThreadCount) {
  const Layer l = make_layer(40, 96, 200, 41);
  for (PruneMethod m : {PruneMethod::Magnitude, PruneMethod::Wanda, PruneMethod::SparseGpt}) {
    const std::vector<float> one = run(l, m, 0.45, {}, 1), three = run(l, m, 0.45, {}, 3);
    EXPECT_EQ(one, three) << prune_method_name(m);
  }
}

TEST(Prune, SparsityZeroChangesNothing) {
  const Layer l = make_layer(8, 64, 100, 42);
  for (PruneMethod m : {PruneMethod::Magnitude, PruneMethod::Wanda, PruneMethod::SparseGpt})
    EXPECT_EQ(run(l, m, 0.0), l.w) << prune_method_name(m);
}

TEST(Prune, BadInputsAreClearErrors) {
  ThreadPool pool(1);
  const Layer l = make_layer(4, 64, 80, 43);
  std::vector<float> w = l.w;
  const std::vector<double> cs = column_sq(l);
  auto fails = [&](PruneOptions o, std::span<float> ww, int64_t cols, std::span<const double> c, std::span<const double> h,
                   const std::string& says) {
    auto s = prune_matrix(o, ww, static_cast<int64_t>(ww.size()) / cols, cols, c, h, pool);
    EXPECT_FALSE(s);
    EXPECT_NE(s.message().find(says), std::string::npos) << s.message();
  };
  fails({.method = PruneMethod::Magnitude, .sparsity = 1.0}, w, 64, {}, {}, "[0, 1)");
  fails({.method = PruneMethod::Magnitude, .sparsity = -0.1}, w, 64, {}, {}, "[0, 1)");
  fails({.method = PruneMethod::Magnitude, .sparsity = 0.5, .pattern = {2, 4}}, std::span<float>(w).first(4 * 62), 62, {},
        {}, "groups of 4");
  fails({.method = PruneMethod::Magnitude, .sparsity = 0.3, .pattern = {2, 4}}, w, 64, {}, {}, "not 0.3");
  fails({.method = PruneMethod::Wanda, .sparsity = 0.5}, w, 64, std::span<const double>(cs).first(10), {}, "64 input columns");
  fails({.method = PruneMethod::SparseGpt, .sparsity = 0.5}, w, 64, {}, {}, "needs H");
  std::vector<float> bad = l.w;
  bad[5] = std::numeric_limits<float>::quiet_NaN();
  fails({.method = PruneMethod::Magnitude, .sparsity = 0.5}, bad, 64, {}, {}, "not finite");
  std::vector<double> bad_cs = cs;
  bad_cs[3] = std::numeric_limits<double>::infinity();
  fails({.method = PruneMethod::Wanda, .sparsity = 0.5}, w, 64, bad_cs, {}, "not finite");
  EXPECT_EQ(w, l.w);  // a failed call leaves the weights alone

  for (const char* text : {"2", "2:", ":4", "4:4", "0:4", "2:4x", "3:64", "-1:4", "2:4:8", ""})
    EXPECT_FALSE(parse_nm_pattern(text)) << text;
  auto p = parse_nm_pattern("2:4");
  ASSERT_TRUE(p);
  EXPECT_EQ(p->n, 2);
  EXPECT_EQ(p->m, 4);
  EXPECT_DOUBLE_EQ(p->sparsity(), 0.5);
  EXPECT_FALSE(parse_prune_method("random"));
  EXPECT_EQ(*parse_prune_method("sparsegpt"), PruneMethod::SparseGpt);
}

}  // namespace
}  // namespace tern::quant
