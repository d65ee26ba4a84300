// AVX2 tiles for the K-quant super-blocks Q2_K and Q3_K, with Q8_K activations
// (Q4_K, Q5_K and Q6_K run the panels of avx2_panel_kquants.cpp).
//
// The same plan as avx512_kquants.cpp on 32-element chunks (all in element
// order): chunk j's weights as unsigned bytes u, then
//
//   i32 += vpmaddwd(vpmaddubsw(u, x), scale16)          scale16: int16 lane i = scale of elements 2i, 2i+1
//   i32 += vpmaddwd(bsums, corr16)                       offset types (corr = -o * scale)
//   acc += ((f32(i32) * d [- f32(vpmaddwd(bsums, mins16)) * dmin]) * dx
//
// with u, o and the scale widths as listed there. scale16 comes from one
// vpshufb of the row's scales (int16, both 128-bit lanes holding the eight
// scales a chunk can need).
#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "kernels/x86/avx2_util.h"
#include "kernels/kquant_scales.h"
#include "kernels/x86/tile_dispatch.h"
#include "kernels/x86/x86_impl.h"
#include "quant/k_blocks.h"

namespace tern::kernels::x86 {
namespace {

using gguf::GgmlType;
using quant::kQK_K;

constexpr size_t kXBytes = sizeof(quant::BlockQ8_K);

struct KRow {
  const uint8_t* b;
  __m256i sc_lo, sc_hi;  // int16 scales of sub-blocks 0..7 / 8..15, in both 128-bit lanes
  __m256i corr;          // int16 x16 dotted with bsums: mins or -o * scale
  __m256 d, dmin;
};

// Shuffle picking int16 lane a (of 8) for the low 128 bits and lane b for the high 128 bits.
inline __m256i pick16(const __m256i& src, int a, int b) {
  const __m256i idx = _mm256_setr_m128i(_mm_set1_epi16(static_cast<short>(0x0100 + 0x0202 * a)),
                                        _mm_set1_epi16(static_cast<short>(0x0100 + 0x0202 * b)));
  return _mm256_shuffle_epi8(src, idx);
}

// Scale vector of chunk j for 16-element sub-blocks (2j, 2j + 1).
inline __m256i scale16_pair(const KRow& row, int j) {
  return pick16(j < 4 ? row.sc_lo : row.sc_hi, (2 * j) % 8, (2 * j + 1) % 8);
}

// (v >> shift) & mask on every byte of 32 bytes at p (shift <= 7).
inline __m256i bits(const uint8_t* p, int shift, int mask) {
  return _mm256_and_si256(_mm256_srli_epi16(load_256(p), shift), bytes(mask));
}

inline __m256 bcast_f16(const uint8_t* p) { return _mm256_set1_ps(f16_to_f32(p)); }

struct Q3K {
  static constexpr size_t kBytes = sizeof(quant::BlockQ3_K);
  static constexpr bool kMins = false;
  static void prepare(const uint8_t* b, KRow& row) {
    row.b = b;
    uint32_t s6[4];
    unpack_q3k_scales(b + 96, s6);
    const __m128i s6v = _mm_set_epi32(static_cast<int>(s6[3]), static_cast<int>(s6[2]), static_cast<int>(s6[1]),
                                      static_cast<int>(s6[0]));
    const __m256i sc = _mm256_cvtepi8_epi16(_mm_sub_epi8(s6v, _mm_set1_epi8(32)));
    row.sc_lo = _mm256_permute2x128_si256(sc, sc, 0x00);
    row.sc_hi = _mm256_permute2x128_si256(sc, sc, 0x11);
    row.corr = _mm256_mullo_epi16(sc, _mm256_set1_epi16(-4));
    row.d = bcast_f16(b + 108);
  }
  // Chunk j = 128h + 32p: qs[32h + r] bits 2p, plus 4 where hmask[r] has bit 4h + p.
  static __m256i quants(const KRow& row, int j) {
    const int h = j / 4, p = j % 4;
    const __m256i lo = bits(row.b + 32 + 32 * h, 2 * p, 0x03);
    return _mm256_or_si256(lo, _mm256_slli_epi16(bits(row.b, 4 * h + p, 0x01), 2));
  }
  static __m256i scale16(const KRow& row, int j) { return scale16_pair(row, j); }
};

struct Q2K {
  static constexpr size_t kBytes = sizeof(quant::BlockQ2_K);
  static constexpr bool kMins = true;
  static void prepare(const uint8_t* b, KRow& row) {
    row.b = b;
    const __m128i s = load_128(b);
    const __m256i sc = _mm256_cvtepu8_epi16(_mm_and_si128(s, _mm_set1_epi8(0x0f)));
    row.sc_lo = _mm256_permute2x128_si256(sc, sc, 0x00);
    row.sc_hi = _mm256_permute2x128_si256(sc, sc, 0x11);
    row.corr = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(s, 4), _mm_set1_epi8(0x0f)));
    row.d = bcast_f16(b + 80);
    row.dmin = bcast_f16(b + 82);
  }
  static __m256i quants(const KRow& row, int j) { return bits(row.b + 16 + 32 * (j / 4), 2 * (j % 4), 0x03); }
  static __m256i scale16(const KRow& row, int j) { return scale16_pair(row, j); }
};

