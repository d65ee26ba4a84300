// AVX-512 VNNI panel kernels for Q4_K / Q5_K / Q6_K: up to 32 weight rows x any number
// of activation columns per call. Every tile of these types runs here, prompt and
// decode alike, so that a (row, token) result is the same sequence of operations
// whatever the batch (bit-exact batch invariance; see the tests).
//
// Row-per-lane layout: zmm lane r holds one dword (4 consecutive weights) of
// row r. One broadcast activation dword feeds two vpdpbusd (rows 0..15 and
// 16..31), and after a sub-block's dwords every lane holds its row's integer
// sub-block dot, scaled once per 8 (Q4_K) or 4 (Q6_K) vpdpbusd:
//
//   t[c][h] = sum_k vpdpbusd(0, W[e][h], bcast(x_c dword e))     e = the sub-block's dwords
//   sb[c][h] += f32(t) * (d * scale_s)                            lane r = row 16h + r
//   sb[c][h] -= f32(sum_j vpdpwssd(pair[j][h], bcast(x_c bsums dword j))) * (dmin | 32 d)
//   out[c][h] += sb[c][h] * dx_c                                  once per super-block
//
// Measured on Zen 5: one broadcast load per vpdpbusd caps it near 1.4/cycle,
// one per two reaches the 2/cycle peak; 16 independent chains per sub-block
// (8 columns x 2 halves) cover vpdpbusd's 5-cycle latency. Each super-block's
// weights are decoded once into row-per-lane form (an 8 KB buffer that stays
// in L1) and shared by up to 32 columns; activations are read in place (one
// base register per column, constant offsets) and prefetched a block ahead. Same arithmetic as
// avx512_kquants.cpp: integer dots are exact, f32 only in the scaling.
#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "kernels/x86/avx512_util.h"
#include "kernels/x86/x86_impl.h"
#include "quant/k_blocks.h"

