// Round-trip error budgets, monotonicity, vec_dot agreement, traits sizes and
// edge cases, for every quantized type.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <string>
#include <string_view>
#include <vector>

#include "quant/quant.h"
#include "quant_test_data.h"

namespace tern::quant {
namespace {

using test::normal_row;

const GgmlType kQuantTypes[] = {GgmlType::Q4_0, GgmlType::Q4_1, GgmlType::Q5_0, GgmlType::Q5_1,
                                GgmlType::Q8_0, GgmlType::Q8_1, GgmlType::IQ4_NL, GgmlType::Q2_K,
                                GgmlType::Q3_K, GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K,
                                GgmlType::Q8_K, GgmlType::IQ4_XS};

const TypeTraits& tr_of(GgmlType t) {
  const TypeTraits* tr = traits(t);
  EXPECT_NE(tr, nullptr) << gguf::type_name(t);
  return *tr;
}

std::vector<float> round_trip(GgmlType t, const std::vector<float>& x) {
  const TypeTraits& tr = tr_of(t);
  const auto n = static_cast<int64_t>(x.size());
  std::vector<uint8_t> q(row_bytes(tr, n));
  std::vector<float> y(x.size());
  tr.from_float(x.data(), q.data(), n);
  tr.to_float(q.data(), y.data(), n);
  return y;
}

// RMS of the error over RMS of the data.
double relative_rmse(const std::vector<float>& x, const std::vector<float>& y) {
  double se = 0.0, ss = 0.0;
  for (size_t i = 0; i < x.size(); ++i) {
    se += (static_cast<double>(x[i]) - y[i]) * (static_cast<double>(x[i]) - y[i]);
    ss += static_cast<double>(x[i]) * x[i];
  }
  return std::sqrt(se / ss);
}

double measured_error(GgmlType t, uint64_t seed = 1) {
  const auto x = normal_row(256 * 64, seed);
  return relative_rmse(x, round_trip(t, x));
}

// Budgets on rows of 16384 approximately-N(0,1) values (relative RMSE). Our
// quantizers emit the same bytes as ggml's reference ones, so these are ggml's
// figures too. Measured over seeds 1-4 (the data are bit-reproducible, so the
// spread is seed-to-seed only, < 2%):
//   Q8_0 0.52-0.53%   Q8_1 0.52-0.53%   Q8_K 0.67-0.68%   Q6_K 1.74-1.76%
//   Q5_K 3.55-3.58%   Q5_1 3.71-3.75%   Q5_0 4.13-4.22%   Q4_K 6.96-7.09%
//   IQ4_NL 7.49-7.58% Q4_1 7.65-7.75%   Q4_0 8.36-8.52%   Q3_K 14.7-14.9%
//   Q2_K 29.0-29.5%   IQ4_XS 7.55-7.62% (seeds 1-2: IQ4_NL's grid at 4.25 bits against its 4.5)
// Budgets sit ~15% above the worst seed: a change that costs a sixth more error
// fails here, while the golden test pins the exact bytes. The floor comes from
// the bits and block statistics, e.g. Q8_0: step amax/127 with amax ~ 2.2 sigma
// for 32 normals gives 2.2/127/sqrt(12) ~ 0.5%.
struct Budget {
  GgmlType type;
  double max_rel_rmse;
};
const Budget kBudgets[] = {
    {GgmlType::Q8_0, 0.0061}, {GgmlType::Q8_1, 0.0061}, {GgmlType::Q8_K, 0.0079}, {GgmlType::Q6_K, 0.020},
    {GgmlType::Q5_K, 0.041},  {GgmlType::Q5_1, 0.043},  {GgmlType::Q5_0, 0.049},  {GgmlType::Q4_K, 0.082},
    {GgmlType::IQ4_NL, 0.087}, {GgmlType::Q4_1, 0.089}, {GgmlType::Q4_0, 0.098},  {GgmlType::Q3_K, 0.172},
    {GgmlType::Q2_K, 0.339},  {GgmlType::IQ4_XS, 0.088},
};

TEST(QuantAccuracy, RoundTripWithinBudget) {
  for (const Budget& b : kBudgets) {
    for (uint64_t seed : {1, 2}) {
      const double err = measured_error(b.type, seed);
      std::printf("  %-6s seed %d: relative RMSE %.3f%% (budget %.2f%%)\n", tr_of(b.type).name, static_cast<int>(seed),
                  100.0 * err, 100.0 * b.max_rel_rmse);
      EXPECT_LE(err, b.max_rel_rmse) << tr_of(b.type).name;
      EXPECT_GT(err, 0.0) << tr_of(b.type).name;  // a lossless "quantizer" means the test is broken
    }
  }
}

// More bits, less error: within each family and across the K-quant ladder.
TEST(QuantAccuracy, MoreBitsLessError) {
  const GgmlType ladders[][6] = {
      {GgmlType::Q2_K, GgmlType::Q3_K, GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K, GgmlType::Q8_K},
      {GgmlType::Q4_0, GgmlType::Q5_0, GgmlType::Q8_0, GgmlType::Q8_0, GgmlType::Q8_0, GgmlType::Q8_0},
      {GgmlType::Q4_1, GgmlType::Q5_1, GgmlType::Q8_0, GgmlType::Q8_0, GgmlType::Q8_0, GgmlType::Q8_0},
      {GgmlType::Q3_K, GgmlType::Q4_0, GgmlType::Q5_0, GgmlType::Q6_K, GgmlType::Q8_0, GgmlType::Q8_0},
  };
  for (const auto& ladder : ladders) {
    for (int i = 0; i + 1 < 6; ++i) {
      if (ladder[i] == ladder[i + 1]) continue;
      EXPECT_GT(measured_error(ladder[i]), measured_error(ladder[i + 1]))
          << tr_of(ladder[i]).name << " vs " << tr_of(ladder[i + 1]).name;
    }
  }
  // Same bits, better fit: IQ4_NL's non-uniform grid and Q4_K's searched scales beat Q4_0.
  EXPECT_LT(measured_error(GgmlType::IQ4_NL), measured_error(GgmlType::Q4_0));
  EXPECT_LT(measured_error(GgmlType::Q4_K), measured_error(GgmlType::Q4_1));
  EXPECT_LT(measured_error(GgmlType::Q5_K), measured_error(GgmlType::Q5_1));
}

// Real weights (stories260K's token embeddings, 512 x 64 f32) behave like the
// synthetic rows: the K ladder is monotone and every type stays within 1.25x its
// normal-data budget (measured: Q2_K 34.1%, Q3_K 15.3%, Q4_K 7.8%, Q6_K 1.75%,
// Q8_0 0.55%; embeddings have slightly heavier tails than N(0,1)).
TEST(QuantAccuracy, RealWeights) {
  const std::string path = std::string(TERN_SHARED_DIR) + "/models/stories260K/stories260K.bin";
  std::ifstream f(path, std::ios::binary);
  if (!f) GTEST_SKIP() << "absent: " << path;
  int32_t header[7];
  f.read(reinterpret_cast<char*>(header), sizeof(header));
  const int64_t n = static_cast<int64_t>(header[5]) * header[0];  // vocab * dim
  ASSERT_EQ(n, 512 * 64);
  std::vector<float> x(static_cast<size_t>(n));
  f.read(reinterpret_cast<char*>(x.data()), n * static_cast<int64_t>(sizeof(float)));
  ASSERT_TRUE(f.good());
  double prev = 1.0;
  for (GgmlType t : {GgmlType::Q2_K, GgmlType::Q3_K, GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K, GgmlType::Q8_0}) {
    const double err = relative_rmse(x, round_trip(t, x));
    EXPECT_LT(err, prev) << tr_of(t).name;
    prev = err;
  }
  for (const Budget& b : kBudgets) EXPECT_LE(relative_rmse(x, round_trip(b.type, x)), 1.25 * b.max_rel_rmse) << tr_of(b.type).name;
}

// vec_dot equals the dot product of the decoded row with x. The reference
// sums in f32 with the scales factored out, so it differs from the f64 dot of
// the decoded values by rounding only: budget 1e-6 of sum |w_i x_i| (measured
// <= 2e-8 at n = 16384; a wrong element or scale costs orders of magnitude more).
TEST(QuantAccuracy, VecDotMatchesDecodedDot) {
  const int n = 256 * 64;
  const auto w = normal_row(n, 11), x = normal_row(n, 12);
  for (GgmlType t : kQuantTypes) {
    const TypeTraits& tr = tr_of(t);
    std::vector<uint8_t> q(row_bytes(tr, n));
    std::vector<float> deq(n);
    tr.from_float(w.data(), q.data(), n);
    tr.to_float(q.data(), deq.data(), n);
    double want = 0.0, magnitude = 0.0;
    for (int i = 0; i < n; ++i) {
      want += static_cast<double>(deq[i]) * x[i];
      magnitude += std::fabs(static_cast<double>(deq[i]) * x[i]);
    }
    EXPECT_NEAR(tr.vec_dot(q.data(), x.data(), n), want, 1e-6 * magnitude) << tr.name;
  }
}

// vec_dot also covers partial rows: one block at a time, each on its own.
TEST(QuantAccuracy, VecDotPerBlock) {
  for (GgmlType t : kQuantTypes) {
    const TypeTraits& tr = tr_of(t);
    const int n = static_cast<int>(tr.block_elems) * 3;
    const auto w = normal_row(n, 21), x = normal_row(n, 22);
    std::vector<uint8_t> q(row_bytes(tr, n));
    std::vector<float> deq(n);
    tr.from_float(w.data(), q.data(), n);
    tr.to_float(q.data(), deq.data(), n);
    float total = 0.0f;
    for (int b = 0; b < 3; ++b) {
      const int off = b * static_cast<int>(tr.block_elems);
      double want = 0.0, magnitude = 0.0;
      for (int i = off; i < off + static_cast<int>(tr.block_elems); ++i) {
        want += static_cast<double>(deq[i]) * x[i];
        magnitude += std::fabs(static_cast<double>(deq[i]) * x[i]);
      }
      const float got = tr.vec_dot(q.data() + b * tr.block_bytes, x.data() + off, tr.block_elems);
      EXPECT_NEAR(got, want, 1e-6 * magnitude) << tr.name << " block " << b;
      total += got;
    }
    EXPECT_NEAR(tr.vec_dot(q.data(), x.data(), n), total, 1e-5 * (std::fabs(total) + 1.0)) << tr.name;
  }
}

TEST(QuantAccuracy, TraitsAgreeWithGgufSizes) {
  for (GgmlType t : kQuantTypes) {
    const TypeTraits& tr = tr_of(t);
    const auto s = gguf::type_size(static_cast<uint32_t>(t));
    ASSERT_TRUE(s.has_value()) << tr.name;
    EXPECT_EQ(tr.type, t);
    EXPECT_EQ(tr.block_elems, s->block_elems) << tr.name;
    EXPECT_EQ(tr.block_bytes, s->block_bytes) << tr.name;
    EXPECT_EQ(std::string_view(tr.name), s->name);
    EXPECT_NE(tr.to_float, nullptr);
    EXPECT_NE(tr.from_float, nullptr);
    EXPECT_NE(tr.vec_dot, nullptr);
    const TypeTraits* act = traits(tr.vec_dot_type);
    ASSERT_NE(act, nullptr) << tr.name;
    EXPECT_EQ(tr.block_elems % act->block_elems, 0u) << tr.name;  // x quantizes block for block
  }
}

// ---- edge cases -------------------------------------------------------------------

bool all_finite(const std::vector<float>& y) {
  for (float v : y)
    if (!std::isfinite(v)) return false;
  return true;
}

int64_t elems_for(GgmlType t) { return 2 * static_cast<int64_t>(tr_of(t).block_elems); }

TEST(QuantEdge, ZerosDecodeToZeros) {
  for (GgmlType t : kQuantTypes) {
    const std::vector<float> x(static_cast<size_t>(elems_for(t)), 0.0f);
    const auto y = round_trip(t, x);
    for (size_t i = 0; i < y.size(); ++i) ASSERT_EQ(y[i], 0.0f) << tr_of(t).name << " at " << i;
    const std::vector<float> ones(x.size(), 1.0f);
    std::vector<uint8_t> q(row_bytes(tr_of(t), elems_for(t)));
    tr_of(t).from_float(x.data(), q.data(), elems_for(t));
    EXPECT_EQ(tr_of(t).vec_dot(q.data(), ones.data(), elems_for(t)), 0.0f) << tr_of(t).name;
  }
}

// A constant block is representable by every type up to its scales' precision.
// At |c| >= 0.7 that is fp16 rounding (2^-11) plus the scale grid: measured
// <= 0.04%, budget 0.2%. At |c| = 3e-3 Q6_K's super-scale c/4096 ~ 7e-7 is an
// fp16 subnormal with a coarse step (re-choosing quants against it recovers
// most): measured 2.3%, budget 3%; all other types <= 0.9% there.
TEST(QuantEdge, ConstantBlock) {
  const struct {
    float c, tol;
  } cases[] = {{0.7f, 0.002f}, {-0.7f, 0.002f}, {250.0f, 0.002f}, {3e-3f, 0.03f}, {-3e-3f, 0.03f}};
  for (GgmlType t : kQuantTypes) {
    for (const auto& k : cases) {
      const std::vector<float> x(static_cast<size_t>(elems_for(t)), k.c);
      const auto y = round_trip(t, x);
      ASSERT_TRUE(all_finite(y)) << tr_of(t).name << " c=" << k.c;
      for (size_t i = 0; i < y.size(); ++i) ASSERT_NEAR(y[i], k.c, k.tol * std::fabs(k.c)) << tr_of(t).name << " c=" << k.c;
    }
  }
}

// Tiny magnitudes never blow up. Known limit shared with ggml (same bytes): a
// Q6_K super-block whose scale amax/4096 falls below half the smallest fp16
// subnormal (2^-25) stores d = 0 and decodes to zeros, and so does an IQ4_XS one
// (its super-scale is a sub-block scale, ~amax/113, over 32); others keep the
// sign and magnitude within 5%.
TEST(QuantEdge, TinyMagnitude) {
  const float c = 1e-4f;  // Q6_K: 1e-4 / 4096 = 2.4e-8 < 2^-25 = 3.0e-8
  for (GgmlType t : kQuantTypes) {
    const std::vector<float> x(static_cast<size_t>(elems_for(t)), c);
    const auto y = round_trip(t, x);
    ASSERT_TRUE(all_finite(y)) << tr_of(t).name;
    for (float v : y) {
      if (t == GgmlType::Q6_K || t == GgmlType::IQ4_XS) {
        ASSERT_EQ(v, 0.0f);
      } else {
        ASSERT_NEAR(v, c, 0.05f * c) << tr_of(t).name;
      }
    }
  }
}

// One huge outlier: everything stays finite, the outlier itself survives
// within 10% and the other elements within (a step of) the outlier's scale.
TEST(QuantEdge, HugeOutlier) {
  for (GgmlType t : kQuantTypes) {
    auto x = normal_row(static_cast<int>(elems_for(t)), 5);
    const float big = 2e4f;  // fp16 max is 65504: the scales stay representable
    x[3] = big;
    const auto y = round_trip(t, x);
    ASSERT_TRUE(all_finite(y)) << tr_of(t).name;
    EXPECT_NEAR(y[3], big, 0.1f * big) << tr_of(t).name;
    for (size_t i = 0; i < y.size(); ++i) ASSERT_LE(std::fabs(y[i] - x[i]), 0.15f * big) << tr_of(t).name << " " << i;
  }
}

// Strictly negative data (no zero inside the range): the asymmetric types must
// place their minimum correctly; everything finite and within 3x the type's
// normal-data error budget of the row's RMS.
TEST(QuantEdge, NegativeOnly) {
  for (const Budget& b : kBudgets) {
    auto x = normal_row(static_cast<int>(elems_for(b.type)), 6);
    for (auto& v : x) v = -std::fabs(v) - 0.5f;
    const auto y = round_trip(b.type, x);
    ASSERT_TRUE(all_finite(y)) << tr_of(b.type).name;
    EXPECT_LE(relative_rmse(x, y), 3.0 * b.max_rel_rmse) << tr_of(b.type).name;
    for (float v : y) ASSERT_LE(v, 0.0f) << tr_of(b.type).name;
  }
}

}  // namespace
}  // namespace tern::quant
