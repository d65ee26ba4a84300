#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "core/fp16.h"
#include "quant/blocks.h"
#include "quant/quant.h"

namespace tern::quant {
namespace {

std::vector<float> random_row(int n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

// Hand-built blocks pin the bit layout: element j is the low nibble of qs[j],
// element j+16 the high nibble (halves, not interleaved).
TEST(Quant, Q4_0LayoutIsHalvesNotInterleaved) {
  BlockQ4_0 b{};
  b.d = float_to_fp16(0.5f);
  for (int j = 0; j < 16; ++j) b.qs[j] = static_cast<uint8_t>((j & 0xf) | ((15 - j) << 4));
  std::vector<float> out(32);
  traits(GgmlType::Q4_0)->to_float(&b, out.data(), 32);
  for (int j = 0; j < 16; ++j) {
    EXPECT_FLOAT_EQ(out[j], 0.5f * (j - 8)) << j;
    EXPECT_FLOAT_EQ(out[j + 16], 0.5f * (15 - j - 8)) << j;
  }
}

TEST(Quant, Q8_0Layout) {
  BlockQ8_0 b{};
  b.d = float_to_fp16(0.25f);
  for (int j = 0; j < 32; ++j) b.qs[j] = static_cast<int8_t>(j * 8 - 128);
  std::vector<float> out(32);
  traits(GgmlType::Q8_0)->to_float(&b, out.data(), 32);
  for (int j = 0; j < 32; ++j) EXPECT_FLOAT_EQ(out[j], 0.25f * (j * 8 - 128));
}

// Quantizer rules match ggml's reference: known inputs give known bytes.
TEST(Quant, Q4_0QuantizerKnownBytes) {
  std::vector<float> x(32, 0.0f);
  x[0] = -8.0f;  // largest magnitude, negative: d = -8 / -8 = 1
  x[1] = 7.0f;
  x[2] = 1.49f;
  x[16] = -3.0f;
  BlockQ4_0 b{};
  traits(GgmlType::Q4_0)->from_float(x.data(), &b, 32);
  EXPECT_EQ(fp16_to_float(b.d), 1.0f);
  EXPECT_EQ(b.qs[0] & 0xf, 0);        // -8 + 8
  EXPECT_EQ(b.qs[1] & 0xf, 15);       // 7 + 8
  EXPECT_EQ(b.qs[2] & 0xf, 9);        // trunc(1.49 + 8.5) = 9
  EXPECT_EQ(b.qs[0] >> 4, 5);         // x[16] = -3 -> 5
  EXPECT_EQ(b.qs[3] & 0xf, 8);        // zero -> 8
}

TEST(Quant, Q8_0QuantizerKnownBytes) {
  std::vector<float> x(32, 0.0f);
  x[0] = 127.0f;
  x[1] = -63.5f;  // rounds away from zero: -64
  x[5] = 0.4f;
  BlockQ8_0 b{};
  traits(GgmlType::Q8_0)->from_float(x.data(), &b, 32);
  EXPECT_EQ(fp16_to_float(b.d), 1.0f);
  EXPECT_EQ(b.qs[0], 127);
  EXPECT_EQ(b.qs[1], -64);
  EXPECT_EQ(b.qs[5], 0);
}

// Round-trip error budgets: Q8_0 within d/2 = amax/254 per element plus the fp16
// rounding of d, which moves q*d by up to 127 * 2^-11 * d; Q4_0 within
// |d|/2 = amax/16 (plus the clamp at +7 for the largest positive values: |d|).
TEST(Quant, RoundTripErrorWithinBudget) {
  const int n = 32 * 64;
  auto x = random_row(n, 7);
  for (GgmlType t : {GgmlType::Q8_0, GgmlType::Q4_0, GgmlType::F16, GgmlType::BF16, GgmlType::F32}) {
    const TypeTraits* tr = traits(t);
    ASSERT_NE(tr, nullptr);
    std::vector<uint8_t> q(row_bytes(*tr, n));
    std::vector<float> y(n);
    tr->from_float(x.data(), q.data(), n);
    tr->to_float(q.data(), y.data(), n);
    for (int blk = 0; blk < n / 32; ++blk) {
      float amax = 0.0f;
      for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[blk * 32 + j]));
      float budget = 0.0f;
      switch (t) {
        case GgmlType::Q8_0: budget = amax / 127.0f * 0.57f + 1e-6f; break;  // d/2 plus fp16 rounding of d (127 * 2^-11 d)
        case GgmlType::Q4_0: budget = amax / 8.0f * 1.01f; break;
        case GgmlType::F16: budget = amax * 1e-3f; break;
        case GgmlType::BF16: budget = amax * 8e-3f; break;
        default: budget = 0.0f;
      }
      for (int j = 0; j < 32; ++j) ASSERT_LE(std::fabs(x[blk * 32 + j] - y[blk * 32 + j]), budget) << tr->name;
    }
  }
}

// vec_dot equals the dot product of the dequantized row (same type, any data).
TEST(Quant, VecDotMatchesDequantizedDot) {
  const int n = 32 * 16;
  auto w = random_row(n, 11), x = random_row(n, 12);
  for (GgmlType t : {GgmlType::Q8_0, GgmlType::Q4_0, GgmlType::F16, GgmlType::BF16, GgmlType::F32}) {
    const TypeTraits* tr = traits(t);
    std::vector<uint8_t> q(row_bytes(*tr, n));
    std::vector<float> deq(n);
    tr->from_float(w.data(), q.data(), n);
    tr->to_float(q.data(), deq.data(), n);
    double want = 0.0;
    for (int i = 0; i < n; ++i) want += static_cast<double>(deq[i]) * x[i];
    EXPECT_NEAR(tr->vec_dot(q.data(), x.data(), n), want, 1e-4 * std::sqrt(n)) << tr->name;
  }
}

TEST(Quant, TraitsAgreeWithGgufSizes) {
  for (GgmlType t : {GgmlType::Q8_0, GgmlType::Q4_0, GgmlType::F16, GgmlType::BF16, GgmlType::F32, GgmlType::IQ4_XS}) {
    const TypeTraits* tr = traits(t);
    auto s = gguf::type_size(static_cast<uint32_t>(t));
    ASSERT_TRUE(s.has_value());
    EXPECT_EQ(tr->block_elems, s->block_elems);
    EXPECT_EQ(tr->block_bytes, s->block_bytes);
  }
  EXPECT_EQ(traits(GgmlType::IQ2_XXS), nullptr);  // no row for the grid-based i-quants
}

}  // namespace
}  // namespace tern::quant
