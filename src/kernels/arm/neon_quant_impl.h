// kernels/arm/neon_quant_impl.h — the quantized AArch64 tiles, compiled once per
// level (neon_quant.cpp, neon_quant_dot.cpp, neon_quant_i8mm.cpp; see arm_impl.h).
//
// A tile is 4 weight rows x C activation columns (C <= 4 for the 32-element
// types, <= 2 for the K-quants); a tile of fewer rows reads its last row again
// in the spare lanes, and the i8mm form pairs an odd last column with itself,
// so every output is computed by the same operations whatever the shape.
//
//   32-element blocks:  s = dot(w codes, x codes), exact in int32;
//                       acc += f32(s) * (dw * dx)               (one FMA per block)
//   K-quant super-blocks (256): s = sum over sub-blocks of scale * dot (+ Q6_K's
//                       -32 * scale * bsum), exact in int32;
//                       t = f32(s) * d [- f32(sum of min * bsum) * dmin];  acc += t * dx
//
// The integer dot products are SDOT at the dotprod level, SMMLA (2x2 outputs
// over 8 elements) at the i8mm level, and SMULL + SMLAL2 + SADALP at the
// baseline: int16 pairs |w x + w' x'| <= 2 * 128 * 127 < 2^15, since the
// activations' codes are within +-127.
#pragma once

#include <arm_neon.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "kernels/arm/arm_impl.h"
#include "kernels/arm/tile_dispatch.h"
#include "kernels/kquant_scales.h"
#include "quant/blocks.h"
#include "quant/k_blocks.h"