namespace tern::kernels::x86 {
namespace {

constexpr int kHalves = 2;                     // 16-row halves of a panel
constexpr int kGroupCols = 8;                  // columns sharing one pass over the decoded weights
constexpr int kMaxCols = 32;                   // columns whose results are accumulated at once
constexpr int kDwords = quant::kQK_K / 4;      // activation dwords per super-block
constexpr size_t kXBytes = sizeof(quant::BlockQ8_K);

// One super-block of 32 rows in row-per-lane form: [h] = rows 16h .. 16h + 15.
struct Decoded {
  __m512i w[kDwords][kHalves];  // unsigned weights of element dword e
  __m512 scale[16][kHalves];    // d * sub-block scale (Q4_K uses 8)
  __m512i pair[8][kHalves];     // int16 pairs dotted with bsums dword j
  __m512 corr_scale[kHalves];   // dmin (Q4_K) or 32 d (Q6_K)
};

// Dwords j..j+3 (the 16 bytes at rows[r] + off, r < 16) -> out[i] lane r = row r's dword j + i.
inline void transpose_16x4(const uint8_t* const* rows, size_t off, __m512i out[4]) {
  __m512i a[4];  // a[q] 128-bit lane L = the 16 bytes of row 4L + q
  for (int q = 0; q < 4; ++q) {
    __m512i v = _mm512_castsi128_si512(load_128(rows[q] + off));
    v = _mm512_inserti32x4(v, load_128(rows[4 + q] + off), 1);
    v = _mm512_inserti32x4(v, load_128(rows[8 + q] + off), 2);
    a[q] = _mm512_inserti32x4(v, load_128(rows[12 + q] + off), 3);
  }
  const __m512i t0 = _mm512_unpacklo_epi32(a[0], a[1]), t1 = _mm512_unpackhi_epi32(a[0], a[1]);
  const __m512i t2 = _mm512_unpacklo_epi32(a[2], a[3]), t3 = _mm512_unpackhi_epi32(a[2], a[3]);
  out[0] = _mm512_unpacklo_epi64(t0, t2);
  out[1] = _mm512_unpackhi_epi64(t0, t2);
  out[2] = _mm512_unpacklo_epi64(t1, t3);
  out[3] = _mm512_unpackhi_epi64(t1, t3);
}

// Dwords 0..15 (the 64 bytes at rows[r] + off) of 16 rows -> out[j] lane r = row r's dword j.
// Unpacks within 128-bit lanes, then a 4 x 4 transpose of 128-bit lanes: ~1.6x faster per byte
// than four transpose_16x4 (which spend a lane insert per 16 bytes).
inline void transpose_16x16(const uint8_t* const* rows, size_t off, __m512i out[16]) {
  __m512i a[16], b[16];
  for (int i = 0; i < 8; ++i) {
    const __m512i r0 = load_512(rows[2 * i] + off), r1 = load_512(rows[2 * i + 1] + off);
    a[2 * i] = _mm512_unpacklo_epi32(r0, r1);
    a[2 * i + 1] = _mm512_unpackhi_epi32(r0, r1);
  }
  for (int i = 0; i < 4; ++i) {  // b[4i + m], 128-bit lane L: rows 4i..4i+3 of dword 4L + m
    b[4 * i + 0] = _mm512_unpacklo_epi64(a[4 * i], a[4 * i + 2]);
    b[4 * i + 1] = _mm512_unpackhi_epi64(a[4 * i], a[4 * i + 2]);
    b[4 * i + 2] = _mm512_unpacklo_epi64(a[4 * i + 1], a[4 * i + 3]);
    b[4 * i + 3] = _mm512_unpackhi_epi64(a[4 * i + 1], a[4 * i + 3]);
  }
  for (int m = 0; m < 4; ++m) {
    const __m512i c0 = _mm512_shuffle_i32x4(b[m], b[4 + m], 0x88), c1 = _mm512_shuffle_i32x4(b[m], b[4 + m], 0xdd);
    const __m512i c2 = _mm512_shuffle_i32x4(b[8 + m], b[12 + m], 0x88), c3 = _mm512_shuffle_i32x4(b[8 + m], b[12 + m], 0xdd);
    out[m] = _mm512_shuffle_i32x4(c0, c2, 0x88);
    out[8 + m] = _mm512_shuffle_i32x4(c0, c2, 0xdd);
    out[4 + m] = _mm512_shuffle_i32x4(c1, c3, 0x88);
    out[12 + m] = _mm512_shuffle_i32x4(c1, c3, 0xdd);
  }
}

// The 32 rows of a panel; rows at or past n_rows repeat the last real row
// (their lanes are computed but never stored), so every load stays in bounds.
struct PanelRows {
  const uint8_t* p[32];
  PanelRows(const uint8_t* w, size_t w_stride, int n_rows) {
    for (int r = 0; r < 32; ++r) p[r] = w + static_cast<size_t>(r < n_rows ? r : n_rows - 1) * w_stride;
  }
};

// Lanes of half h that hold real rows.
inline __mmask16 row_mask(int n_rows, int h) {
  const int k = n_rows - 16 * h;
  return k >= 16 ? static_cast<__mmask16>(0xffff) : k <= 0 ? static_cast<__mmask16>(0) : static_cast<__mmask16>((1u << k) - 1);
}

inline __m512i bcast_dword(const uint8_t* p) { return _mm512_set1_epi32(static_cast<int>(load_u32(p))); }

// Where one super-block of the panel's 32 rows comes from. Both sources give
// the decoder the same values in the same lanes (identical results); the
// packed one replaces the transposes with plain loads.
//
// Rows in place: row r's super-block at rows[r] + off.
struct RowSource {
  const uint8_t* const* rows;  // [32]
  size_t off;
  // Dwords j..j+3 / j..j+15 of the block, lane r = row 16h + r.
  void dw4(int h, int j, __m512i out[4]) const { transpose_16x4(rows + 16 * h, off + 4 * j, out); }
  void dw16(int h, int j, __m512i out[16]) const { transpose_16x16(rows + 16 * h, off + 4 * j, out); }
  // Q6_K: the fp16 d in the block's last two bytes (read as dword 3 of the 16 bytes at 194,
  // which stay inside the block).
  __m512i tail16(int h) const {
    __m512i t[4];
    transpose_16x4(rows + 16 * h, off + 194, t);
    return _mm512_srli_epi32(t[3], 16);
  }
};

// A packed super-block (MatmulKernels::pack: n_dw dwords, then 2 trailing bytes for Q6_K):
//   [h = 0, 1][dword j < n_dw][16 lanes x 4 bytes] [32 x 2 trailing bytes]
struct PackedSource {
  const uint8_t* blk;
  int n_dw;
  const uint8_t* at(int h, int j) const { return blk + static_cast<size_t>(h * n_dw + j) * 64; }
  void dw4(int h, int j, __m512i out[4]) const {
    for (int i = 0; i < 4; ++i) out[i] = load_512(at(h, j + i));
  }
  void dw16(int h, int j, __m512i out[16]) const {
    for (int i = 0; i < 16; ++i) out[i] = load_512(at(h, j + i));
  }
  __m512i tail16(int h) const {
    return _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(at(2, 0) + 32 * h)));
  }
};

