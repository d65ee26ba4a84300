// kernels/x86/avx512_panel_legacy.h — the AVX-512 VNNI row-per-lane panel
// machinery for 32-element block weights (internal; included by
// avx512_panel_legacy.cpp and avx512_sparse24.cpp, which is compiled with
// VBMI2 on top). Everything is in an anonymous namespace, as avx512_util.h:
// each including file gets its own copy, compiled with its own flags (the
// ODR rule of x86_impl.h).
//
// AVX-512 VNNI panel kernels for prompt processing with 32-element block
// weights: Q4_0, Q8_0, IQ4_NL, MXFP4 against Q8_0 activations, up to 32 rows x any columns.
// Every tile of these types runs here, prompt and decode alike, so that a
// (row, token) result is the same whatever the batch: the float operations
// are the same sequence, on an int32 dot product that is exact either way.
//
// The row-per-lane scheme of avx512_panel_kquants.cpp (read that first), per
// block b of 8 dwords. vpdpbusd multiplies unsigned by signed bytes: the
// weights stay signed (Q4_0: q - 8; Q8_0: as stored; IQ4_NL: the code book
// value) and the activations come biased, x + 128 as unsigned bytes (the
// kernel's own quantize_act, MatmulKernels::act_biased), so
//
//   t[c][h] = vpdpbusd chain over the 8 dwords of (x_c + 128) . w,
//             seeded with -128 * sum(w)            = exactly sum(x_c . w)
//   out[c][h] += f32(t) * (dw[h] * dx_c,b)
//
// sum(w) is a property of the weights: one vpdpbusd chain against ones per
// decoded block, shared by every column (no per-column work besides the dot
// products and the scale). The chain is exact in int32 (|t| <= 32 * 255 * 127).
// Decode (fewer than 8 columns) uses the unsigned form instead (see Q4_0 below).
#pragma once

#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "kernels/x86/avx512_util.h"
#include "kernels/x86/x86_impl.h"
#include "quant/blocks.h"