namespace tern::kernels::arm {
namespace {

using gguf::GgmlType;

inline float f16_at(const uint8_t* p) {
  __fp16 h;
  std::memcpy(&h, p, 2);
  return static_cast<float>(h);
}

// acc + the dot products of a and b by groups of 4 bytes (lane i: bytes 4i..4i+3),
// or, at the baseline, by another grouping of the same 16 products: callers
// only ever add all four lanes of a sum, exactly.
inline int32x4_t dot16(int32x4_t acc, int8x16_t a, int8x16_t b) {
#if defined(__ARM_FEATURE_DOTPROD)
  return vdotq_s32(acc, a, b);
#else
  return vpadalq_s16(acc, vmlal_high_s8(vmull_s8(vget_low_s8(a), vget_low_s8(b)), a, b));
#endif
}

// Lane r = the sum of all lanes of s[r] (exact).
inline int32x4_t sum_lanes4(const int32x4_t s[4]) {
  return vpaddq_s32(vpaddq_s32(s[0], s[1]), vpaddq_s32(s[2], s[3]));
}

// Rows of a 4-row tile: rows past n_rows repeat the last one.
inline void tile_rows(const uint8_t* w, size_t w_stride, int n_rows, const uint8_t* rows[4]) {
  for (int r = 0; r < 4; ++r) rows[r] = w + static_cast<size_t>(r < n_rows ? r : n_rows - 1) * w_stride;
}

template <int C>
inline void store_rows(const float32x4_t acc[C], int n_rows, float* y, size_t ldy) {
  for (int c = 0; c < C; ++c) {
    float v[4];
    vst1q_f32(v, acc[c]);
    for (int r = 0; r < n_rows; ++r) y[c * ldy + r] = v[r];
  }
}

// ---- 32-element blocks against Q8_0 activations ----------------------------

struct Q4_0 {
  static constexpr size_t kBytes = sizeof(quant::BlockQ4_0);
  static void load(const uint8_t* p, int8x16_t& lo, int8x16_t& hi, float& d) {
    const uint8x16_t b = vld1q_u8(p + 2);
    lo = vsubq_s8(vreinterpretq_s8_u8(vandq_u8(b, vdupq_n_u8(0x0f))), vdupq_n_s8(8));
    hi = vsubq_s8(vreinterpretq_s8_u8(vshrq_n_u8(b, 4)), vdupq_n_s8(8));
    d = f16_at(p);
  }
};

struct Q8_0 {
  static constexpr size_t kBytes = sizeof(quant::BlockQ8_0);
  static void load(const uint8_t* p, int8x16_t& lo, int8x16_t& hi, float& d) {
    lo = vld1q_s8(reinterpret_cast<const int8_t*>(p + 2));
    hi = vld1q_s8(reinterpret_cast<const int8_t*>(p + 18));
    d = f16_at(p);
  }
};

// Nibbles indexing the 16 non-uniform IQ4_NL levels (one TBL per half).
struct Iq4Nl {
  static constexpr size_t kBytes = sizeof(quant::BlockIq4Nl);
  static void load(const uint8_t* p, int8x16_t& lo, int8x16_t& hi, float& d) {
    const int8x16_t table = vld1q_s8(quant::kIq4nlValues);
    const uint8x16_t b = vld1q_u8(p + 2);
    lo = vqtbl1q_s8(table, vandq_u8(b, vdupq_n_u8(0x0f)));
    hi = vqtbl1q_s8(table, vshrq_n_u8(b, 4));
    d = f16_at(p);
  }
};

constexpr size_t kQ8Bytes = sizeof(quant::BlockQ8_0);

template <class WT>
struct LegacyTile {
  template <int C>
  static void tile(int64_t n, const uint8_t* w, size_t w_stride, int n_rows, const uint8_t* x, size_t x_stride,
                   float* y, size_t ldy) {
    const uint8_t* rows[4];
    tile_rows(w, w_stride, n_rows, rows);
#if defined(__ARM_FEATURE_MATMUL_INT8)
    // acc[p][q]: rows 2p, 2p+1 x columns 2q, 2q+1 (an odd last column twice),
    // lanes [r c, r c', r' c, r' c'] as SMMLA writes them.
    constexpr int kPairs = (C + 1) / 2;
    float32x4_t acc[2][kPairs];
    for (auto& a : acc)
      for (auto& v : a) v = vdupq_n_f32(0.0f);
    for (int64_t ib = 0; ib < n / 32; ++ib) {
      int8x16_t wl[4], wh[4];
      float dw[4];
      for (int r = 0; r < 4; ++r) WT::load(rows[r] + ib * WT::kBytes, wl[r], wh[r], dw[r]);
      // 8-byte chunks of two rows side by side: SMMLA's 2 x 8 operands.
      int8x16_t wp[2][4];
      for (int p = 0; p < 2; ++p) {
        const int64x2_t l0 = vreinterpretq_s64_s8(wl[2 * p]), l1 = vreinterpretq_s64_s8(wl[2 * p + 1]);
        const int64x2_t h0 = vreinterpretq_s64_s8(wh[2 * p]), h1 = vreinterpretq_s64_s8(wh[2 * p + 1]);
        wp[p][0] = vreinterpretq_s8_s64(vzip1q_s64(l0, l1));
        wp[p][1] = vreinterpretq_s8_s64(vzip2q_s64(l0, l1));
        wp[p][2] = vreinterpretq_s8_s64(vzip1q_s64(h0, h1));
        wp[p][3] = vreinterpretq_s8_s64(vzip2q_s64(h0, h1));
      }
      for (int q = 0; q < kPairs; ++q) {
        const uint8_t* x0 = x + 2 * q * x_stride + ib * kQ8Bytes;
        const uint8_t* x1 = x + (2 * q + 1 < C ? 2 * q + 1 : 2 * q) * x_stride + ib * kQ8Bytes;
        const int64x2_t a0 = vreinterpretq_s64_s8(vld1q_s8(reinterpret_cast<const int8_t*>(x0 + 2)));
        const int64x2_t a1 = vreinterpretq_s64_s8(vld1q_s8(reinterpret_cast<const int8_t*>(x1 + 2)));
        const int64x2_t b0 = vreinterpretq_s64_s8(vld1q_s8(reinterpret_cast<const int8_t*>(x0 + 18)));
        const int64x2_t b1 = vreinterpretq_s64_s8(vld1q_s8(reinterpret_cast<const int8_t*>(x1 + 18)));
        const int8x16_t xp[4] = {vreinterpretq_s8_s64(vzip1q_s64(a0, a1)), vreinterpretq_s8_s64(vzip2q_s64(a0, a1)),
                                 vreinterpretq_s8_s64(vzip1q_s64(b0, b1)), vreinterpretq_s8_s64(vzip2q_s64(b0, b1))};
        const float dx0 = f16_at(x0), dx1 = f16_at(x1);
        const float32x4_t vdx = {dx0, dx1, dx0, dx1};
        for (int p = 0; p < 2; ++p) {
          int32x4_t s = vdupq_n_s32(0);
          for (int k = 0; k < 4; ++k) s = vmmlaq_s32(s, wp[p][k], xp[k]);
          const float32x4_t vdw = {dw[2 * p], dw[2 * p], dw[2 * p + 1], dw[2 * p + 1]};
          acc[p][q] = vfmaq_f32(acc[p][q], vcvtq_f32_s32(s), vmulq_f32(vdw, vdx));
        }
      }
    }
    for (int p = 0; p < 2; ++p)
      for (int q = 0; q < kPairs; ++q) {
        float v[4];
        vst1q_f32(v, acc[p][q]);
        for (int i = 0; i < 4; ++i) {
          const int r = 2 * p + i / 2, c = 2 * q + i % 2;
          if (r < n_rows && c < C) y[c * ldy + r] = v[i];
        }
      }
#else
    // acc[c]: lane r = row r's output for column c.
    float32x4_t acc[C];
    for (auto& a : acc) a = vdupq_n_f32(0.0f);
    for (int64_t ib = 0; ib < n / 32; ++ib) {
      int8x16_t wl[4], wh[4];
      float dw[4];
      for (int r = 0; r < 4; ++r) WT::load(rows[r] + ib * WT::kBytes, wl[r], wh[r], dw[r]);
      const float32x4_t vdw = vld1q_f32(dw);
      for (int c = 0; c < C; ++c) {
        const uint8_t* xb = x + c * x_stride + ib * kQ8Bytes;
        const int8x16_t xl = vld1q_s8(reinterpret_cast<const int8_t*>(xb + 2));
        const int8x16_t xh = vld1q_s8(reinterpret_cast<const int8_t*>(xb + 18));
        int32x4_t s[4];
        for (int r = 0; r < 4; ++r) s[r] = dot16(dot16(vdupq_n_s32(0), wl[r], xl), wh[r], xh);
        acc[c] = vfmaq_f32(acc[c], vcvtq_f32_s32(sum_lanes4(s)), vmulq_n_f32(vdw, f16_at(xb)));
      }
    }
    store_rows<C>(acc, n_rows, y, ldy);
#endif
  }
};

// ---- K-quant super-blocks against Q8_K activations -------------------------

constexpr size_t kQ8KBytes = sizeof(quant::BlockQ8_K);
constexpr int kQ8KQs = 4, kQ8KBsums = 4 + quant::kQK_K;  // byte offsets of qs and bsums

// One row's super-block, prepared: its codes by 32-element chunk j (0..7) as
// int8, the scale of each 16-element half of a chunk, and the terms that
// multiply the activations' 16-element sums (bsums).
struct KRow {
  const uint8_t* b;
  int16_t scale[16];  // 16-element sub-block k's scale
  int16x8_t bsum_w[2];  // weights of bsums 0..7 / 8..15 in the integer sum (Q6_K: -32 * scale)
  int16x8_t min_w[2];   // weights of bsums in the min term (Q4_K: the sub-block's min), else unused
  float d, dmin;
};

struct Q4K {
  static constexpr size_t kBytes = sizeof(quant::BlockQ4_K);
  static constexpr bool kMins = true;
  static void prepare(const uint8_t* b, KRow& row) {
    uint64_t sc, m;
    unpack_q4k_scales(b + 4, &sc, &m);
    row.b = b;
    uint8_t scb[8], mb[8];
    std::memcpy(scb, &sc, 8);
    std::memcpy(mb, &m, 8);
    for (int k = 0; k < 16; ++k) row.scale[k] = scb[k / 2];
    // bsum k (elements 16k..) belongs to sub-block k / 2: every min twice.
    const uint8x8_t m8 = vld1_u8(mb);
    row.min_w[0] = vreinterpretq_s16_u16(vmovl_u8(vzip1_u8(m8, m8)));
    row.min_w[1] = vreinterpretq_s16_u16(vmovl_u8(vzip2_u8(m8, m8)));
    row.d = f16_at(b);
    row.dmin = f16_at(b + 2);
  }
  // Chunk j: 32 bytes of qs[32 (j / 2)], low nibbles for even j, high for odd.
  static void quants(const KRow& row, int j, int8x16_t& lo, int8x16_t& hi) {
    const uint8_t* q = row.b + 16 + 32 * (j / 2);
    uint8x16_t a = vld1q_u8(q), b = vld1q_u8(q + 16);
    if (j % 2) {
      a = vshrq_n_u8(a, 4);
      b = vshrq_n_u8(b, 4);
    } else {
      a = vandq_u8(a, vdupq_n_u8(0x0f));
      b = vandq_u8(b, vdupq_n_u8(0x0f));
    }
    lo = vreinterpretq_s8_u8(a);
    hi = vreinterpretq_s8_u8(b);
  }
};

struct Q6K {
  static constexpr size_t kBytes = sizeof(quant::BlockQ6_K);
  static constexpr bool kMins = false;
  static void prepare(const uint8_t* b, KRow& row) {
    row.b = b;
    const int8x16_t sc = vld1q_s8(reinterpret_cast<const int8_t*>(b + 192));
    const int16x8_t lo = vmovl_s8(vget_low_s8(sc)), hi = vmovl_high_s8(sc);
    vst1q_s16(row.scale, lo);
    vst1q_s16(row.scale + 8, hi);
    row.bsum_w[0] = vmulq_n_s16(lo, -32);
    row.bsum_w[1] = vmulq_n_s16(hi, -32);
    row.d = f16_at(b + 208);
  }
  // Chunk j = 128h + 32p: low 4 bits from ql[64h + 32(p & 1)] (nibble p >> 1),
  // top 2 from qh[32h] (bits 2p); codes 0..63 (the -32 is in bsum_w).
  static void quants(const KRow& row, int j, int8x16_t& lo, int8x16_t& hi) {
    const int h = j / 4, p = j % 4;
    const uint8_t* ql = row.b + 64 * h + 32 * (p & 1);
    const uint8_t* qh = row.b + 128 + 32 * h;
    uint8x16_t l0 = vld1q_u8(ql), l1 = vld1q_u8(ql + 16);
    if (p >> 1) {
      l0 = vshrq_n_u8(l0, 4);
      l1 = vshrq_n_u8(l1, 4);
    } else {
      l0 = vandq_u8(l0, vdupq_n_u8(0x0f));
      l1 = vandq_u8(l1, vdupq_n_u8(0x0f));
    }
    const int8x16_t shift = vdupq_n_s8(static_cast<int8_t>(-2 * p));  // right shift by 2p
    const uint8x16_t h0 = vandq_u8(vshlq_u8(vld1q_u8(qh), shift), vdupq_n_u8(3));
    const uint8x16_t h1 = vandq_u8(vshlq_u8(vld1q_u8(qh + 16), shift), vdupq_n_u8(3));
    lo = vreinterpretq_s8_u8(vorrq_u8(l0, vshlq_n_u8(h0, 4)));
    hi = vreinterpretq_s8_u8(vorrq_u8(l1, vshlq_n_u8(h1, 4)));
  }
};

// Sum of the 16 products a[k] * b[k] of two int16 x 16 (as two halves), exact in int32.
inline int32_t dot_i16x16(const int16x8_t a[2], const int16x8_t b[2]) {
  int32x4_t s = vmull_s16(vget_low_s16(a[0]), vget_low_s16(b[0]));
  s = vmlal_high_s16(s, a[0], b[0]);
  s = vmlal_s16(s, vget_low_s16(a[1]), vget_low_s16(b[1]));
  s = vmlal_high_s16(s, a[1], b[1]);
  return vaddvq_s32(s);
}

template <class KT>
struct KTile {
  template <int C>
  static void tile(int64_t n, const uint8_t* w, size_t w_stride, int n_rows, const uint8_t* x, size_t x_stride,
                   float* y, size_t ldy) {
    const uint8_t* rows[4];
    tile_rows(w, w_stride, n_rows, rows);
    float32x4_t acc[C];
    for (auto& a : acc) a = vdupq_n_f32(0.0f);
    for (int64_t ib = 0; ib < n / quant::kQK_K; ++ib) {
      KRow row[4];
      for (int r = 0; r < 4; ++r) KT::prepare(rows[r] + ib * KT::kBytes, row[r]);
      int32x4_t isum[4][C];
      for (auto& a : isum)
        for (auto& v : a) v = vdupq_n_s32(0);
      for (int j = 0; j < 8; ++j) {
        int8x16_t xl[C], xh[C];
        for (int c = 0; c < C; ++c) {
          const auto* xq = reinterpret_cast<const int8_t*>(x + c * x_stride + ib * kQ8KBytes + kQ8KQs + 32 * j);
          xl[c] = vld1q_s8(xq);
          xh[c] = vld1q_s8(xq + 16);
        }
        for (int r = 0; r < 4; ++r) {
          int8x16_t lo, hi;
          KT::quants(row[r], j, lo, hi);
          const int32_t s0 = row[r].scale[2 * j], s1 = row[r].scale[2 * j + 1];
          for (int c = 0; c < C; ++c) {
            isum[r][c] = vmlaq_n_s32(isum[r][c], dot16(vdupq_n_s32(0), lo, xl[c]), s0);
            isum[r][c] = vmlaq_n_s32(isum[r][c], dot16(vdupq_n_s32(0), hi, xh[c]), s1);
          }
        }
      }
      const float32x4_t vd = {row[0].d, row[1].d, row[2].d, row[3].d};
      for (int c = 0; c < C; ++c) {
        const uint8_t* xc = x + c * x_stride + ib * kQ8KBytes;
        int16x8_t bsums[2];
        bsums[0] = vld1q_s16(reinterpret_cast<const int16_t*>(xc + kQ8KBsums));
        bsums[1] = vld1q_s16(reinterpret_cast<const int16_t*>(xc + kQ8KBsums + 16));
        float dx;
        std::memcpy(&dx, xc, sizeof dx);
        const int32x4_t col[4] = {isum[0][c], isum[1][c], isum[2][c], isum[3][c]};
        const int32x4_t s = sum_lanes4(col);
        int32_t extra[4];
        for (int r = 0; r < 4; ++r) extra[r] = dot_i16x16(KT::kMins ? row[r].min_w : row[r].bsum_w, bsums);
        float32x4_t t;
        if constexpr (KT::kMins) {
          const float32x4_t vdmin = {row[0].dmin, row[1].dmin, row[2].dmin, row[3].dmin};
          t = vfmsq_f32(vmulq_f32(vcvtq_f32_s32(s), vd), vcvtq_f32_s32(vld1q_s32(extra)),
                        vdmin);
        } else {
          t = vmulq_f32(vcvtq_f32_s32(vaddq_s32(s, vld1q_s32(extra))), vd);
        }
        acc[c] = vfmaq_n_f32(acc[c], t, dx);
      }
    }
    store_rows<C>(acc, n_rows, y, ldy);
  }

};

// The family's table at level L (the level this file is compiled for):
// nullptr for a type it has no kernel for. kKQuants: whether the level has
// K-quant tiles of its own.
template <CpuLevel L, bool kKQuants>
const MatmulKernels* quant_table(GgmlType t) {
  static constexpr MatmulKernels kLegacy[] = {
      {GgmlType::Q8_0, quantize_act_q8_0, dispatch<LegacyTile<Q4_0>, 4>, 4, 4, L},
      {GgmlType::Q8_0, quantize_act_q8_0, dispatch<LegacyTile<Q8_0>, 4>, 4, 4, L},
      {GgmlType::Q8_0, quantize_act_q8_0, dispatch<LegacyTile<Iq4Nl>, 4>, 4, 4, L},
  };
  switch (t) {
    case GgmlType::Q4_0: return &kLegacy[0];
    case GgmlType::Q8_0: return &kLegacy[1];
    case GgmlType::IQ4_NL: return &kLegacy[2];
    default: break;
  }
  if constexpr (kKQuants) {
    static constexpr MatmulKernels kK[] = {
        {GgmlType::Q8_K, quantize_act_q8_k, dispatch<KTile<Q4K>, 2>, 4, 2, L},
        {GgmlType::Q8_K, quantize_act_q8_k, dispatch<KTile<Q6K>, 2>, 4, 2, L},
    };
    if (t == GgmlType::Q4_K) return &kK[0];
    if (t == GgmlType::Q6_K) return &kK[1];
  }
  return nullptr;
}

}  // namespace
}  // namespace tern::kernels::arm