// Unsigned / signed byte b (0..3) of every lane, as int32.
inline __m512i byte_u(__m512i v, int b) { return _mm512_and_si512(_mm512_srli_epi32(v, 8 * b), _mm512_set1_epi32(0xff)); }
inline __m512i byte_s(__m512i v, int b) { return _mm512_srai_epi32(_mm512_slli_epi32(v, 24 - 8 * b), 24); }

// The f32 half in bits [16h, 16h + 16) of every lane.
inline __m512 half_ps(__m512i v, int h) {
  return _mm512_cvtph_ps(_mm512_cvtepi32_epi16(h ? _mm512_srli_epi32(v, 16) : v));
}

// ---- Q4_K / Q5_K: sub-block s = element dwords 8s..8s+7; u = q (0..15, Q5_K 0..31) -----------

template <bool kFifth>
struct Q45KPanel {
  static constexpr size_t kBytes = kFifth ? sizeof(quant::BlockQ5_K) : sizeof(quant::BlockQ4_K);
  static constexpr int kQs = kFifth ? 48 : 16;  // qs offset; Q5_K's qh[32] sits at 16
  static constexpr int kSubDwords = 8;
  static constexpr int kDw = static_cast<int>(kBytes / 4);
  template <class Src>
  static void decode(const Src& src, Decoded& dec) {
    for (int h = 0; h < kHalves; ++h) {
      __m512i hdr[4];  // d | dmin << 16, then the 12 scale bytes as three words (unpack_q4k_scales)
      src.dw4(h, 0, hdr);
      const __m512 d = half_ps(hdr[0], 0);
      dec.corr_scale[h] = half_ps(hdr[0], 1);
      const __m512i m6 = _mm512_set1_epi32(0x3f3f3f3f), m4 = _mm512_set1_epi32(0x0f0f0f0f),
                    m2 = _mm512_set1_epi32(0x03030303);
      const __m512i sc_lo = _mm512_and_si512(hdr[1], m6), mn_lo = _mm512_and_si512(hdr[2], m6);
      const __m512i sc_hi = _mm512_or_si512(_mm512_and_si512(hdr[3], m4),
                                            _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(hdr[1], 6), m2), 4));
      const __m512i mn_hi = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi32(hdr[3], 4), m4),
                                            _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(hdr[2], 6), m2), 4));
      for (int s = 0; s < 8; ++s) {
        dec.scale[s][h] = _mm512_mul_ps(d, _mm512_cvtepi32_ps(byte_u(s < 4 ? sc_lo : sc_hi, s % 4)));
        const __m512i m = byte_u(s < 4 ? mn_lo : mn_hi, s % 4);
        dec.pair[s][h] = _mm512_or_si512(m, _mm512_slli_epi32(m, 16));  // bsums dword s = sub-block s's two halves
      }
      // Q5_K: the fifth bit of element dword e is bit e / 8 of each byte of qh dword e % 8.
      __m512i qh[8];
      if constexpr (kFifth) {
        src.dw4(h, 4, qh);
        src.dw4(h, 8, qh + 4);
      }
      // qs dword j = 8c + k: its low nibbles are element dword 16c + k, its high nibbles 16c + 8 + k.
      for (int g = 0; g < 2; ++g) {
        __m512i t[16];
        src.dw16(h, kQs / 4 + 16 * g, t);
        for (int i = 0; i < 16; ++i) {
          const int c = 2 * g + i / 8, k = i % 8;
          __m512i lo = _mm512_and_si512(t[i], _mm512_set1_epi8(0x0f));
          __m512i hi = _mm512_and_si512(_mm512_srli_epi32(t[i], 4), _mm512_set1_epi8(0x0f));
          if constexpr (kFifth) {
            const __m512i one = _mm512_set1_epi8(1);
            lo = _mm512_or_si512(lo, _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(qh[k], 2 * c), one), 4));
            hi = _mm512_or_si512(hi, _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(qh[k], 2 * c + 1), one), 4));
          }
          dec.w[16 * c + k][h] = lo;
          dec.w[16 * c + 8 + k][h] = hi;
        }
      }
    }
  }
};

// ---- Q6_K: sub-block s = element dwords 4s..4s+3; u = low4 | hi2 << 4 (0..63), value u - 32 --

