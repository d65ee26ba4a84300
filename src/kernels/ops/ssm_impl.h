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

// The first n (1..16) lanes from p, the rest zero; and back. A whole vector
// is one load (a copy of run-time size would go through memory, rep movs).
__attribute__((always_inline)) inline ssm_f32x16 ssm_load(const float* p, int n) {
  ssm_f32x16 v = {};
  if (n == 16)
    __builtin_memcpy(&v, p, sizeof v);
  else
    __builtin_memcpy(&v, p, static_cast<size_t>(n) * sizeof(float));
  return v;
}
__attribute__((always_inline)) inline void ssm_store(float* p, ssm_f32x16 v, int n) {
  if (n == 16)
    __builtin_memcpy(p, &v, sizeof v);
  else
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
    for (int k = 0; k < a.n_snaps; ++k)  // the inputs kept after `after` tokens
      for (int i = 0; i < n_keep; ++i)
        ssm_store(a.snaps[k].conv + static_cast<int64_t>(i) * d_inner + c, ssm_load(input(a.snaps[k].after + i, c), lanes),
                  lanes);
    // Keep the last n_keep inputs. Entry i reads input n + i >= i, which no
    // earlier write (entries < i) has touched.
    for (int i = 0; i < n_keep; ++i)
      ssm_store(a.conv_state + static_cast<int64_t>(i) * d_inner + c, ssm_load(input(n + i, c), lanes),
                lanes);
  }
}

// log(1 + u) for u >= 0 (u = e^x of softplus, x <= 20): y = 1 + u split as
// m 2^e with m in [sqrt(1/2), sqrt(2)), log m = 2 atanh(f / (2 + f)) by its
// odd series to s^9 (|s| <= 0.172: < 3e-9 relative), then the rounding of
// 1 + u corrected by (u - (y - 1)) / y, so small u keep their digits.
__attribute__((always_inline)) inline ssm_f32x16 log1p16(ssm_f32x16 u) {
  typedef int32_t ssm_i32x16 __attribute__((vector_size(64)));
  const ssm_f32x16 y = 1.0f + u;
  ssm_i32x16 bits;
  __builtin_memcpy(&bits, &y, sizeof bits);
  // Exponent relative to sqrt(1/2) (0x3f3504f3), so m lands in [sqrt(1/2), sqrt(2)).
  const ssm_i32x16 e = ((bits - 0x3f3504f3) >> 23);
  const ssm_i32x16 mbits = bits - (e << 23);
  ssm_f32x16 m;
  __builtin_memcpy(&m, &mbits, sizeof m);
  const ssm_f32x16 f = m - 1.0f;
  const ssm_f32x16 s = f / (2.0f + f);
  const ssm_f32x16 s2 = s * s;
  ssm_f32x16 p = s2 * (2.0f / 9.0f) + 2.0f / 7.0f;
  p = p * s2 + 2.0f / 5.0f;
  p = p * s2 + 2.0f / 3.0f;
  p = p * s2 + 2.0f;
  const ssm_f32x16 ef = __builtin_convertvector(e, ssm_f32x16);
  const ssm_f32x16 log_y = ef * kLn2Hi + (ef * kLn2Lo + s * p);
  return log_y + (u - (y - 1.0f)) / y;
}

// softplus(x) = log(1 + e^x), x itself past 20 (where they agree in f32).
__attribute__((always_inline)) inline ssm_f32x16 softplus16(ssm_f32x16 x) {
  const ssm_f32x16 sp = log1p16(exp16(x));
  return x > 20.0f ? x : sp;
}

// The state of states a block keeps in registers (Mamba's d_state is 16);
// larger states go through the state array, still 16 channels per vector.
constexpr int kSsmRegStates = 16;

