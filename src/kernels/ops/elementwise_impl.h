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

__attribute__((always_inline)) inline ew_f32x16 swiglu16(ew_f32x16 g, ew_f32x16 u) {
  return g / (1.0f + exp16(-g)) * u;
}

// Applies f(g, u) -> g over n elements of gate and up, 16 at a time; the
// tail through the same vector code, padded with zeros, so an element's
// result does not depend on n or on its position.
template <class F>
__attribute__((always_inline)) inline void gated_rows(float* gate, const float* up, int64_t n, F f) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    ew_f32x16 g, u;
    __builtin_memcpy(&g, gate + i, sizeof g);
    __builtin_memcpy(&u, up + i, sizeof u);
    const ew_f32x16 y = f(g, u);
    __builtin_memcpy(gate + i, &y, sizeof y);
  }
  if (i < n) {
    ew_f32x16 g = {}, u = {};
    const int64_t rest = n - i;
    __builtin_memcpy(&g, gate + i, static_cast<size_t>(rest) * sizeof(float));
    __builtin_memcpy(&u, up + i, static_cast<size_t>(rest) * sizeof(float));
    const ew_f32x16 y = f(g, u);
    __builtin_memcpy(gate + i, &y, static_cast<size_t>(rest) * sizeof(float));
  }
}

void swiglu_impl(float* gate, const float* up, int64_t n) {
  gated_rows(gate, up, n, [](ew_f32x16 g, ew_f32x16 u) { return swiglu16(g, u); });
}

// gelu_tanh(g) = g/2 (1 + tanh(v)), v = sqrt(2/pi) (g + 0.044715 g^3), computed
// as g * sigmoid(2v) = g / (1 + e^x) with x = -2v: the same value, since
// (1 + tanh v) / 2 = 1 / (1 + e^-2v), without the cancellation of 1 + tanh v
// for negative g. x rounds like v (a few ulps), and e^x turns that into a
// relative error of about |x| ulps: exact to ~1e-6 where results matter, and
// ~1e-5 relative at x ~ 80 (g ~ -7), where they are below 1e-30. Past x = 88
// exp16 clamps, which would leave ~|g| 1e-38 instead of ~0: those lanes are 0.
constexpr float kGeluX0 = -2.0f * 0.7978845608028654f;  // -2 sqrt(2/pi)
constexpr float kGeluX1 = kGeluX0 * 0.044715f;

__attribute__((always_inline)) inline ew_f32x16 geglu16(ew_f32x16 g, ew_f32x16 u) {
  const ew_f32x16 x = g * (kGeluX0 + kGeluX1 * (g * g));
  const ew_f32x16 y = g / (1.0f + exp16(x)) * u;
  return x > 88.0f ? ew_f32x16{} : y;
}

void geglu_impl(float* gate, const float* up, int64_t n) {
  gated_rows(gate, up, n, [](ew_f32x16 g, ew_f32x16 u) { return geglu16(g, u); });
}

void softcap_impl(float* x, int64_t n, float cap) {
  const float inv = 1.0f / cap;
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    ew_f32x16 v;
    __builtin_memcpy(&v, x + i, sizeof v);
    v = softcap16(v, cap, inv);
    __builtin_memcpy(x + i, &v, sizeof v);
  }
  if (i < n) {
    ew_f32x16 v = {};
    const int64_t rest = n - i;
    __builtin_memcpy(&v, x + i, static_cast<size_t>(rest) * sizeof(float));
    v = softcap16(v, cap, inv);
    __builtin_memcpy(x + i, &v, static_cast<size_t>(rest) * sizeof(float));
  }
}

}  // namespace
}  // namespace tern::kernels
