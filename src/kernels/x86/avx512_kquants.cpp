// AVX-512 VNNI K-quant table (Q8_K activations). Q4_K, Q5_K and Q6_K run every
// tile through the row-per-lane panels of avx512_panel_kquants.cpp; Q2_K and Q3_K
// use the register tiles below.
//
// A 256-element super-block is four chunks of 64 weights in element order, each
// decoded to unsigned bytes u in one zmm ("chunk k"). Sub-block scales are small
// integers, so the whole super-block accumulates in int32 before touching f32:
//
//   i32 += vpdpwssd(vpmaddubsw(u, x), scale16)        per chunk (u*x pairs fit int16)
//   i32 += vpdpwssd(bsums, corr16)                     offset types: corr = -o * scale
//   acc += ((f32(i32) * d  [- f32(bsums . mins16) * dmin]) * dx
//
// where scale16 holds, in int16 lane j, the scale of the sub-block of chunk
// elements 2j and 2j+1; Q8_K's bsums (sums of 16 activations) carry the parts
// that are constant over a sub-block:
//   Q2_K  u = q (0..3),  4-bit scale, 4-bit min per 16:  x = d*sc*q - dmin*m
//   Q3_K  u = q + 4 (0..7), 6-bit signed scale per 16:   offset o = 4
// maddubs cannot saturate: 7 * 127 * 2 < 32767. Bit layouts: quant/k_blocks.h.
// IQ4_XS (below) multiplies bytes straight into int32 instead: its codes look up values up to 127.

#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "kernels/x86/avx512_util.h"
#include "kernels/kquant_scales.h"
#include "kernels/x86/tile_dispatch.h"
#include "kernels/x86/x86_impl.h"
#include "quant/blocks.h"
#include "quant/k_blocks.h"