namespace tern::kernels::x86 {
namespace {

using gguf::GgmlType;

constexpr int kHalves = 2;      // 16-row halves of a panel
constexpr int kGroupCols = 8;   // columns sharing one pass over a decoded block
constexpr int kMaxCols = 32;    // columns whose results are accumulated at once
constexpr size_t kXBytes = sizeof(quant::BlockQ8_0);

// One block of 32 rows in row-per-lane form: [h] = rows 16h .. 16h + 15.
struct Decoded {
  __m512i w[8][kHalves];   // signed weights of element dword k
  __m512 d[kHalves];       // dw
  __m512i seed[kHalves];   // -128 * the sum of each row's 32 weights
};

// seed[h] = -128 * sum(w) per lane (row), from the decoded weights.
inline void weight_sums(int h, Decoded& dec) {
  const __m512i ones = _mm512_set1_epi8(1);
  __m512i s0 = _mm512_setzero_si512(), s1 = _mm512_setzero_si512();
  for (int k = 0; k < 8; k += 2) {
    s0 = _mm512_dpbusd_epi32(s0, ones, dec.w[k][h]);
    s1 = _mm512_dpbusd_epi32(s1, ones, dec.w[k + 1][h]);
  }
  dec.seed[h] = _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_slli_epi32(_mm512_add_epi32(s0, s1), 7));
}

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

// GEMV: prefetch the next panel (the 32 rows after these, one contiguous
// region) as a linear sweep spread over this panel's n_blocks blocks, one
// request per cache line: a sequential stream for DRAM, one panel ahead.
inline void prefetch_next_panel(const uint8_t* w, size_t w_stride, int64_t ib, int64_t n_blocks) {
  const size_t total = 32 * w_stride, chunk = (total + n_blocks - 1) / n_blocks;
  const uint8_t* begin = w + total + static_cast<size_t>(ib) * chunk;
  for (size_t k = 0; k < chunk; k += 64) _mm_prefetch(reinterpret_cast<const char*>(begin + k), _MM_HINT_T0);
}

inline __m512i bcast_dword(const uint8_t* p) { return _mm512_set1_epi32(static_cast<int>(load_u32(p))); }

// The fp16 d in the low half of every lane of the block's first dword, as f32.
inline __m512 d_ps(__m512i first) { return _mm512_cvtph_ps(_mm512_cvtepi32_epi16(first)); }

// Where one block of the panel's 32 rows comes from. Both sources hand the
// decoder the same values in the same lanes, so the arithmetic -- and every
// result -- is identical; the packed one just skips the transposes.
//
// Rows in place: each row's block at rows[r] + off, transposed on the fly.
struct RowSource {
  const uint8_t* const* rows;  // [32]
  size_t off;
  size_t lead = 2;  // bytes of scale before the quants (MXFP4: 1)
  // The block's first dword of each row, lane r = row 16h + r.
  __m512i head(int h) const {
    __m512i hdr[4];
    transpose_16x4(rows + 16 * h, off, hdr);
    return hdr[0];
  }
  __m512 d(int h) const { return d_ps(head(h)); }
  __m512i e8(int h) const { return _mm512_and_si512(head(h), _mm512_set1_epi32(0xff)); }
  // Dwords j..j+3 of the bytes after the scale, lane r = row 16h + r.
  void dw4(int h, int j, __m512i out[4]) const { transpose_16x4(rows + 16 * h, off + lead + 4 * j, out); }
};

// A packed block (MatmulKernels::pack: lead 2 bytes, n_dw dwords):
//   [32 x fp16 d] [h = 0, 1][dword j < n_dw][16 lanes x 4 bytes]
//   (MXFP4: [32 x E8M0 byte], then the dwords)
struct PackedSource {
  const uint8_t* blk;
  int n_dw;
  size_t lead = 2;
  __m512 d(int h) const { return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 32 * h))); }
  __m512i e8(int h) const { return _mm512_cvtepu8_epi32(load_128(blk + 16 * h)); }
  void dw4(int h, int j, __m512i out[4]) const {
    const uint8_t* p = blk + 32 * lead + static_cast<size_t>(h * n_dw + j) * 64;
    for (int i = 0; i < 4; ++i) out[i] = load_512(p + 64 * i);
  }
};

// Nibbles of 16 qs bytes (dwords t[0..3]): low nibbles are element dwords 0..3, high 4..7.
inline void split_nibbles(const __m512i t[4], int h, Decoded& dec) {
  for (int k = 0; k < 4; ++k) {
    dec.w[k][h] = _mm512_and_si512(t[k], _mm512_set1_epi8(0x0f));
    dec.w[k + 4][h] = _mm512_and_si512(_mm512_srli_epi32(t[k], 4), _mm512_set1_epi8(0x0f));
  }
}

// Two exact forms of the same int32 dot product t = sum(x . w) per block:
//
//   signed weights   (GEMM, 8+ columns): t = vpdpbusd(x + 128, w) seeded with
//                    -128 * sum(w) -- one seed per block, shared by all columns;
//   unsigned weights (GEMV, few columns): t = vpdpbusd(w + o, x) seeded with
//                    -o * sum(x) -- no per-block weight sums, which would
//                    double a one-column call's vpdpbusd count.
//
// Both give the same integer, so the result does not depend on the form (nor
// on the batch). kSigned selects the weights' decoding; o is the type's offset.
struct Q4_0 {
  static constexpr size_t kBytes = sizeof(quant::BlockQ4_0);
  static constexpr size_t kLead = 2;  // fp16 d
  static constexpr int kDwords = 4;
  static constexpr int kOffset = 8;  // unsigned form: the nibble itself
  template <bool kSigned, class Src>
  static void decode(const Src& src, int h, Decoded& dec) {
    __m512i t[4];
    src.dw4(h, 0, t);
    dec.d[h] = src.d(h);
    split_nibbles(t, h, dec);
    if constexpr (kSigned)
      for (int k = 0; k < 8; ++k) dec.w[k][h] = _mm512_sub_epi8(dec.w[k][h], _mm512_set1_epi8(8));
  }
};

