// kernels/ops/exp_poly.h — the e^r polynomial and the 16-lane e^x and tanh
// built on it, shared by the per-level kernels (attention's softmax and
// soft-cap, SwiGLU, GeGLU, soft-capped logits). Internal linkage only (see
// attention_impl.h).
#pragma once

#include <cstdint>

// (Vectors pass only between always-inlined helpers: no calling-convention concern.)
#pragma GCC diagnostic ignored "-Wpsabi"

namespace tern::kernels {
namespace {

// ln 2 split in a part exact in float and the rest, for x - k ln2 without rounding.
constexpr float kLog2e = 1.44269504088896341f;
constexpr float kLn2Hi = 0.693145751953125f;
constexpr float kLn2Lo = 1.428606765330187045e-06f;

// e^r for |r| <= ln2 / 2: degree-7 Taylor polynomial (~1e-7 relative). T is
// float or a GCC float vector; the operations are the same either way.
template <class T>
__attribute__((always_inline)) inline T exp_poly(T r) {
  T p = r * 0.0f + 1.0f / 5040.0f;
  p = p * r + 1.0f / 720.0f;
  p = p * r + 1.0f / 120.0f;
  p = p * r + 1.0f / 24.0f;
  p = p * r + 1.0f / 6.0f;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  return p;
}

// 16 f32 lanes (the same type as attention_impl.h's and elementwise_impl.h's vectors).
typedef float vm_f32x16 __attribute__((vector_size(64)));
typedef int32_t vm_i32x16 __attribute__((vector_size(64)));

// e^x for x in [-87, 88] (clamped outside): 2^k * e^r with |r| <= ln2 / 2, ~1e-7 relative.
__attribute__((always_inline)) inline vm_f32x16 exp16(vm_f32x16 x) {
  const vm_f32x16 lo = -87.0f - vm_f32x16{}, hi = 88.0f - vm_f32x16{};
  x = x < lo ? lo : x;
  x = x > hi ? hi : x;
  // k = round(x / ln2): adding and subtracting 1.5 * 2^23 rounds to nearest
  // (|x / ln2| < 2^22), with plain vector arithmetic at every level.
  const vm_f32x16 k = (x * kLog2e + 12582912.0f) - 12582912.0f;
  const vm_f32x16 r = x - k * kLn2Hi - k * kLn2Lo;
  const vm_f32x16 p = exp_poly(r);
  const vm_i32x16 bits = (__builtin_convertvector(k, vm_i32x16) + 127) << 23;
  vm_f32x16 scale;
  __builtin_memcpy(&scale, &bits, sizeof scale);
  return p * scale;
}

// tanh(y) for any y (NaN stays NaN), ~2e-7 relative: tanh|y| = m / (m + 2)
// with m = e^(2|y|) - 1, the sign put back. Where 2|y| <= ln2 / 2, m comes
// from the series of e^z - 1 without its constant (terms to z^8, truncation
// < 2e-9 relative): e^z - 1 by subtraction would lose the digits that carry
// tanh of a small y. Above, e^z >= 1.41 and the subtraction costs < 2 bits.
// Past 2|y| = 88 (e^z clamped) m + 2 == m and the result is exactly +-1, as
// tanh is in f32 from |y| = 9.01 on.
__attribute__((always_inline)) inline vm_f32x16 tanh16(vm_f32x16 y) {
  const vm_f32x16 a = y < 0.0f ? -y : y;
  const vm_f32x16 z = a + a;
  vm_f32x16 q = z * (1.0f / 40320.0f) + 1.0f / 5040.0f;
  q = q * z + 1.0f / 720.0f;
  q = q * z + 1.0f / 120.0f;
  q = q * z + 1.0f / 24.0f;
  q = q * z + 1.0f / 6.0f;
  q = q * z + 0.5f;
  q = q * z + 1.0f;
  const vm_f32x16 m = z <= 0.34657359f ? q * z : exp16(z) - 1.0f;
  const vm_f32x16 t = m / (m + 2.0f);
  return y < 0.0f ? -t : t;
}

// cap * tanh(x / cap) with inv_cap = 1 / cap (x scaled by the inverse, as
// llama.cpp's graph does): bounded by +-cap, ~x where |x| << cap.
__attribute__((always_inline)) inline vm_f32x16 softcap16(vm_f32x16 x, float cap, float inv_cap) {
  return cap * tanh16(x * inv_cap);
}

}  // namespace
}  // namespace tern::kernels