template <class KT>
struct KTile {
  template <int R, int C>
  static void tile(int64_t n, const uint8_t* w, size_t w_stride, const uint8_t* x, size_t x_stride, float* y,
                   size_t ldy) {
    __m256 acc[R][C];
    zero_tile(acc);
    const size_t ahead = prefetch_ahead(R, w_stride);
    for (int64_t ib = 0; ib < n / kQK_K; ++ib) {
      KRow row[R];
      for (int r = 0; r < R; ++r) {
        prefetch_span<KT::kBytes + 64>(w + r * w_stride + ahead + ib * KT::kBytes);  // later rows (GEMV)
        KT::prepare(w + r * w_stride + ib * KT::kBytes, row[r]);
      }
      const uint8_t* xb = x + ib * kXBytes;
      __m256i isum[R][C];
      for (int r = 0; r < R; ++r)
        for (int c = 0; c < C; ++c) isum[r][c] = _mm256_setzero_si256();
      for (int j = 0; j < 8; ++j) {
        __m256i xj[C];
        for (int c = 0; c < C; ++c) xj[c] = load_256(xb + c * x_stride + 4 + 32 * j);
        for (int r = 0; r < R; ++r) {
          const __m256i u = KT::quants(row[r], j);
          const __m256i sc = KT::scale16(row[r], j);
          for (int c = 0; c < C; ++c)
            isum[r][c] = _mm256_add_epi32(isum[r][c], _mm256_madd_epi16(_mm256_maddubs_epi16(u, xj[c]), sc));
        }
      }
      for (int c = 0; c < C; ++c) {
        const uint8_t* xc = xb + c * x_stride;
        const __m256i bsums = load_256(xc + 4 + kQK_K);
        float dx;
        std::memcpy(&dx, xc, sizeof(dx));
        const __m256 vdx = _mm256_set1_ps(dx);
        for (int r = 0; r < R; ++r) {
          const __m256i bc = _mm256_madd_epi16(bsums, row[r].corr);
          __m256 t;
          if constexpr (KT::kMins) {
            t = _mm256_fnmadd_ps(_mm256_cvtepi32_ps(bc), row[r].dmin,
                                 _mm256_mul_ps(_mm256_cvtepi32_ps(isum[r][c]), row[r].d));
          } else {
            t = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_add_epi32(isum[r][c], bc)), row[r].d);
          }
          acc[r][c] = _mm256_fmadd_ps(t, vdx, acc[r][c]);
        }
      }
    }
    store_tile(acc, y, ldy);
  }
};

template <class KT, int R, int C>
constexpr MatmulKernels row() {
  return {GgmlType::Q8_K, avx2_quantize_q8_k, dispatch_tile<KTile<KT>, R, C>, R, C, CpuLevel::Avx2};
}

constexpr MatmulKernels kQ2_K = row<Q2K, 2, 2>();
constexpr MatmulKernels kQ3_K = row<Q3K, 2, 2>();
constexpr int kPanelRows = 32, kPanelCols = 32;  // avx2_panel_kquants.cpp

// Q4_K, Q5_K and Q6_K run every tile through the row-per-lane panels of avx2_panel_kquants.cpp.
template <GgmlType kType>
void panel_tile(int64_t n, const void* w, size_t w_stride, int n_rows, const void* xq, size_t x_stride, int n_cols,
                float* y, size_t ldy) {
  avx2_kquant_panel(kType, false)(n, static_cast<const uint8_t*>(w), w_stride, n_rows, static_cast<const uint8_t*>(xq),
                                  x_stride, n_cols, y, ldy);
}

template <GgmlType kType>
void packed_panel_tile(int64_t n, const void* panel, int n_rows, const void* xq, size_t x_stride, int n_cols, float* y,
                       size_t ldy) {
  avx2_kquant_panel(kType, true)(n, static_cast<const uint8_t*>(panel), 0, n_rows, static_cast<const uint8_t*>(xq),
                                 x_stride, n_cols, y, ldy);
}

// Block layout of the packed panels (lead bytes, dwords, trailing bytes): as the AVX-512 level's.
template <GgmlType kType>
constexpr MatmulKernels panel_row(MatmulKernels::PackLayout layout) {
  return {GgmlType::Q8_K, avx2_quantize_q8_k, panel_tile<kType>, kPanelRows, kPanelCols, CpuLevel::Avx2,
          layout, packed_panel_tile<kType>};
}

constexpr MatmulKernels kQ4_K = panel_row<GgmlType::Q4_K>({0, 36, 0});
constexpr MatmulKernels kQ5_K = panel_row<GgmlType::Q5_K>({0, 44, 0});
constexpr MatmulKernels kQ6_K = panel_row<GgmlType::Q6_K>({0, 52, 2});

}  // namespace

const MatmulKernels* avx2_kquant_kernels(GgmlType t) {
  switch (t) {
    case GgmlType::Q2_K: return &kQ2_K;
    case GgmlType::Q3_K: return &kQ3_K;
    case GgmlType::Q4_K: return &kQ4_K;
    case GgmlType::Q5_K: return &kQ5_K;
    case GgmlType::Q6_K: return &kQ6_K;
    default: return nullptr;
  }
}

}  // namespace tern::kernels::x86