struct Q6KPanel {
  static constexpr size_t kBytes = sizeof(quant::BlockQ6_K);
  static constexpr int kSubDwords = 4;
  static constexpr int kDw = 52;  // ql, qh, scales; then the fp16 d
  template <class Src>
  static void decode(const Src& src, Decoded& dec) {
    for (int h = 0; h < kHalves; ++h) {
      __m512i scw[4];
      src.dw4(h, 48, scw);  // scales[0..15] (int8)
      const __m512 d = half_ps(src.tail16(h), 0);
      dec.corr_scale[h] = _mm512_mul_ps(d, _mm512_set1_ps(32.0f));
      for (int s = 0; s < 16; ++s) dec.scale[s][h] = _mm512_mul_ps(d, _mm512_cvtepi32_ps(byte_s(scw[s / 4], s % 4)));
      for (int j = 0; j < 8; ++j) {  // (scale_2j, scale_2j+1) as int16, against bsums dword j
        const __m512i v = scw[j / 2];
        const __m512i lo = _mm512_srai_epi16(_mm512_slli_epi16(v, 8), 8), hi = _mm512_srai_epi16(v, 8);
        dec.pair[j][h] = j % 2 ? _mm512_mask_blend_epi16(0xaaaaaaaau, _mm512_srli_epi32(lo, 16), hi)
                               : _mm512_mask_blend_epi16(0xaaaaaaaau, lo, _mm512_slli_epi32(hi, 16));
      }
      // Element dword e = 32a + 8p + k (a: 128-element half, p: 32-element quarter): low 4 bits in
      // ql dword 16a + 8(p & 1) + k (nibble p >> 1), top 2 bits in qh dword 8a + k (bits 2p).
      __m512i qh_all[16];  // qh dwords 0..15
      src.dw16(h, 32, qh_all);
      for (int a = 0; a < 2; ++a) {
        __m512i ql[16];
        src.dw16(h, 16 * a, ql);
        const __m512i* qh = qh_all + 8 * a;
        for (int q = 0; q < 4; ++q)
          for (int k = 0; k < 8; ++k) {
            const __m512i lo = _mm512_and_si512(_mm512_srli_epi32(ql[8 * (q & 1) + k], 4 * (q >> 1)), _mm512_set1_epi8(0x0f));
            const __m512i hi = _mm512_and_si512(_mm512_srli_epi32(qh[k], 2 * q), _mm512_set1_epi8(0x03));
            dec.w[32 * a + 8 * q + k][h] = _mm512_or_si512(lo, _mm512_slli_epi32(hi, 4));
          }
      }
    }
  }
};

// One group of 8 columns over one decoded super-block: out[c][h] += its contribution.
// One group of C <= 8 columns over one decoded super-block. The operations on
// one (row, column) lane do not depend on C or on the other columns.
template <int kSubDwords, int C>
inline void group_block(const Decoded& dec, const uint8_t* const* xc, __m512 (*out)[kHalves]) {
  constexpr int kSubs = kDwords / kSubDwords;
  __m512 sb[C][kHalves];
  for (int c = 0; c < C; ++c) sb[c][0] = sb[c][1] = _mm512_setzero_ps();
  for (int s = 0; s < kSubs; ++s) {
    __m512i t[C][kHalves];
    for (int c = 0; c < C; ++c) t[c][0] = t[c][1] = _mm512_setzero_si512();
#pragma GCC unroll 8
    for (int k = 0; k < kSubDwords; ++k) {
      const int e = s * kSubDwords + k;
      const __m512i w0 = dec.w[e][0], w1 = dec.w[e][1];
#pragma GCC unroll 8
      for (int c = 0; c < C; ++c) {
        const __m512i xv = bcast_dword(xc[c] + 4 + 4 * e);
        t[c][0] = _mm512_dpbusd_epi32(t[c][0], w0, xv);
        t[c][1] = _mm512_dpbusd_epi32(t[c][1], w1, xv);
      }
    }
    const __m512 scale0 = dec.scale[s][0], scale1 = dec.scale[s][1];
#pragma GCC unroll 8
    for (int c = 0; c < C; ++c) {
      sb[c][0] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(t[c][0]), scale0, sb[c][0]);
      sb[c][1] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(t[c][1]), scale1, sb[c][1]);
    }
  }
  // Per column: the bsums correction (two short chains; columns overlap in flight), then the
  // super-block total into out.
  for (int c = 0; c < C; ++c) {
    __m512i corr0 = _mm512_setzero_si512(), corr1 = _mm512_setzero_si512();
#pragma GCC unroll 8
    for (int j = 0; j < 8; ++j) {
      const __m512i bv = bcast_dword(xc[c] + 4 + quant::kQK_K + 4 * j);
      corr0 = _mm512_dpwssd_epi32(corr0, bv, dec.pair[j][0]);
      corr1 = _mm512_dpwssd_epi32(corr1, bv, dec.pair[j][1]);
    }
    float dx;
    std::memcpy(&dx, xc[c], sizeof(dx));
    const __m512 vdx = _mm512_set1_ps(dx);
    out[c][0] = _mm512_fmadd_ps(_mm512_fnmadd_ps(_mm512_cvtepi32_ps(corr0), dec.corr_scale[0], sb[c][0]), vdx, out[c][0]);
    out[c][1] = _mm512_fmadd_ps(_mm512_fnmadd_ps(_mm512_cvtepi32_ps(corr1), dec.corr_scale[1], sb[c][1]), vdx, out[c][1]);
  }
}