namespace tern::kernels::x86 {
namespace {

using gguf::GgmlType;
using quant::kQK_K;

constexpr size_t kXBytes = sizeof(quant::BlockQ8_K);

// One row's super-block, ready for its chunks.
struct KRow {
  const uint8_t* b;  // the block
  __m512i scales;    // int16 source of the per-chunk scale vectors (vpermw)
  __m512i corr;      // int16 x16 (lanes 0..15) dotted with bsums: mins or -o * scale
  __m512 d, dmin;    // broadcast super-scales (dmin unused by offset types)
};

inline __m512 bcast_f16(const uint8_t* p) { return _mm512_set1_ps(_cvtsh_ss(load_u16(p))); }

// int16 lane j of the result = lane idx[j] of src.
inline __m512i perm16(const __m512i& idx, const __m512i& src) { return _mm512_permutexvar_epi16(idx, src); }

// Index vector: lane j -> sub-block (4k + j / 8), the natural order of 16-element sub-blocks.
inline __m512i natural_scale_idx(int k) {
  return _mm512_add_epi16(_mm512_set1_epi16(static_cast<short>(4 * k)),
                          _mm512_srli_epi16(_mm512_set_epi16(31, 30, 29, 28, 27, 26, 25, 24, 23, 22, 21, 20, 19, 18, 17,
                                                             16, 15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0),
                                            3));
}

// The 2-bit fields of 32 bytes at p for p-shifts (2a, 2b) into chunk halves: bits (v >> 2a) & 3 | (v >> 2b) & 3.
inline __m512i two_bit_chunk(const uint8_t* p, int a, int b) {
  const __m256i v = load_256(p);
  const __m512i both = _mm512_inserti64x4(_mm512_castsi256_si512(v), v, 1);
  const __m512i cnt = _mm512_mask_blend_epi16(0xffff0000u, _mm512_set1_epi16(static_cast<short>(2 * a)),
                                              _mm512_set1_epi16(static_cast<short>(2 * b)));
  return _mm512_and_si512(_mm512_srlv_epi16(both, cnt), bytes(3));
}

// Mask of the bytes (32 bytes at p, twice) having bit a in the low half, bit b in the high half.
inline __mmask64 bit_chunk(const uint8_t* p, int a, int b) {
  const __m256i v = load_256(p);
  const __m512i both = _mm512_inserti64x4(_mm512_castsi256_si512(v), v, 1);
  const __m512i sel = _mm512_inserti64x4(_mm512_set1_epi8(static_cast<char>(1 << a)),
                                         _mm256_set1_epi8(static_cast<char>(1 << b)), 1);
  return _mm512_test_epi8_mask(both, sel);
}

// Chunk k of a row: its 64 weights as unsigned bytes u and, per lane, the scale they take.
struct Chunk {
  __m512i u, sc;
};

// Q2_K and Q3_K: u below 8, int16 scales per pair of bytes (maddubs, then vpdpwssd).
template <class KT>
struct MaddubsChunks {
  static Chunk chunk(const KRow& row, int k) { return {KT::quants(row, k), perm16(natural_scale_idx(k), row.scales)}; }
  static __m512i dot(const __m512i& isum, const Chunk& ch, const __m512i& x) {
    return _mm512_dpwssd_epi32(isum, _mm512_maddubs_epi16(ch.u, x), ch.sc);
  }
};

struct Q3K : MaddubsChunks<Q3K> {
  static constexpr size_t kBytes = sizeof(quant::BlockQ3_K);
  static constexpr bool kMins = false;
  static void prepare(const uint8_t* b, KRow& row) {
    row.b = b;
    uint32_t s6[4];
    unpack_q3k_scales(b + 96, s6);
    const __m128i s6v = _mm_set_epi32(static_cast<int>(s6[3]), static_cast<int>(s6[2]), static_cast<int>(s6[1]),
                                      static_cast<int>(s6[0]));
    const __m256i sc = _mm256_cvtepi8_epi16(_mm_sub_epi8(s6v, _mm_set1_epi8(32)));
    row.scales = _mm512_castsi256_si512(sc);
    row.corr = _mm512_zextsi256_si512(_mm256_mullo_epi16(sc, _mm256_set1_epi16(-4)));
    row.d = bcast_f16(b + 108);
  }
  // Chunk k = elements 64k..: 2-bit fields of qs[32(k/2) + r] >> 2p, p = 2(k%2) + (0 | 1);
  // the third bit is bit 4(k/2) + p of hmask[r].
  static __m512i quants(const KRow& row, int k) {
    const int p = 2 * (k % 2), h = k / 2;
    const __m512i lo = two_bit_chunk(row.b + 32 + 32 * h, p, p + 1);
    return _mm512_mask_add_epi8(lo, bit_chunk(row.b, 4 * h + p, 4 * h + p + 1), lo, bytes(4));
  }
};

struct Q2K : MaddubsChunks<Q2K> {
  static constexpr size_t kBytes = sizeof(quant::BlockQ2_K);
  static constexpr bool kMins = true;
  static void prepare(const uint8_t* b, KRow& row) {
    row.b = b;
    const __m128i s = load_128(b);
    row.scales = _mm512_zextsi256_si512(_mm256_cvtepu8_epi16(_mm_and_si128(s, _mm_set1_epi8(0x0f))));
    row.corr = _mm512_zextsi256_si512(_mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(s, 4), _mm_set1_epi8(0x0f))));
    row.d = bcast_f16(b + 80);
    row.dmin = bcast_f16(b + 82);
  }
  static __m512i quants(const KRow& row, int k) {
    const int p = 2 * (k % 2);
    return two_bit_chunk(row.b + 16 + 32 * (k / 2), p, p + 1);
  }
};