// The sum of a vector's lanes, as a fixed tree (the same on every call).
__attribute__((always_inline)) inline float ssm_hsum(ssm_f32x16 v) {
  typedef float f32x8 __attribute__((vector_size(32)));
  typedef float f32x4 __attribute__((vector_size(16)));
  const f32x8 s8 = __builtin_shufflevector(v, v, 0, 1, 2, 3, 4, 5, 6, 7) +
                   __builtin_shufflevector(v, v, 8, 9, 10, 11, 12, 13, 14, 15);
  const f32x4 s4 = __builtin_shufflevector(s8, s8, 0, 1, 2, 3) + __builtin_shufflevector(s8, s8, 4, 5, 6, 7);
  return (s4[0] + s4[2]) + (s4[1] + s4[3]);
}

// Mamba-2's scan keeps a chunk of a channel's states in registers over a
// tile of tokens: 8 native vectors (AVX-512: 8 x 16 = 128 states in 8 of its
// 32 registers; AVX2: 8 x 8 = 64 in 8 of its 16, with room for B, C, the sum
// and the broadcasts). A 64-byte vector on AVX2 is a register pair that GCC
// moves through the stack: 2-3x slower on a Zen 3.
#if defined(__AVX512F__)
typedef float ssm2_vec __attribute__((vector_size(64)));
#else
typedef float ssm2_vec __attribute__((vector_size(32)));
#endif
constexpr int kSsm2Lanes = static_cast<int>(sizeof(ssm2_vec) / sizeof(float));
constexpr int kSsm2RegVecs = 8;
constexpr int kSsm2Chunk = kSsm2Lanes * kSsm2RegVecs;  // states per chunk
// Tokens whose time steps and decays are computed at once, per head.
constexpr int kSsm2Tile = 64;

// The sum of a native vector's lanes, as a fixed tree.
__attribute__((always_inline)) inline float ssm2_hsum(ssm2_vec v) {
#if defined(__AVX512F__)
  return ssm_hsum(v);
#else
  typedef float f32x4 __attribute__((vector_size(16)));
  const f32x4 s4 = __builtin_shufflevector(v, v, 0, 1, 2, 3) + __builtin_shufflevector(v, v, 4, 5, 6, 7);
  return (s4[0] + s4[2]) + (s4[1] + s4[3]);
#endif
}

// What one tile of one head shares: its tokens, their time steps and decays.
struct Ssm2Tile {
  int64_t t0;
  int nt;
  const float* dts;
  const float* decay;
  int64_t g_off;  // the head's group's first B/C value
  float dv;       // the head's skip D
};

// NV native vectors of channel c's states, from state s0, in registers over
// the tile. The first chunk of a channel writes y (plus D x), the others add.
template <int NV>
__attribute__((always_inline)) inline void ssm2_chunk(const SsmScanArgs& a, const Ssm2Tile& tl, int c, int s0) {
  const int ds = a.dims.d_state, d_inner = a.dims.d_inner;
  float* st = a.state + static_cast<int64_t>(c) * ds + s0;
  ssm2_vec h[NV];
  for (int v = 0; v < NV; ++v) __builtin_memcpy(&h[v], st + kSsm2Lanes * v, sizeof h[v]);
  for (int i = 0; i < tl.nt; ++i) {
    const int64_t t = tl.t0 + i;
    const float xv = a.x[t * a.x_stride + c], xdt = xv * tl.dts[i], dec = tl.decay[i];
    const float* b = a.b + t * a.bc_stride + tl.g_off + s0;
    const float* cc = a.c + t * a.bc_stride + tl.g_off + s0;
    ssm2_vec acc = {};
    for (int v = 0; v < NV; ++v) {
      ssm2_vec bv, cv;
      __builtin_memcpy(&bv, b + kSsm2Lanes * v, sizeof bv);
      __builtin_memcpy(&cv, cc + kSsm2Lanes * v, sizeof cv);
      h[v] = h[v] * dec + bv * xdt;
      acc += h[v] * cv;
    }
    float& y = a.y[t * d_inner + c];  // gated later
    y = s0 == 0 ? ssm2_hsum(acc) + tl.dv * xv : y + ssm2_hsum(acc);
    for (int k = 0; k < a.n_snaps; ++k) {
      if (a.snaps[k].after != t + 1) continue;
      float* sn = a.snaps[k].ssm + static_cast<int64_t>(c) * ds + s0;
      for (int v = 0; v < NV; ++v) __builtin_memcpy(sn + kSsm2Lanes * v, &h[v], sizeof h[v]);
    }
  }
  for (int v = 0; v < NV; ++v) __builtin_memcpy(st + kSsm2Lanes * v, &h[v], sizeof h[v]);
}