template <int kSubDwords, int C>
void tail_group(const Decoded& dec, const uint8_t* const* xc, __m512 (*out)[kHalves], int n) {
  if constexpr (C > 1) {
    if (n < C) return tail_group<kSubDwords, C - 1>(dec, xc, out, n);
  }
  group_block<kSubDwords, C>(dec, xc, out);
}

// n_rows <= 32 rows x n_cols columns (any), in groups of 8 columns. kPacked:
// w is one packed panel (MatmulKernels::pack), w_stride unused.
template <class PT, bool kPacked>
void panel(int64_t n, const uint8_t* w, size_t w_stride, int n_rows, const uint8_t* x, size_t x_stride, int n_cols,
           float* y, size_t ldy) {
  const PanelRows rows(w, kPacked ? 0 : w_stride, n_rows);
  constexpr size_t kPackedBlock = 32 * PT::kBytes;
  alignas(64) Decoded dec;
  const int64_t n_blocks = n / quant::kQK_K;
  for (int c0 = 0; c0 < n_cols; c0 += kMaxCols) {  // columns in chunks of 32 (out stays in L1)
    const int nc = n_cols - c0 < kMaxCols ? n_cols - c0 : kMaxCols;
    __m512 out[kMaxCols][kHalves];
    for (int c = 0; c < nc; ++c) out[c][0] = out[c][1] = _mm512_setzero_ps();
    for (int64_t ib = 0; ib < n_blocks; ++ib) {
      if (nc >= kGroupCols) {
        // GEMM: the next super-block's activations and weights, from L2 (x is read in place).
        if (ib + 1 < n_blocks) {
          for (int c = 0; c < nc; ++c) prefetch_span<kXBytes>(x + (c0 + c) * x_stride + (ib + 1) * kXBytes);
          if constexpr (kPacked) {
            prefetch_span<kPackedBlock>(w + (ib + 1) * kPackedBlock);
          } else {
            for (int r = 0; r < n_rows; ++r) prefetch_span<PT::kBytes>(rows.p[r] + (ib + 1) * PT::kBytes);
          }
        }
      } else if constexpr (kPacked) {
        prefetch_span<kPackedBlock>(w + (ib + 1) * kPackedBlock);  // GEMV: one linear stream, a block ahead
      } else {
        // GEMV: the same block of the next panel's rows (measured better here than a linear sweep).
        for (int r = 0; r < n_rows; ++r) prefetch_span<PT::kBytes + 64>(rows.p[r] + 32 * w_stride + ib * PT::kBytes);
      }
      if constexpr (kPacked) {
        PT::decode(PackedSource{w + ib * kPackedBlock, PT::kDw}, dec);
      } else {
        PT::decode(RowSource{rows.p, static_cast<size_t>(ib) * PT::kBytes}, dec);
      }
      const uint8_t* xc[kMaxCols];
      for (int c = 0; c < nc; ++c) xc[c] = x + (c0 + c) * x_stride + ib * kXBytes;
      int c = 0;
      for (; c + kGroupCols <= nc; c += kGroupCols) group_block<PT::kSubDwords, kGroupCols>(dec, xc + c, out + c);
      if (c < nc) tail_group<PT::kSubDwords, kGroupCols - 1>(dec, xc + c, out + c, nc - c);
    }
    for (int c = 0; c < nc; ++c)
      for (int h = 0; h < kHalves; ++h) _mm512_mask_storeu_ps(y + (c0 + c) * ldy + 16 * h, row_mask(n_rows, h), out[c][h]);
  }
}

}  // namespace

PanelFn avx512_kquant_panel(gguf::GgmlType t, bool packed) {
  switch (t) {
    case gguf::GgmlType::Q4_K: return packed ? panel<Q45KPanel<false>, true> : panel<Q45KPanel<false>, false>;
    case gguf::GgmlType::Q5_K: return packed ? panel<Q45KPanel<true>, true> : panel<Q45KPanel<true>, false>;
    case gguf::GgmlType::Q6_K: return packed ? panel<Q6KPanel, true> : panel<Q6KPanel, false>;
    default: return nullptr;
  }
}

}  // namespace tern::kernels::x86