// A block of 16 bytes of nibbles that index a 16-entry code book (IQ4_NL,
// MXFP4): the weights are its values (+ 128 in the unsigned form).
template <bool kSigned, class Src>
inline void table_nibbles(const Src& src, int h, const int8_t* values, Decoded& dec) {
  __m512i t[4];
  src.dw4(h, 0, t);
  split_nibbles(t, h, dec);
  __m512i table = _mm512_broadcast_i32x4(load_128(reinterpret_cast<const uint8_t*>(values)));
  if constexpr (!kSigned) table = _mm512_xor_si512(table, _mm512_set1_epi8(static_cast<char>(0x80)));
  for (int k = 0; k < 8; ++k) dec.w[k][h] = _mm512_shuffle_epi8(table, dec.w[k][h]);
}

struct Iq4Nl {
  static constexpr size_t kBytes = sizeof(quant::BlockIq4Nl);
  static constexpr size_t kLead = 2;  // fp16 d
  static constexpr int kDwords = 4;
  static constexpr int kOffset = 128;
  // Q4_0's nibbles are indices into the code book (its values + 128 in the unsigned form).
  template <bool kSigned, class Src>
  static void decode(const Src& src, int h, Decoded& dec) {
    dec.d[h] = src.d(h);
    table_nibbles<kSigned>(src, h, quant::kIq4nlValues, dec);
  }
};

// MXFP4: IQ4_NL's decoding with the FP4 table, and a power-of-two scale from
// the E8M0 byte: 2^(e - 128) as f32 bits, (e - 1) << 23, or for e < 2 the
// subnormals 0x00200000 << e (quant::rows::mxfp4_scale). Packed blocks lead
// with the 32 rows' E8M0 bytes.
struct Mxfp4 {
  static constexpr size_t kBytes = sizeof(quant::BlockMxfp4);
  static constexpr size_t kLead = 1;
  static constexpr int kDwords = 4;
  static constexpr int kOffset = 128;
  template <bool kSigned, class Src>
  static void decode(const Src& src, int h, Decoded& dec) {
    const __m512i e = src.e8(h);
    const __m512i normal = _mm512_slli_epi32(_mm512_sub_epi32(e, _mm512_set1_epi32(1)), 23);
    const __m512i tiny = _mm512_sllv_epi32(_mm512_set1_epi32(0x00200000), e);
    dec.d[h] = _mm512_castsi512_ps(_mm512_mask_blend_epi32(_mm512_cmplt_epu32_mask(e, _mm512_set1_epi32(2)), normal, tiny));
    table_nibbles<kSigned>(src, h, quant::kMxfp4Values, dec);
  }
};

struct Q8_0 {
  static constexpr size_t kBytes = sizeof(quant::BlockQ8_0);
  static constexpr size_t kLead = 2;  // fp16 d
  static constexpr int kDwords = 8;
  static constexpr int kOffset = 128;
  template <bool kSigned, class Src>
  static void decode(const Src& src, int h, Decoded& dec) {
    __m512i t[8];
    src.dw4(h, 0, t);
    src.dw4(h, 4, t + 4);
    dec.d[h] = src.d(h);
    for (int k = 0; k < 8; ++k)
      dec.w[k][h] = kSigned ? t[k] : _mm512_xor_si512(t[k], _mm512_set1_epi8(static_cast<char>(0x80)));
  }
};

// out[c][h] += f32(t[c][h]) * (dw[h] * dx_c) for the C columns of a group.
template <int C>
inline void scale_out(const Decoded& dec, const uint8_t* const* xc, const __m512i (&t)[C][kHalves],
                      __m512 (*out)[kHalves]) {
#pragma GCC unroll 8
  for (int c = 0; c < C; ++c) {
    const __m512 dx = _mm512_set1_ps(_cvtsh_ss(load_u16(xc[c])));
    out[c][0] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(t[c][0]), _mm512_mul_ps(dec.d[0], dx), out[c][0]);
    out[c][1] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(t[c][1]), _mm512_mul_ps(dec.d[1], dx), out[c][1]);
  }
}