// The states [s0, d_state) left after the whole vectors (fewer than a
// native vector's lanes), as one partial 16-lane vector through the state array.
void ssm2_rest(const SsmScanArgs& a, const Ssm2Tile& tl, int c, int s0) {
  const int ds = a.dims.d_state, d_inner = a.dims.d_inner;
  float* st = a.state + static_cast<int64_t>(c) * ds;
  for (int i = 0; i < tl.nt; ++i) {
    const int64_t t = tl.t0 + i;
    const float xv = a.x[t * a.x_stride + c], xdt = xv * tl.dts[i], dec = tl.decay[i];
    const float* b = a.b + t * a.bc_stride + tl.g_off;
    const float* cc = a.c + t * a.bc_stride + tl.g_off;
    ssm_f32x16 acc = {};
    for (int s = s0; s < ds; s += 16) {
      const int n = ds - s < 16 ? ds - s : 16;
      const ssm_f32x16 hv = ssm_load(st + s, n) * dec + ssm_load(b + s, n) * xdt;
      ssm_store(st + s, hv, n);
      acc += hv * ssm_load(cc + s, n);
    }
    float& y = a.y[t * d_inner + c];
    y = s0 == 0 ? ssm_hsum(acc) + tl.dv * xv : y + ssm_hsum(acc);
    for (int k = 0; k < a.n_snaps; ++k)
      if (a.snaps[k].after == t + 1)
        for (int s = s0; s < ds; ++s) a.snaps[k].ssm[static_cast<int64_t>(c) * ds + s] = st[s];
  }
}

// Mamba-2: one channel at a time, its d_state states side by side
// ([d_inner][d_state], llama.cpp's layout), chunk by chunk in registers over a
// tile of tokens; B and C of the channel's group are vectors too, the output
// one horizontal sum per chunk. A head's time steps and decays are computed
// once per tile of tokens, the gate once per row at the end.
void ssm_scan2_impl(const SsmScanArgs& a, int c0, int c1) {
  const int d_inner = a.dims.d_inner, ds = a.dims.d_state, hd = a.head_dim;
  const int heads_per_group = d_inner / hd / a.n_group;
  const int whole = ds / kSsm2Chunk * kSsm2Chunk;  // states in whole chunks
  const int n_rest_vecs = (ds - whole) / kSsm2Lanes;  // then whole native vectors
  const int rest = whole + n_rest_vecs * kSsm2Lanes;  // then a partial vector from here
  for (int head = c0 / hd; head * hd < c1; ++head) {
    const int cb = c0 > head * hd ? c0 : head * hd, ce = c1 < (head + 1) * hd ? c1 : (head + 1) * hd;
    const float an = a.a[head], bias = a.dt_bias[head];
    for (int64_t t0 = 0; t0 < a.n_tokens; t0 += kSsm2Tile) {
      const int nt = a.n_tokens - t0 < kSsm2Tile ? static_cast<int>(a.n_tokens - t0) : kSsm2Tile;
      float dts[kSsm2Tile], decay[kSsm2Tile], raw[kSsm2Tile] = {};
      for (int i = 0; i < nt; ++i) raw[i] = a.dt[(t0 + i) * a.dt_stride + head] + bias;
      for (int i = 0; i < nt; i += 16) {
        const ssm_f32x16 sp = softplus16(ssm_load(raw + i, 16));
        ssm_store(dts + i, sp, 16);
        ssm_store(decay + i, exp16(sp * an), 16);
      }
      const Ssm2Tile tl{t0, nt, dts, decay, static_cast<int64_t>(head / heads_per_group) * ds, a.d[head]};
      for (int c = cb; c < ce; ++c) {
        for (int s0 = 0; s0 < whole; s0 += kSsm2Chunk) ssm2_chunk<kSsm2RegVecs>(a, tl, c, s0);
        switch (n_rest_vecs) {  // fewer than kSsm2RegVecs (8)
          case 1: ssm2_chunk<1>(a, tl, c, whole); break;
          case 2: ssm2_chunk<2>(a, tl, c, whole); break;
          case 3: ssm2_chunk<3>(a, tl, c, whole); break;
          case 4: ssm2_chunk<4>(a, tl, c, whole); break;
          case 5: ssm2_chunk<5>(a, tl, c, whole); break;
          case 6: ssm2_chunk<6>(a, tl, c, whole); break;
          case 7: ssm2_chunk<7>(a, tl, c, whole); break;
          default: break;
        }
        if (rest < ds) ssm2_rest(a, tl, c, rest);
      }
    }
  }
  for (int64_t t = 0; t < a.n_tokens; ++t)
    for (int c = c0; c < c1; c += 16) {
      const int lanes = c1 - c < 16 ? c1 - c : 16;
      float* y = a.y + t * d_inner + c;
      ssm_store(y, ssm_load(y, lanes) * silu16(ssm_load(a.z + t * a.z_stride + c, lanes)), lanes);
    }
}

