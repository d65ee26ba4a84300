// Importance-weighted rounding (quant/block_codec.h): the blocks it writes
// decode to the levels it reasons with, its weighted error never exceeds
// ggml's reference rounding on any block, and the weights steer the error.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "quant/block_codec.h"
#include "quant/quant.h"
#include "quant_test_data.h"

namespace tern::quant {
namespace {

using gguf::GgmlType;

constexpr GgmlType kTypes[] = {GgmlType::Q4_0, GgmlType::Q4_1, GgmlType::Q5_0,
                               GgmlType::Q5_1, GgmlType::Q8_0, GgmlType::IQ4_NL, GgmlType::MXFP4};

// Importance with a wide spread, as real activations have (a few channels
// carry most of the energy): exp of a scaled normal.
std::vector<float> skewed_weights(int n, uint64_t seed) {
  test::Lcg rng(seed);
  std::vector<float> w(static_cast<size_t>(n));
  for (auto& v : w) v = std::exp(2.0f * rng.normal());
  return w;
}

double weighted_error(const float* x, const float* xq, const float* w, int n) {
  double e = 0.0;
  for (int j = 0; j < n; ++j) e += (w ? w[j] : 1.0) * (static_cast<double>(x[j]) - xq[j]) * (x[j] - xq[j]);
  return e;
}

std::vector<float> decode(GgmlType type, const std::vector<uint8_t>& bytes, int n) {
  std::vector<float> out(static_cast<size_t>(n));
  traits(type)->to_float(bytes.data(), out.data(), n);
  return out;
}

TEST(BlockCodec, StoredBlocksDecodeToTheLevels) {
  for (GgmlType type : kTypes) {
    const BlockCodec* c = block_codec(type);
    ASSERT_NE(c, nullptr) << gguf::type_name(type);
    const auto x = test::normal_row(32, 7 + static_cast<int>(type));
    const auto w = skewed_weights(32, 11);
    const BlockFit f = fit_block(*c, x.data(), w.data());
    uint8_t q[32];
    for (int j = 0; j < 32; ++j) q[j] = static_cast<uint8_t>(nearest_index(*c, f, x[j]));
    std::vector<uint8_t> block(traits(type)->block_bytes);
    store_block(*c, f, q, block.data());
    const auto y = decode(type, block, 32);
    for (int j = 0; j < 32; ++j) EXPECT_EQ(y[j], level(*c, f, q[j])) << gguf::type_name(type) << " element " << j;
  }
}

TEST(BlockCodec, WeightedFitNeverLosesToReferenceRoundingAndUsuallyWins) {
  constexpr int kN = 32 * 64;
  for (GgmlType type : kTypes) {
    const BlockCodec& c = *block_codec(type);
    const TypeTraits& t = *traits(type);
    for (uint64_t seed = 1; seed <= 3; ++seed) {
      const auto x = test::normal_row(kN, 100 * seed + static_cast<int>(type));
      const auto w = skewed_weights(kN, 200 * seed);
      std::vector<uint8_t> ref(row_bytes(t, kN)), ours(row_bytes(t, kN));
      t.from_float(x.data(), ref.data(), kN);
      encode_row_weighted(c, x.data(), w.data(), ours.data(), kN);
      const auto yr = decode(type, ref, kN), yo = decode(type, ours, kN);
      double er_total = 0, eo_total = 0;
      for (int b = 0; b < kN; b += 32) {
        const double er = weighted_error(&x[b], &yr[b], &w[b], 32), eo = weighted_error(&x[b], &yo[b], &w[b], 32);
        // A tiny slack: the decoder's float rounding of a level can differ from ours in the last bit.
        EXPECT_LE(eo, er * (1 + 1e-6) + 1e-12) << gguf::type_name(type) << " block " << b / 32;
        er_total += er;
        eo_total += eo;
      }
      // Importance spread over two orders of magnitude leaves a lot to gain --
      // except for MXFP4, whose only choice is among a few powers of two (for
      // a given scale the nearest level is best whatever the weight).
      EXPECT_LT(eo_total, (type == GgmlType::MXFP4 ? 1.0 : 0.9) * er_total) << gguf::type_name(type) << " seed " << seed;
    }
  }
}

TEST(BlockCodec, UniformWeightsStillBeatTheAbsmaxRule) {
  constexpr int kN = 32 * 64;
  for (GgmlType type : {GgmlType::Q4_0, GgmlType::Q5_0, GgmlType::IQ4_NL, GgmlType::Q4_1, GgmlType::MXFP4}) {
    const TypeTraits& t = *traits(type);
    const auto x = test::normal_row(kN, 31);
    std::vector<uint8_t> ref(row_bytes(t, kN)), ours(row_bytes(t, kN));
    t.from_float(x.data(), ref.data(), kN);
    encode_row_weighted(*block_codec(type), x.data(), nullptr, ours.data(), kN);
    const double er = weighted_error(x.data(), decode(type, ref, kN).data(), nullptr, kN);
    const double eo = weighted_error(x.data(), decode(type, ours, kN).data(), nullptr, kN);
    EXPECT_LT(eo, er) << gguf::type_name(type);
  }
}

TEST(BlockCodec, ImportantColumnsGetSmallerErrors) {
  // The same row rounded twice: once with every weight equal, once with the
  // first 8 columns of each block 100x more important. Their error must fall.
  constexpr int kN = 32 * 128;
  const auto x = test::normal_row(kN, 5);
  std::vector<float> w(kN, 1.0f);
  for (int j = 0; j < kN; ++j)
    if (j % 32 < 8) w[j] = 100.0f;
  for (GgmlType type : {GgmlType::Q4_0, GgmlType::Q4_1, GgmlType::IQ4_NL}) {
    const TypeTraits& t = *traits(type);
    std::vector<uint8_t> flat(row_bytes(t, kN)), steered(row_bytes(t, kN));
    encode_row_weighted(*block_codec(type), x.data(), nullptr, flat.data(), kN);
    encode_row_weighted(*block_codec(type), x.data(), w.data(), steered.data(), kN);
    const auto yf = decode(type, flat, kN), ys = decode(type, steered, kN);
    double ef = 0, es = 0;
    for (int j = 0; j < kN; ++j)
      if (j % 32 < 8) {
        ef += (x[j] - yf[j]) * (x[j] - yf[j]);
        es += (x[j] - ys[j]) * (x[j] - ys[j]);
      }
    EXPECT_LT(es, 0.8 * ef) << gguf::type_name(type);
  }
}

TEST(BlockCodec, KQuantImportanceLowersTheWeightedErrorAndZeroImportanceIsTheReference) {
  constexpr int kN = 256 * 16;
  for (GgmlType type : {GgmlType::Q2_K, GgmlType::Q3_K, GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K}) {
    ASSERT_TRUE(supports_weighted(type));
    const TypeTraits& t = *traits(type);
    const auto x = test::normal_row(kN, 71 + static_cast<int>(type));
    const auto w = skewed_weights(kN, 72);
    std::vector<uint8_t> ref(row_bytes(t, kN)), ours(row_bytes(t, kN));
    t.from_float(x.data(), ref.data(), kN);
    ASSERT_TRUE(encode_row_importance(type, x.data(), w.data(), ours.data(), kN));
    const double er = weighted_error(x.data(), decode(type, ref, kN).data(), w.data(), kN);
    const double eo = weighted_error(x.data(), decode(type, ours, kN).data(), w.data(), kN);
    EXPECT_LT(eo, 0.9 * er) << gguf::type_name(type);
    // No information (a dead channel everywhere): exactly ggml's reference bytes.
    const std::vector<float> zero(kN, 0.0f);
    ASSERT_TRUE(encode_row_importance(type, x.data(), zero.data(), ours.data(), kN));
    EXPECT_EQ(ours, ref) << gguf::type_name(type);
  }
  EXPECT_FALSE(supports_weighted(GgmlType::Q8_K));
  EXPECT_FALSE(supports_weighted(GgmlType::F16));
}

TEST(BlockCodec, ZeroBlocksAndZeroWeightsAreHandled) {
  for (GgmlType type : kTypes) {
    const BlockCodec& c = *block_codec(type);
    std::vector<float> zeros(32, 0.0f), x = test::normal_row(32, 3), w(32, 0.0f);
    std::vector<uint8_t> out(traits(type)->block_bytes);
    encode_row_weighted(c, zeros.data(), nullptr, out.data(), 32);
    for (float v : decode(type, out, 32)) EXPECT_EQ(v, 0.0f) << gguf::type_name(type);
    // All-zero importance carries no information: the fit falls back to plain least squares.
    encode_row_weighted(c, x.data(), w.data(), out.data(), 32);
    for (float v : decode(type, out, 32)) EXPECT_TRUE(std::isfinite(v)) << gguf::type_name(type);
  }
  EXPECT_EQ(block_codec(GgmlType::Q4_K), nullptr);
  EXPECT_EQ(block_codec(GgmlType::F16), nullptr);
}

}  // namespace
}  // namespace tern::quant