// Signed form: one group of C <= 8 columns over one decoded block. The
// operations on one (row, column) lane do not depend on C or on the other columns.
template <int C>
inline void group_block(const Decoded& dec, const uint8_t* const* xc, __m512 (*out)[kHalves]) {
  __m512i t[C][kHalves];
#pragma GCC unroll 8
  for (int c = 0; c < C; ++c) {
    t[c][0] = dec.seed[0];
    t[c][1] = dec.seed[1];
  }
#pragma GCC unroll 8
  for (int k = 0; k < 8; ++k) {
    const __m512i w0 = dec.w[k][0], w1 = dec.w[k][1];
#pragma GCC unroll 8
    for (int c = 0; c < C; ++c) {
      const __m512i xv = bcast_dword(xc[c] + 2 + 4 * k);
      t[c][0] = _mm512_dpbusd_epi32(t[c][0], xv, w0);
      t[c][1] = _mm512_dpbusd_epi32(t[c][1], xv, w1);
    }
  }
  scale_out<C>(dec, xc, t, out);
}

// -o * sum of the 32 activations of a biased block at xb (vpsadbw of x + 128 against 0).
template <int kOffset>
inline int neg_offset_sum(const uint8_t* xb) {
  const __m256i s4 = _mm256_sad_epu8(load_256(xb + 2), _mm256_setzero_si256());
  const __m128i s2 = _mm_add_epi64(_mm256_castsi256_si128(s4), _mm256_extracti128_si256(s4, 1));
  const int sum = static_cast<int>(_mm_cvtsi128_si64(_mm_add_epi64(s2, _mm_unpackhi_epi64(s2, s2)))) - 32 * 128;
  return -kOffset * sum;
}

// Unsigned form, for C < 8 columns (decode): the activations un-biased per broadcast.
template <int kOffset, int C>
inline void group_block_unsigned(const Decoded& dec, const uint8_t* const* xc, __m512 (*out)[kHalves]) {
  __m512i t[C][kHalves];
#pragma GCC unroll 8
  for (int c = 0; c < C; ++c) t[c][0] = t[c][1] = _mm512_set1_epi32(neg_offset_sum<kOffset>(xc[c]));
#pragma GCC unroll 8
  for (int k = 0; k < 8; ++k) {
    const __m512i w0 = dec.w[k][0], w1 = dec.w[k][1];
#pragma GCC unroll 8
    for (int c = 0; c < C; ++c) {
      const __m512i xv = _mm512_xor_si512(bcast_dword(xc[c] + 2 + 4 * k), _mm512_set1_epi8(static_cast<char>(0x80)));
      t[c][0] = _mm512_dpbusd_epi32(t[c][0], w0, xv);
      t[c][1] = _mm512_dpbusd_epi32(t[c][1], w1, xv);
    }
  }
  scale_out<C>(dec, xc, t, out);
}

template <int kOffset, int C>
void tail_group_unsigned(const Decoded& dec, const uint8_t* const* xc, __m512 (*out)[kHalves], int n) {
  if constexpr (C > 1) {
    if (n < C) return tail_group_unsigned<kOffset, C - 1>(dec, xc, out, n);
  }
  group_block_unsigned<kOffset, C>(dec, xc, out);
}

template <int C>
void tail_group(const Decoded& dec, const uint8_t* const* xc, __m512 (*out)[kHalves], int n) {
  if constexpr (C > 1) {
    if (n < C) return tail_group<C - 1>(dec, xc, out, n);
  }
  group_block<C>(dec, xc, out);
}

// Packed blocks the GEMV prefetch runs ahead: 4, or a type's own (one with
// smaller blocks keeps about the same distance in bytes).
template <class WT>
constexpr int64_t gemv_ahead() {
  if constexpr (requires { WT::kGemvAhead; }) return WT::kGemvAhead;
  return 4;
}

