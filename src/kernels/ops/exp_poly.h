// kernels/ops/exp_poly.h — the e^r polynomial shared by the per-level kernels
// (attention's softmax, SwiGLU). Internal linkage only (see attention_impl.h).
#pragma once

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

}  // namespace
}  // namespace tern::kernels