template <class KT>
struct KTile {
  template <int R, int C>
  static void tile(int64_t n, const uint8_t* w, size_t w_stride, const uint8_t* x, size_t x_stride, float* y,
                   size_t ldy) {
    __m512 acc[R][C];
    zero_tile(acc);
    const size_t ahead = prefetch_ahead(R, w_stride);
    for (int64_t ib = 0; ib < n / kQK_K; ++ib) {
      KRow row[R];
      for (int r = 0; r < R; ++r) {
        prefetch_span<KT::kBytes + 64>(w + r * w_stride + ahead + ib * KT::kBytes);  // later rows (GEMV)
        KT::prepare(w + r * w_stride + ib * KT::kBytes, row[r]);
      }
      const uint8_t* xb = x + ib * kXBytes;
      __m512i isum[R][C];
      for (int r = 0; r < R; ++r)
        for (int c = 0; c < C; ++c) isum[r][c] = _mm512_setzero_si512();
      for (int k = 0; k < 4; ++k) {
        __m512i xk[C];
        for (int c = 0; c < C; ++c) xk[c] = load_512(xb + c * x_stride + 4 + 64 * k);
        for (int r = 0; r < R; ++r) {
          const Chunk ch = KT::chunk(row[r], k);
          for (int c = 0; c < C; ++c) isum[r][c] = KT::dot(isum[r][c], ch, xk[c]);
        }
      }
      for (int c = 0; c < C; ++c) {
        const uint8_t* xc = xb + c * x_stride;
        const __m512i bsums = _mm512_zextsi256_si512(load_256(xc + 4 + kQK_K));
        float dx;
        std::memcpy(&dx, xc, sizeof(dx));
        const __m512 vdx = _mm512_set1_ps(dx);
        for (int r = 0; r < R; ++r) {
          __m512 t;
          if constexpr (KT::kMins) {
            const __m512 m = _mm512_cvtepi32_ps(_mm512_madd_epi16(bsums, row[r].corr));
            t = _mm512_fnmadd_ps(m, row[r].dmin, _mm512_mul_ps(_mm512_cvtepi32_ps(isum[r][c]), row[r].d));
          } else {
            t = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_dpwssd_epi32(isum[r][c], bsums, row[r].corr)), row[r].d);
          }
          acc[r][c] = _mm512_fmadd_ps(t, vdx, acc[r][c]);
        }
      }
    }
    store_tile(acc, y, ldy);
  }
};

// IQ4_XS: IQ4_NL's code book in super-blocks with 6-bit scales per 32. Each chunk of 64 codes
// is looked up (vpshufb) as value + 128, unsigned, so vpdpbusd multiplies it with the signed
// activations straight into int32 — int16 pair sums (maddubs) would overflow: 241 * 128 * 2 >
// 32767. The eight int32 lanes of a sub-block are scaled by its integer scale (ls - 32), and the
// +128 comes back out through Q8_K's bsums once per super-block (-128 * scale per 16-sum):
//   i32 += (vpdpbusd(0, value + 128, x)) * scale32      per chunk, exact
//   acc += f32(i32 + vpdpwssd(bsums, -128 * scale16)) * d * dx
// |i32| stays below 8 * 32 * 255 * 128 * 32 < 2^31.
struct Iq4Xs {
  static constexpr size_t kBytes = sizeof(quant::BlockIq4Xs);
  static constexpr bool kMins = false;

  // The scales in vector registers (a scalar unpack stored to memory and read back as a vector
  // stalls store forwarding): row.scales int32 lane s = ls - 32 of sub-block s (lanes 0..7),
  // row.corr int16 lane j = -128 * the scale of 16-sum j's sub-block (j / 2).
  static void prepare(const uint8_t* b, KRow& row) {
    const __m512i lane = _mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0);
    const __m512i low4 = _mm512_and_si512(
        _mm512_srlv_epi32(_mm512_set1_epi32(static_cast<int>(load_u32(b + 4))), _mm512_slli_epi32(lane, 2)),
        _mm512_set1_epi32(0x0f));
    const __m512i hi2 = _mm512_and_si512(
        _mm512_srlv_epi32(_mm512_set1_epi32(load_u16(b + 2)), _mm512_slli_epi32(lane, 1)), _mm512_set1_epi32(3));
    row.b = b;
    row.scales = _mm512_sub_epi32(_mm512_or_si512(low4, _mm512_slli_epi32(hi2, 4)), _mm512_set1_epi32(32));
    const __m512i pairs = _mm512_permutexvar_epi32(_mm512_srli_epi32(lane, 1), row.scales);
    row.corr = _mm512_zextsi256_si512(_mm512_cvtepi32_epi16(_mm512_mullo_epi32(pairs, _mm512_set1_epi32(-128))));
    row.d = bcast_f16(b);
  }

  // Codes of sub-blocks 2k, 2k+1 (32 bytes) in element order, looked up as value + 128; int32
  // lane j takes the scale of sub-block 2k + j / 8.
  static Chunk chunk(const KRow& row, int k) {
    // kIq4nlValues + 128 (the sign bit flipped) in every 128-bit lane (vpshufb looks up within lanes).
    const __m512i table = _mm512_xor_si512(
        _mm512_broadcast_i32x4(load_128(reinterpret_cast<const uint8_t*>(quant::kIq4nlValues))), bytes(0x80));
    const __m512i both = _mm512_castsi256_si512(load_256(row.b + 8 + 32 * k));
    // 128-bit lanes: bytes 0-15, 0-15, 16-31, 16-31; the second of each pair shifted to its high nibbles.
    const __m512i lanes = _mm512_shuffle_i64x2(both, both, 0x50);
    const __m512i nib = _mm512_and_si512(_mm512_srlv_epi64(lanes, _mm512_set_epi64(4, 4, 0, 0, 4, 4, 0, 0)), bytes(0x0f));
    const __m512i idx = _mm512_mask_blend_epi32(0xff00, _mm512_set1_epi32(2 * k), _mm512_set1_epi32(2 * k + 1));
    return {_mm512_shuffle_epi8(table, nib), _mm512_permutexvar_epi32(idx, row.scales)};
  }
  static __m512i dot(const __m512i& isum, const Chunk& ch, const __m512i& x) {
    return _mm512_add_epi32(isum, _mm512_mullo_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), ch.u, x), ch.sc));
  }
};