// Block ib of the panel, decoded in the signed or unsigned form.
template <class WT, bool kSigned, bool kPacked>
inline void decode_block(const uint8_t* w, const PanelRows& rows, int64_t ib, Decoded& dec) {
  if constexpr (requires { WT::kOwnLayout; }) {  // a type with a packed layout of its own (avx512_sparse24.cpp)
    WT::template decode_block<kSigned, kPacked>(w, rows.p, ib, dec);
  } else if constexpr (kPacked) {
    const PackedSource src{w + ib * 32 * WT::kBytes, WT::kDwords, WT::kLead};
    for (int h = 0; h < kHalves; ++h) WT::template decode<kSigned>(src, h, dec);
  } else {
    const RowSource src{rows.p, static_cast<size_t>(ib) * WT::kBytes, WT::kLead};
    for (int h = 0; h < kHalves; ++h) WT::template decode<kSigned>(src, h, dec);
  }
}

// n_rows <= 32 rows x n_cols columns (any), in groups of 8 columns. kPacked:
// w is one packed panel (MatmulKernels::pack), w_stride unused.
template <class WT, bool kPacked>
void panel(int64_t n, const uint8_t* w, size_t w_stride, int n_rows, const uint8_t* x, size_t x_stride, int n_cols,
           float* y, size_t ldy) {
  const PanelRows rows(w, kPacked ? 0 : w_stride, n_rows);
  constexpr size_t kPackedBlock = 32 * WT::kBytes;
  alignas(64) Decoded dec;
  for (int c0 = 0; c0 < n_cols; c0 += kMaxCols) {  // columns in chunks of 32 (out stays in L1)
    const int nc = n_cols - c0 < kMaxCols ? n_cols - c0 : kMaxCols;
    __m512 out[kMaxCols][kHalves];
    for (int c = 0; c < nc; ++c) out[c][0] = out[c][1] = _mm512_setzero_ps();
    const int64_t n_blocks = n / 32;
    for (int64_t ib = 0; ib < n_blocks; ++ib) {
      if (nc >= kGroupCols) {
        if (ib % 4 == 0 && ib + 4 < n_blocks) {  // GEMM: the next four blocks of activations and weights, from L2
          for (int c = 0; c < nc; ++c) prefetch_span<4 * kXBytes>(x + (c0 + c) * x_stride + (ib + 4) * kXBytes);
          if constexpr (kPacked) {
            prefetch_span<4 * kPackedBlock>(w + (ib + 4) * kPackedBlock);
          } else {
            for (int r = 0; r < n_rows; ++r) prefetch_span<4 * WT::kBytes>(rows.p[r] + (ib + 4) * WT::kBytes);
          }
        }
      } else if constexpr (kPacked) {
        prefetch_span<kPackedBlock>(w + (ib + gemv_ahead<WT>()) * kPackedBlock);  // GEMV: one linear stream
      } else {
        prefetch_next_panel(w, w_stride, ib, n_blocks);  // GEMV: the next panel from DRAM
      }
      const uint8_t* xc[kMaxCols];
      for (int c = 0; c < nc; ++c) xc[c] = x + (c0 + c) * x_stride + ib * kXBytes;
      if (nc < kGroupCols) {  // decode: the unsigned form
        decode_block<WT, false, kPacked>(w, rows, ib, dec);
        tail_group_unsigned<WT::kOffset, kGroupCols - 1>(dec, xc, out, nc);
        continue;
      }
      decode_block<WT, true, kPacked>(w, rows, ib, dec);
      for (int h = 0; h < kHalves; ++h) weight_sums(h, dec);
      int c = 0;
      for (; c + kGroupCols <= nc; c += kGroupCols) group_block<kGroupCols>(dec, xc + c, out + c);
      if (c < nc) tail_group<kGroupCols - 1>(dec, xc + c, out + c, nc - c);
    }
    for (int c = 0; c < nc; ++c)
      for (int h = 0; h < kHalves; ++h) _mm512_mask_storeu_ps(y + (c0 + c) * ldy + 16 * h, row_mask(n_rows, h), out[c][h]);
  }
}

}  // namespace
}  // namespace tern::kernels::x86