// 16 channels at a time, token by token; h[s] holds state s of the block's channels.
void ssm_scan_impl(const SsmScanArgs& a, int c0, int c1) {
  if (a.head_dim > 0) return ssm_scan2_impl(a, c0, c1);
  const int d_inner = a.dims.d_inner, d_state = a.dims.d_state;
  for (int c = c0; c < c1; c += 16) {
    const int lanes = c1 - c < 16 ? c1 - c : 16;
    const bool in_regs = d_state <= kSsmRegStates;
    ssm_f32x16 h[kSsmRegStates];
    if (in_regs)
      for (int s = 0; s < d_state; ++s) h[s] = ssm_load(a.state + static_cast<int64_t>(s) * d_inner + c, lanes);
    const ssm_f32x16 dv = ssm_load(a.d + c, lanes);
    for (int64_t t = 0; t < a.n_tokens; ++t) {
      const ssm_f32x16 dt = softplus16(ssm_load(a.dt + t * a.dt_stride + c, lanes));
      const ssm_f32x16 xv = ssm_load(a.x + t * a.x_stride + c, lanes);
      const ssm_f32x16 xdt = xv * dt;
      const float* b = a.b + t * a.bc_stride;
      const float* cc = a.c + t * a.bc_stride;
      ssm_f32x16 y = {};
      for (int s = 0; s < d_state; ++s) {
        const ssm_f32x16 an = ssm_load(a.a + static_cast<int64_t>(s) * d_inner + c, lanes);
        float* hp = a.state + static_cast<int64_t>(s) * d_inner + c;
        ssm_f32x16 hs = in_regs ? h[s] : ssm_load(hp, lanes);
        hs = hs * exp16(an * dt) + b[s] * xdt;
        if (in_regs)
          h[s] = hs;
        else
          ssm_store(hp, hs, lanes);
        y += hs * cc[s];
      }
      y += dv * xv;
      ssm_store(a.y + t * d_inner + c, y * silu16(ssm_load(a.z + t * a.z_stride + c, lanes)), lanes);
      for (int k = 0; k < a.n_snaps; ++k) {
        if (a.snaps[k].after != t + 1) continue;
        for (int s = 0; s < d_state; ++s) {
          const int64_t at = static_cast<int64_t>(s) * d_inner + c;
          ssm_store(a.snaps[k].ssm + at, in_regs ? h[s] : ssm_load(a.state + at, lanes), lanes);
        }
      }
    }
    if (in_regs)
      for (int s = 0; s < d_state; ++s) ssm_store(a.state + static_cast<int64_t>(s) * d_inner + c, h[s], lanes);
  }
}

}  // namespace
}  // namespace tern::kernels