constexpr int kTileRows = 2, kTileCols = 4;  // register tile of KTile
constexpr int kPanelRows = 32, kPanelCols = 32;                   // avx512_panel_kquants.cpp

// Types with a panel kernel run every tile through it (avx512_panel_kquants.cpp).
template <GgmlType kType>
void panel_tile(int64_t n, const void* w, size_t w_stride, int n_rows, const void* xq, size_t x_stride, int n_cols,
                float* y, size_t ldy) {
  avx512_kquant_panel(kType, false)(n, static_cast<const uint8_t*>(w), w_stride, n_rows, static_cast<const uint8_t*>(xq),
                             x_stride, n_cols, y, ldy);
}

template <GgmlType kType>
void packed_panel_tile(int64_t n, const void* panel, int n_rows, const void* xq, size_t x_stride, int n_cols, float* y,
                       size_t ldy) {
  avx512_kquant_panel(kType, true)(n, static_cast<const uint8_t*>(panel), 0, n_rows, static_cast<const uint8_t*>(xq), x_stride,
                             n_cols, y, ldy);
}

template <class KT>
constexpr MatmulKernels row() {
  return {GgmlType::Q8_K, avx512_quantize_q8_k, dispatch_tile<KTile<KT>, kTileRows, kTileCols>, kTileRows, kTileCols,
          CpuLevel::Avx512};
}

// Block layout of the packed panels: lead bytes, dwords, trailing bytes.
constexpr MatmulKernels::PackLayout pack_layout(GgmlType t) {
  switch (t) {
    case GgmlType::Q4_K: return {0, 36, 0};
    case GgmlType::Q5_K: return {0, 44, 0};
    case GgmlType::Q6_K: return {0, 52, 2};
    default: return {};
  }
}

template <GgmlType kType>
constexpr MatmulKernels panel_row() {
  return {GgmlType::Q8_K, avx512_quantize_q8_k, panel_tile<kType>, kPanelRows, kPanelCols, CpuLevel::Avx512,
          pack_layout(kType), packed_panel_tile<kType>};
}

constexpr MatmulKernels kIq4_XS = row<Iq4Xs>();
constexpr MatmulKernels kQ2_K = row<Q2K>();
constexpr MatmulKernels kQ3_K = row<Q3K>();
constexpr MatmulKernels kQ4_K = panel_row<GgmlType::Q4_K>();
constexpr MatmulKernels kQ5_K = panel_row<GgmlType::Q5_K>();
constexpr MatmulKernels kQ6_K = panel_row<GgmlType::Q6_K>();

}  // namespace

const MatmulKernels* avx512_kquant_kernels(GgmlType t) {
  switch (t) {
    case GgmlType::Q2_K: return &kQ2_K;
    case GgmlType::Q3_K: return &kQ3_K;
    case GgmlType::Q4_K: return &kQ4_K;
    case GgmlType::Q5_K: return &kQ5_K;
    case GgmlType::Q6_K: return &kQ6_K;
    case GgmlType::IQ4_XS: return &kIq4_XS;
    default: return nullptr;
  }
}

}  // namespace tern::kernels::x86
