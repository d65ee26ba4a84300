// kernels/ops/elementwise_impl.h — element-wise kernels written once with GCC
// vectors and compiled per CPU level (elementwise_<level>.cpp). Internal
// linkage only, no std:: templates (the one-definition rule, as in
// attention_impl.h).
#pragma once

#include <cstdint>

#include "kernels/elementwise.h"
#include "kernels/ops/exp_poly.h"

namespace tern::kernels {
namespace {

#pragma GCC diagnostic ignored "-Wpsabi"
typedef float ew_f32x16 __attribute__((vector_size(64)));
typedef int32_t ew_i32x16 __attribute__((vector_size(64)));

// e^x for x in [-87, 88] (clamped outside): 2^k * e^r with |r| <= ln2 / 2
// (exp_poly.h), ~1e-7 relative.
__attribute__((always_inline)) inline ew_f32x16 exp16(ew_f32x16 x) {
  const ew_f32x16 lo = -87.0f - ew_f32x16{}, hi = 88.0f - ew_f32x16{};
  x = x < lo ? lo : x;
  x = x > hi ? hi : x;
  // k = round(x / ln2): adding and subtracting 1.5 * 2^23 rounds to nearest
  // (|x / ln2| < 2^22), with plain vector arithmetic at every level.
  const ew_f32x16 k = (x * kLog2e + 12582912.0f) - 12582912.0f;
  const ew_f32x16 r = x - k * kLn2Hi - k * kLn2Lo;
  const ew_f32x16 p = exp_poly(r);
  const ew_i32x16 bits = (__builtin_convertvector(k, ew_i32x16) + 127) << 23;
  ew_f32x16 scale;
  __builtin_memcpy(&scale, &bits, sizeof scale);
  return p * scale;
}

__attribute__((always_inline)) inline ew_f32x16 swiglu16(ew_f32x16 g, ew_f32x16 u) {
  return g / (1.0f + exp16(-g)) * u;
}

void swiglu_impl(float* gate, const float* up, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    ew_f32x16 g, u;
    __builtin_memcpy(&g, gate + i, sizeof g);
    __builtin_memcpy(&u, up + i, sizeof u);
    const ew_f32x16 y = swiglu16(g, u);
    __builtin_memcpy(gate + i, &y, sizeof y);
  }
  if (i < n) {  // the tail through the same vector code, padded with zeros
    ew_f32x16 g = {}, u = {};
    const int64_t rest = n - i;
    __builtin_memcpy(&g, gate + i, static_cast<size_t>(rest) * sizeof(float));
    __builtin_memcpy(&u, up + i, static_cast<size_t>(rest) * sizeof(float));
    const ew_f32x16 y = swiglu16(g, u);
    __builtin_memcpy(gate + i, &y, static_cast<size_t>(rest) * sizeof(float));
  }
}

}  // namespace
}  // namespace tern::kernels
