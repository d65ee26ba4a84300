// quant/scalar_math.h — rounding helpers shared by the reference quantizers (internal).
//
// The quantizers must reproduce ggml's reference rounding exactly, so these
// helpers pin down the two rounding rules ggml uses: round-half-to-even of a
// float (its nearest_int) and truncation after adding 0.5 (the legacy types).
// Both are total: NaN and out-of-range inputs give a clamped value, never UB.
#pragma once

#include <cstdint>
#include <cstring>

namespace tern::quant {

// Round to nearest, ties to even, for |v| < 2^22 (larger magnitudes are
// clamped first; no quantizer produces them from finite data). Adding
// 1.5 * 2^23 moves v into the binade where the float spacing is exactly 1, so
// the FPU's own round-to-nearest-even does the rounding; the integer is then
// read back from the mantissa bits.
inline int round_nearest_even(float v) {
  constexpr float kLimit = 4194303.0f;  // 2^22 - 1
  if (v != v) return 0;                 // NaN (ggml's bit trick also yields 0)
  if (v < -kLimit) v = -kLimit;
  if (v > kLimit) v = kLimit;
  const float shifted = v + 12582912.0f;  // 1.5 * 2^23
  int32_t bits;
  std::memcpy(&bits, &shifted, sizeof(bits));
  return (bits & 0x007fffff) - 0x00400000;
}

// C's float -> int conversion (truncation toward zero) clamped to [0, hi].
// Equals min(hi, (int)v) whenever that conversion is defined and non-negative.
inline int trunc_clamp(float v, int hi) {
  if (!(v >= 0.0f)) return 0;  // negatives truncate to <= 0 (and NaN)
  if (v >= static_cast<float>(hi)) return hi;
  return static_cast<int>(v);
}

inline int clamp_int(int v, int lo, int hi) { return v < lo ? lo : (v > hi ? hi : v); }

// Index of the entry of an ascending 16-entry table nearest to v; on an exact
// tie between two neighbours the upper one wins (as ggml's best_index_int8).
inline int nearest_index16(const int8_t* table, float v) {
  if (v <= table[0]) return 0;
  if (v >= table[15]) return 15;
  int hi = 1;
  while (!(v < table[hi])) ++hi;  // table[hi - 1] <= v < table[hi]
  return (v - table[hi - 1] < table[hi] - v) ? hi - 1 : hi;
}

}  // namespace tern::quant
