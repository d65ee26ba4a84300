// core/fp8.h against an exhaustive nearest-value search over the 254 finite
// E4M3 codes, and the half table against IEEE half rounding of each value.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "core/fp16.h"
#include "core/fp8.h"

namespace tern {
namespace {

// The code the OCP rule gives x: the nearest finite value, ties to the even
// mantissa, beyond ±448 saturated; found by trying every code.
uint8_t nearest_code(float x) {
  if (std::fabs(x) >= 448.0f) return std::signbit(x) ? 0xfe : 0x7e;
  int best = -1;
  double best_d = INFINITY;
  for (int c = 0; c < 256; ++c) {
    const float v = fp8_e4m3_to_float(static_cast<uint8_t>(c));
    if (std::isnan(v) || std::signbit(v) != std::signbit(x)) continue;
    const double d = std::fabs(static_cast<double>(v) - x);
    if (d < best_d || (d == best_d && (c & 1) == 0)) best = c, best_d = d;
  }
  return static_cast<uint8_t>(best);
}

TEST(Fp8, DecodesTheFormat) {
  EXPECT_EQ(fp8_e4m3_to_float(0x00), 0.0f);
  EXPECT_TRUE(std::signbit(fp8_e4m3_to_float(0x80)));
  EXPECT_EQ(fp8_e4m3_to_float(0x38), 1.0f);              // exponent 7 = bias
  EXPECT_EQ(fp8_e4m3_to_float(0x7e), 448.0f);            // 1.75 * 2^8
  EXPECT_EQ(fp8_e4m3_to_float(0x01), std::ldexp(1.0f, -9));  // smallest subnormal
  EXPECT_EQ(fp8_e4m3_to_float(0x08), std::ldexp(1.0f, -6));  // smallest normal
  EXPECT_EQ(fp8_e4m3_to_float(0xc4), -3.0f);
  EXPECT_TRUE(std::isnan(fp8_e4m3_to_float(0x7f)));
  EXPECT_TRUE(std::isnan(fp8_e4m3_to_float(0xff)));
}

TEST(Fp8, EveryCodeRoundTripsAndItsHalfIsExact) {
  for (int c = 0; c < 256; ++c) {
    const float v = fp8_e4m3_to_float(static_cast<uint8_t>(c));
    const uint16_t h = kFp8E4M3Half[c];
    if (std::isnan(v)) {
      EXPECT_TRUE(std::isnan(fp16_to_float(h))) << c;
      EXPECT_EQ(float_to_fp8_e4m3(v) & 0x7f, 0x7f) << c;
      continue;
    }
    EXPECT_EQ(float_to_fp8_e4m3(v), c) << c;
    EXPECT_EQ(h, float_to_fp16(v)) << c;
    EXPECT_EQ(fp16_to_float(h), v) << c;  // exact
  }
}

TEST(Fp8, RoundsToNearestEvenAndSaturates) {
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> exponent(-12.0f, 10.0f);
  for (int i = 0; i < 20000; ++i) {
    const float x = (i % 2 ? -1.0f : 1.0f) * std::exp2(exponent(rng));
    ASSERT_EQ(float_to_fp8_e4m3(x), nearest_code(x)) << x;
  }
  // Exact midpoints go to the even mantissa: 1 + 1/16 lies between 1 (0x38) and 1.125 (0x39).
  EXPECT_EQ(float_to_fp8_e4m3(1.0625f), 0x38);
  EXPECT_EQ(float_to_fp8_e4m3(1.1875f), 0x3a);  // between 1.125 and 1.25: to 1.25 (even)
  EXPECT_EQ(float_to_fp8_e4m3(1e9f), 0x7e);
  EXPECT_EQ(float_to_fp8_e4m3(-INFINITY), 0xfe);
  EXPECT_EQ(float_to_fp8_e4m3(460.0f), 0x7e);
  EXPECT_EQ(float_to_fp8_e4m3(std::ldexp(1.0f, -11)), 0x00);  // below half the smallest subnormal
}

// E5M2: the same rule over its 246 finite codes (saturating at +-57344).
uint8_t nearest_e5m2(float x) {
  if (std::fabs(x) >= 57344.0f) return std::signbit(x) ? 0xfb : 0x7b;
  int best = -1;
  double best_d = INFINITY;
  for (int c = 0; c < 256; ++c) {
    const float v = fp8_e5m2_to_float(static_cast<uint8_t>(c));
    if (!std::isfinite(v) || std::signbit(v) != std::signbit(x)) continue;
    const double d = std::fabs(static_cast<double>(v) - x);
    if (d < best_d || (d == best_d && (c & 1) == 0)) best = c, best_d = d;
  }
  return static_cast<uint8_t>(best);
}

TEST(Fp8E5M2, DecodesTheFormatAndEveryFiniteCodeRoundTrips) {
  EXPECT_EQ(fp8_e5m2_to_float(0x3c), 1.0f);                   // exponent 15 = bias
  EXPECT_EQ(fp8_e5m2_to_float(0x7b), 57344.0f);               // 1.75 * 2^15
  EXPECT_EQ(fp8_e5m2_to_float(0x01), std::ldexp(1.0f, -16));  // smallest subnormal
  EXPECT_EQ(fp8_e5m2_to_float(0x04), std::ldexp(1.0f, -14));  // smallest normal
  EXPECT_EQ(fp8_e5m2_to_float(0xc2), -3.0f);
  EXPECT_EQ(fp8_e5m2_to_float(0x7c), INFINITY);
  EXPECT_TRUE(std::isnan(fp8_e5m2_to_float(0x7d)));
  for (int c = 0; c < 256; ++c) {
    const float v = fp8_e5m2_to_float(static_cast<uint8_t>(c));
    if (!std::isfinite(v)) continue;
    EXPECT_EQ(float_to_fp8_e5m2(v), c) << c;
  }
}

TEST(Fp8E5M2, RoundsToNearestEvenAndSaturates) {
  std::mt19937 rng(6);
  std::uniform_real_distribution<float> exponent(-19.0f, 17.0f);
  for (int i = 0; i < 20000; ++i) {
    const float x = (i % 2 ? -1.0f : 1.0f) * std::exp2(exponent(rng));
    ASSERT_EQ(float_to_fp8_e5m2(x), nearest_e5m2(x)) << x;
  }
  EXPECT_EQ(float_to_fp8_e5m2(1.125f), 0x3c);  // between 1 and 1.25: to 1 (even)
  EXPECT_EQ(float_to_fp8_e5m2(1.375f), 0x3e);  // between 1.25 and 1.5: to 1.5 (even)
  EXPECT_EQ(float_to_fp8_e5m2(INFINITY), 0x7b);
  EXPECT_EQ(float_to_fp8_e5m2(-1e9f), 0xfb);
  EXPECT_EQ(float_to_fp8_e5m2(NAN) & 0x7f, 0x7f);
}

}  // namespace
}  // namespace tern
