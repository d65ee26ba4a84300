// core/fp16.h — IEEE half and bfloat16 conversions (portable scalar code).
//
// Round-to-nearest-even on the way down, exact on the way up; NaN and Inf are
// preserved. These are the reference conversions; SIMD paths must match them.
#pragma once

#include <cstdint>
#include <cstring>

namespace tern {

inline float bits_to_float(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
inline uint32_t float_to_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

inline float fp16_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  if (exp == 0x1f) return bits_to_float(sign | 0x7f800000u | (mant << 13));  // inf / nan
  if (exp == 0) {
    if (mant == 0) return bits_to_float(sign);
    // Subnormal: value = mant * 2^-24.
    float v = static_cast<float>(mant) * (1.0f / 16777216.0f);
    return sign ? -v : v;
  }
  return bits_to_float(sign | ((exp + 112u) << 23) | (mant << 13));
}

inline uint16_t float_to_fp16(float f) {
  const uint32_t x = float_to_bits(f);
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  const uint32_t abs = x & 0x7fffffffu;
  if (abs >= 0x7f800000u) return sign | 0x7c00u | (abs > 0x7f800000u ? 0x200u : 0u);
  if (abs >= 0x477ff000u) return sign | 0x7c00u;  // rounds to >= 65520: overflow to inf
  if (abs < 0x38800000u) {
    // Result is subnormal (or zero): value / 2^-24 rounded to nearest even.
    const float v = bits_to_float(abs) * 16777216.0f;
    // nearbyint with default rounding mode (nearest-even).
    float r = __builtin_nearbyintf(v);
    return sign | static_cast<uint16_t>(r);
  }
  // Normal: drop 13 mantissa bits with round-to-nearest-even.
  uint32_t rounded = abs + 0xfffu + ((abs >> 13) & 1u);
  return sign | static_cast<uint16_t>((rounded - (112u << 23)) >> 13);
}

inline float bf16_to_float(uint16_t b) { return bits_to_float(static_cast<uint32_t>(b) << 16); }

inline uint16_t float_to_bf16(float f) {
  uint32_t x = float_to_bits(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);  // quiet nan
  x += 0x7fffu + ((x >> 16) & 1u);
  return static_cast<uint16_t>(x >> 16);
}

// The nearest fp16 value, as a float: what a scale stored as fp16 decodes to.
inline float fp16_round(float v) { return fp16_to_float(float_to_fp16(v)); }

}  // namespace tern
