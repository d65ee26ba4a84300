// GPTQ (quant/gptq.h) against a straightforward double-precision
// implementation written here from the paper — explicit inverse by
// Gauss-Jordan, Cholesky of the inverse, lazy batches of one block with the
// batch's error applied to the rest afterwards — making the same choices
// (damping, dead channels, one weighted scale fit per block when the loop
// reaches it); and its layer-output error against round-to-nearest.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "core/thread_pool.h"
#include "quant/block_codec.h"
#include "quant/gptq.h"
#include "quant/k_grid.h"
#include "quant/quant.h"
#include "obs_reference.h"
#include "quant_test_data.h"

namespace tern::quant {
namespace {

using gguf::GgmlType;

// W with dead columns zeroed, and each column's importance diag(H) into `importance`.
Matrix starting_weights(const Layer& l, std::vector<float>& importance) {
  const int n = l.n_cols;
  importance.resize(n);
  Matrix w(l.n_rows, std::vector<double>(n));
  for (int j = 0; j < n; ++j) importance[j] = static_cast<float>(l.h[static_cast<size_t>(j) * n + j]);
  for (int r = 0; r < l.n_rows; ++r)
    for (int j = 0; j < n; ++j) w[r][j] = importance[j] == 0.0f ? 0.0 : l.w[static_cast<size_t>(r) * n + j];
  return w;
}

// The paper's loop with lazy batches of one block.
std::vector<uint8_t> reference_gptq(const BlockCodec& c, const Layer& l, double damp) {
  const int n = l.n_cols, be = c.block_elems;
  const Matrix u = reference_factor(l, damp);
  std::vector<float> importance;
  Matrix w = starting_weights(l, importance);
  const size_t row_bytes = quant::row_bytes(*traits(c.type), n);
  std::vector<uint8_t> out(row_bytes * l.n_rows);
  for (int i1 = 0; i1 < n; i1 += be) {
    const int i2 = i1 + be;
    Matrix err(l.n_rows, std::vector<double>(be));
    for (int r = 0; r < l.n_rows; ++r) {
      std::vector<float> block(w[r].begin() + i1, w[r].begin() + i2);
      const BlockFit f = fit_block(c, block.data(), importance.data() + i1);
      std::vector<double> w1(w[r].begin() + i1, w[r].begin() + i2);
      std::vector<uint8_t> q(be);
      for (int i = 0; i < be; ++i) {
        q[i] = static_cast<uint8_t>(nearest_index(c, f, static_cast<float>(w1[i])));
        const double e = (w1[i] - level(c, f, q[i])) / u[i1 + i][i1 + i];
        for (int k = i + 1; k < be; ++k) w1[k] -= e * u[i1 + i][i1 + k];
        err[r][i] = e;
      }
      store_block(c, f, q.data(), out.data() + r * row_bytes + (i1 / be) * traits(c.type)->block_bytes);
    }
    for (int r = 0; r < l.n_rows; ++r)
      for (int k = i2; k < n; ++k) {
        double s = 0;
        for (int i = 0; i < be; ++i) s += err[r][i] * u[i1 + i][k];
        w[r][k] -= s;
      }
  }
  return out;
}

// sum over samples and rows of ((W - Ŵ) x)².
double output_error(const Layer& l, GgmlType type, const std::vector<uint8_t>& bytes) {
  const size_t row_bytes = quant::row_bytes(*traits(type), l.n_cols);
  std::vector<float> wq(l.n_cols);
  double e = 0;
  for (int r = 0; r < l.n_rows; ++r) {
    traits(type)->to_float(bytes.data() + r * row_bytes, wq.data(), l.n_cols);
    for (int s = 0; s < l.n_samples; ++s) {
      double d = 0;
      for (int j = 0; j < l.n_cols; ++j)
        d += (static_cast<double>(l.w[static_cast<size_t>(r) * l.n_cols + j]) - wq[j]) *
             l.x[static_cast<size_t>(s) * l.n_cols + j];
      e += d * d;
    }
  }
  return e;
}

std::vector<uint8_t> run_gptq(const BlockCodec& c, const Layer& l, int threads, bool refine = true) {
  ThreadPool pool(threads);
  std::vector<uint8_t> out(quant::row_bytes(*traits(c.type), l.n_cols) * l.n_rows);
  EXPECT_TRUE(gptq_encode(c, l.w, l.n_rows, l.n_cols, l.h, {.damp = 0.01, .refine = refine}, out.data(), pool));
  return out;
}

TEST(Gptq, InverseFactorMatchesGaussJordanAndCholesky) {
  const Layer l = make_layer(4, 64, 300, 3, /*dead_col=*/5);
  auto u = gptq_inverse_factor(l.h, l.n_cols, 0.01);
  ASSERT_TRUE(u);
  const Matrix ref = reference_factor(l, 0.01);
  double max_rel = 0;
  for (int i = 0; i < l.n_cols; ++i)
    for (int j = 0; j < l.n_cols; ++j) {
      const double a = (*u)[static_cast<size_t>(i) * l.n_cols + j], b = ref[i][j];
      if (j < i) {
        EXPECT_EQ(a, 0.0);
      }
      max_rel = std::max(max_rel, std::fabs(a - b) / (std::fabs(ref[j][j]) + 1e-300));
    }
  EXPECT_LT(max_rel, 1e-9);
}

TEST(Gptq, SameChoicesAsTheStraightforwardImplementation) {
  for (GgmlType type : {GgmlType::Q4_0, GgmlType::Q4_1, GgmlType::Q5_0, GgmlType::Q8_0, GgmlType::IQ4_NL, GgmlType::MXFP4}) {
    const BlockCodec& c = *block_codec(type);
    const Layer l = make_layer(40, 96, 256, 17 + static_cast<int>(type), /*dead_col=*/33);
    const auto ref = reference_gptq(c, l, 0.01);
    for (int threads : {1, 3}) {
      const auto ours = run_gptq(c, l, threads, /*refine=*/false);
      size_t diff = 0;
      for (size_t i = 0; i < ref.size(); ++i) diff += ours[i] != ref[i];
      EXPECT_EQ(diff, 0u) << gguf::type_name(type) << " threads " << threads;
    }
  }
}

TEST(Gptq, LayerOutputErrorBelowRoundToNearestOnEverySeed) {
  for (GgmlType type : {GgmlType::Q4_0, GgmlType::Q4_1, GgmlType::Q5_0, GgmlType::Q8_0, GgmlType::IQ4_NL, GgmlType::MXFP4}) {
    const BlockCodec& c = *block_codec(type);
    for (uint64_t seed = 1; seed <= 4; ++seed) {
      const Layer l = make_layer(32, 128, 512, 1000 * seed + static_cast<int>(type));
      std::vector<uint8_t> rtn(quant::row_bytes(*traits(type), l.n_cols) * l.n_rows);
      for (int r = 0; r < l.n_rows; ++r)
        traits(type)->from_float(&l.w[static_cast<size_t>(r) * l.n_cols],
                                 rtn.data() + r * quant::row_bytes(*traits(type), l.n_cols), l.n_cols);
      const double e_rtn = output_error(l, type, rtn), e_gptq = output_error(l, type, run_gptq(c, l, 2));
      EXPECT_LT(e_gptq, 0.7 * e_rtn) << gguf::type_name(type) << " seed " << seed;
    }
  }
}

TEST(Gptq, RefinementOnlyLowersTheLayerOutputError) {
  for (GgmlType type : {GgmlType::Q4_0, GgmlType::Q4_1, GgmlType::Q5_1, GgmlType::IQ4_NL, GgmlType::MXFP4}) {
    const BlockCodec& c = *block_codec(type);
    double plain_total = 0, refined_total = 0;
    for (uint64_t seed = 1; seed <= 3; ++seed) {
      const Layer l = make_layer(32, 128, 512, 500 * seed + static_cast<int>(type));
      const double plain = output_error(l, type, run_gptq(c, l, 2, false));
      const double refined = output_error(l, type, run_gptq(c, l, 2, true));
      // Measured on the decoded bytes: the decoder's float rounding of a level may differ in the last bit.
      EXPECT_LE(refined, plain * (1 + 1e-9)) << gguf::type_name(type) << " seed " << seed;
      plain_total += plain;
      refined_total += refined;
    }
    EXPECT_LT(refined_total, 0.97 * plain_total) << gguf::type_name(type);
  }
  // The same bytes whatever the number of threads, refinement included.
  const Layer l = make_layer(40, 96, 256, 77);
  EXPECT_EQ(run_gptq(*block_codec(GgmlType::Q4_0), l, 1), run_gptq(*block_codec(GgmlType::Q4_0), l, 3));
}

TEST(Gptq, DeadChannelsAreZeroedAndShapesChecked) {
  const BlockCodec& c = *block_codec(GgmlType::Q4_0);
  const Layer l = make_layer(8, 64, 100, 9, /*dead_col=*/7);
  const auto out = run_gptq(c, l, 2);
  std::vector<float> row(64);
  for (int r = 0; r < 8; ++r) {
    traits(GgmlType::Q4_0)->to_float(out.data() + r * quant::row_bytes(*traits(GgmlType::Q4_0), 64), row.data(), 64);
    EXPECT_EQ(row[7], 0.0f) << "row " << r;
  }
  ThreadPool pool(1);
  std::vector<uint8_t> sink(1 << 16);
  EXPECT_FALSE(gptq_encode(c, l.w, 8, 48, l.h, {}, sink.data(), pool));       // 48 is not whole blocks
  EXPECT_FALSE(gptq_encode(c, l.w, 8, 64, {l.h.data(), 10}, {}, sink.data(), pool));  // H of the wrong size
}

// ---- K-quants (gptq_encode_k, quant/k_grid.h) ----------------------------------

constexpr GgmlType kKTypes[] = {GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K};

// Every quant written through k_grid_set decodes, by the type's own decoder, to
// the grid's level for it: the bit layout and the scales agree with the format.
TEST(GptqK, GridQuantsDecodeToTheirLevels) {
  for (GgmlType type : kKTypes) {
    test::Lcg rng(5 + static_cast<int>(type));
    std::vector<float> x(256), decoded(256);
    for (auto& v : x) v = rng.normal();
    std::vector<uint8_t> block(traits(type)->block_bytes);
    const KGrid g = k_grid_fit(type, x.data(), nullptr, block.data());
    std::vector<int> q(256);
    for (int e = 0; e < 256; ++e) {
      q[e] = g.qmin + static_cast<int>(rng.next_u32() % static_cast<uint32_t>(g.qmax - g.qmin + 1));
      k_grid_set(type, block.data(), e, q[e]);
    }
    traits(type)->to_float(block.data(), decoded.data(), 256);
    for (int e = 0; e < 256; ++e) ASSERT_EQ(decoded[e], g.level(e, q[e])) << gguf::type_name(type) << " e " << e;
    // nearest() is nearest on the grid.
    for (int e = 0; e < 256; e += 7) {
      const int n = g.nearest(e, x[e]);
      for (int c = g.qmin; c <= g.qmax; ++c)
        ASSERT_LE(std::fabs(g.level(e, n) - x[e]), std::fabs(g.level(e, c) - x[e]) + 1e-6f) << gguf::type_name(type);
    }
  }
}

// The paper's loop with lazy batches of one super-block, the super-block's grid
// fitted (k_grid_fit under diag H) when the loop reaches it.
std::vector<uint8_t> reference_gptq_k(GgmlType type, const Layer& l, double damp) {
  const int n = l.n_cols, be = 256;
  const Matrix u = reference_factor(l, damp);
  std::vector<float> importance;
  Matrix w = starting_weights(l, importance);
  const size_t row_bytes = quant::row_bytes(*traits(type), n), bb = traits(type)->block_bytes;
  std::vector<uint8_t> out(row_bytes * l.n_rows);
  for (int i1 = 0; i1 < n; i1 += be) {
    Matrix err(l.n_rows, std::vector<double>(be));
    for (int r = 0; r < l.n_rows; ++r) {
      uint8_t* blk = out.data() + r * row_bytes + (i1 / be) * bb;
      std::vector<float> cur(w[r].begin() + i1, w[r].begin() + i1 + be);
      const KGrid g = k_grid_fit(type, cur.data(), importance.data() + i1, blk);
      std::vector<double> w1(w[r].begin() + i1, w[r].begin() + i1 + be);
      for (int i = 0; i < be; ++i) {
        const int q = g.nearest(i, static_cast<float>(w1[i]));
        k_grid_set(type, blk, i, q);
        const double e = (w1[i] - g.level(i, q)) / u[i1 + i][i1 + i];
        for (int k = i + 1; k < be; ++k) w1[k] -= e * u[i1 + i][i1 + k];
        err[r][i] = e;
      }
    }
    for (int r = 0; r < l.n_rows; ++r)
      for (int k = i1 + be; k < n; ++k) {
        double s = 0;
        for (int i = 0; i < be; ++i) s += err[r][i] * u[i1 + i][k];
        w[r][k] -= s;
      }
  }
  return out;
}

std::vector<uint8_t> run_gptq_k(GgmlType type, const Layer& l, int threads) {
  ThreadPool pool(threads);
  std::vector<uint8_t> out(quant::row_bytes(*traits(type), l.n_cols) * l.n_rows);
  EXPECT_TRUE(gptq_encode_k(type, l.w, l.n_rows, l.n_cols, l.h, {.damp = 0.01}, out.data(), pool));
  return out;
}

TEST(GptqK, SameChoicesAsTheStraightforwardImplementation) {
  for (GgmlType type : kKTypes) {
    const Layer l = make_layer(20, 512, 600, 23 + static_cast<int>(type), /*dead_col=*/300);
    const auto ref = reference_gptq_k(type, l, 0.01);
    for (int threads : {1, 3}) {
      const auto ours = run_gptq_k(type, l, threads);
      size_t diff = 0;
      for (size_t i = 0; i < ref.size(); ++i) diff += ours[i] != ref[i];
      EXPECT_EQ(diff, 0u) << gguf::type_name(type) << " threads " << threads;
    }
  }
}

// Against both roundings tern has for K-quants without GPTQ: ggml's plain one and the
// importance-weighted one (diag H, what --method imatrix does).
TEST(GptqK, LayerOutputErrorBelowRoundToNearestAndImportanceOnEverySeed) {
  for (GgmlType type : kKTypes) {
    for (uint64_t seed = 1; seed <= 2; ++seed) {
      const Layer l = make_layer(16, 512, 600, 2000 * seed + static_cast<int>(type));
      const size_t row_bytes = quant::row_bytes(*traits(type), l.n_cols);
      std::vector<uint8_t> rtn(row_bytes * l.n_rows), imp(row_bytes * l.n_rows);
      std::vector<float> importance(l.n_cols);
      for (int j = 0; j < l.n_cols; ++j) importance[j] = static_cast<float>(l.h[static_cast<size_t>(j) * l.n_cols + j]);
      for (int r = 0; r < l.n_rows; ++r) {
        traits(type)->from_float(&l.w[static_cast<size_t>(r) * l.n_cols], rtn.data() + r * row_bytes, l.n_cols);
        encode_row_importance(type, &l.w[static_cast<size_t>(r) * l.n_cols], importance.data(), imp.data() + r * row_bytes,
                              l.n_cols);
      }
      const double e_rtn = output_error(l, type, rtn), e_imp = output_error(l, type, imp);
      const double e_gptq = output_error(l, type, run_gptq_k(type, l, 2));
      std::printf("%s seed %d: output error rtn %.4g, importance %.4g, gptq %.4g (%.2f of rtn)\n",
                  std::string(gguf::type_name(type)).c_str(), static_cast<int>(seed), e_rtn, e_imp, e_gptq, e_gptq / e_rtn);
      EXPECT_LT(e_gptq, 0.7 * e_rtn) << gguf::type_name(type) << " seed " << seed;
      EXPECT_LT(e_gptq, e_imp) << gguf::type_name(type) << " seed " << seed;
    }
  }
}

}  // namespace
}  // namespace tern::quant
