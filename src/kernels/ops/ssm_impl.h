// kernels/ops/ssm_impl.h — the state-space kernels (kernels/ssm.h) written
// once with GCC vectors and compiled per CPU level (ssm_<level>.cpp).
// Internal linkage only, no std:: templates (the one-definition rule, as in
// attention_impl.h).
#pragma once

#include <cstdint>

#include "kernels/ops/exp_poly.h"
#include "kernels/ssm.h"

namespace tern::kernels {
namespace {

#pragma GCC diagnostic ignored "-Wpsabi"
typedef float ssm_f32x16 __attribute__((vector_size(64)));

// The first n (1..16) lanes from p, the rest zero; and back.
__attribute__((always_inline)) inline ssm_f32x16 ssm_load(const float* p, int n) {
  ssm_f32x16 v = {};
  __builtin_memcpy(&v, p, static_cast<size_t>(n) * sizeof(float));
  return v;
}
__attribute__((always_inline)) inline void ssm_store(float* p, ssm_f32x16 v, int n) {
  __builtin_memcpy(p, &v, static_cast<size_t>(n) * sizeof(float));
}

__attribute__((always_inline)) inline ssm_f32x16 silu16(ssm_f32x16 g) { return g / (1.0f + exp16(-g)); }

// Taps of the widest convolution a layer may have (checked at load, model/hparams.cpp).
constexpr int kSsmMaxConv = 16;

// 16 channels at a time: each output is bias + sum_k w[k] * input[t + k]
// over the run's inputs preceded by the kept ones, in that order of k.
void ssm_conv_impl(const SsmConvArgs& a, int c0, int c1) {
  const int d_inner = a.dims.d_inner, n_tap = a.dims.d_conv, n_keep = n_tap - 1;
  const int64_t n = a.n_tokens;
  // Input i of the run preceded by the kept ones (i < n_keep: kept).
  auto input = [&](int64_t i, int c) -> const float* {
    return i < n_keep ? a.conv_state + i * d_inner + c : a.x + (i - n_keep) * a.x_stride + c;
  };
  for (int c = c0; c < c1; c += 16) {
    const int lanes = c1 - c < 16 ? c1 - c : 16;
    ssm_f32x16 w[kSsmMaxConv];
    for (int k = 0; k < n_tap; ++k) w[k] = ssm_load(a.w + static_cast<int64_t>(k) * d_inner + c, lanes);
    const ssm_f32x16 bias = ssm_load(a.bias + c, lanes);
    for (int64_t t = 0; t < n; ++t) {
      ssm_f32x16 acc = bias;
      for (int k = 0; k < n_tap; ++k) acc += w[k] * ssm_load(input(t + k, c), lanes);
      ssm_store(a.out + t * d_inner + c, silu16(acc), lanes);
    }
    // Keep the last n_keep inputs. Entry i reads input n + i >= i, which no
    // earlier write (entries < i) has touched.
    for (int i = 0; i < n_keep; ++i)
      ssm_store(a.conv_state + static_cast<int64_t>(i) * d_inner + c, ssm_load(input(n + i, c), lanes),
                lanes);
  }
}

// Channel by channel, token by token; the state's d_state values 16 lanes at a time.
void ssm_scan_impl(const SsmScanArgs& a, int c0, int c1) {
  const int d_inner = a.dims.d_inner, d_state = a.dims.d_state;
  for (int ch = c0; ch < c1; ++ch) {
    float* h = a.state + static_cast<int64_t>(ch) * d_state;
    const float* an = a.a + static_cast<int64_t>(ch) * d_state;
    for (int64_t t = 0; t < a.n_tokens; ++t) {
      const float dt_raw = a.dt[t * d_inner + ch];
      // softplus, linear where log1p(e^x) == x in f32 (as the reference implementations cut it);
      // libm through builtins: an inline std:: overload would break the per-level ODR rule.
      const float dt = dt_raw <= 20.0f ? __builtin_log1pf(__builtin_expf(dt_raw)) : dt_raw;
      const float xv = a.x[t * d_inner + ch];
      const float xdt = xv * dt;
      const float* b = a.b + t * a.bc_stride;
      const float* c = a.c + t * a.bc_stride;
      ssm_f32x16 sum = {};
      for (int s = 0; s < d_state; s += 16) {
        const int lanes = d_state - s < 16 ? d_state - s : 16;
        ssm_f32x16 hv = ssm_load(h + s, lanes);
        hv = hv * exp16(ssm_load(an + s, lanes) * dt) + ssm_load(b + s, lanes) * xdt;
        ssm_store(h + s, hv, lanes);
        sum += hv * ssm_load(c + s, lanes);
      }
      float y = 0.0f;
      for (int l = 0; l < 16; ++l) y += sum[l];
      y += a.d[ch] * xv;
      const float z = a.z[t * a.z_stride + ch];
      a.y[t * d_inner + ch] = y * (z / (1.0f + __builtin_expf(-z)));
    }
  }
}

}  // namespace
}  // namespace tern::kernels
