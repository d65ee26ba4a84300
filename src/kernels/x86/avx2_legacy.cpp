// AVX2 tiles for the 32-element block types Q4_1 Q5_0 Q5_1 (Q4_0, Q8_0, IQ4_NL
// and MXFP4 run avx2_panel_legacy.cpp's panels).
//
// One block is one ymm of 32 weights against one ymm of 32 int8 activations.
// vpmaddubsw multiplies unsigned by signed bytes into saturating int16 pairs,
// so each type is arranged to keep the pair sums within int16:
//   Q5_0        q unsigned (0..31), x signed; the offset o * sum(x)
//               (o = 16) is a maddubs of x by o, once per column, shared
//               by every row; |pair| <= 31*127*2 < 2^15
//   Q4_1, Q5_1  q unsigned, no offset; the minimum enters as m * s (Q8_1 s)
// then vpmaddwd by ones gives int32 sums of 4, converted and scaled by
// dw * dx in f32. Integer parts are exact; only the f32 order differs from
// the scalar reference.
#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "kernels/x86/avx2_util.h"
#include "kernels/x86/tile_dispatch.h"
#include "kernels/x86/x86_impl.h"
#include "quant/blocks.h"

namespace tern::kernels::x86 {
namespace {

using gguf::GgmlType;

// One column's activations for one block.
struct XBlock {
  __m256i q;     // 32 int8
  __m256i off;   // int16 pair sums of o * x (offset types)
  float d, s;    // dx, Q8_1 s
};

// One row's weights for one block.
struct WBlock {
  __m256i u;     // unsigned weights
  float d, m;
};

inline __m256i nibbles(const uint8_t* qs) {
  const __m128i v = load_128(qs);
  const __m256i both = _mm256_inserti128_si256(_mm256_castsi128_si256(v), _mm_srli_epi16(v, 4), 1);
  return _mm256_and_si256(both, bytes(0x0f));
}

// 0x10 in byte j where bit j of the u32 at p is set.
inline __m256i fifth_bits(const uint8_t* p) {
  const __m256i spread = _mm256_shuffle_epi8(
      _mm256_set1_epi32(static_cast<int>(load_u32(p))),
      _mm256_setr_epi64x(0, 0x0101010101010101LL, 0x0202020202020202LL, 0x0303030303030303LL));
  const __m256i bit = _mm256_set1_epi64x(static_cast<long long>(0x8040201008040201ULL));
  return _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(spread, bit), bit), bytes(0x10));
}

struct Q4_1 {
  static constexpr size_t kBytes = sizeof(quant::BlockQ4_1);
  static constexpr GgmlType kAct = GgmlType::Q8_1;
  static constexpr int kOffset = 0;
  static constexpr bool kMin = true;
  static void load(const uint8_t* p, WBlock& b) {
    b.u = nibbles(p + 4);
    b.d = f16_to_f32(p);
    b.m = f16_to_f32(p + 2);
  }
};

struct Q5_0 {
  static constexpr size_t kBytes = sizeof(quant::BlockQ5_0);
  static constexpr GgmlType kAct = GgmlType::Q8_0;
  static constexpr int kOffset = 16;
  static constexpr bool kMin = false;
  static void load(const uint8_t* p, WBlock& b) {
    b.u = _mm256_or_si256(nibbles(p + 6), fifth_bits(p + 2));
    b.d = f16_to_f32(p);
  }
};

struct Q5_1 {
  static constexpr size_t kBytes = sizeof(quant::BlockQ5_1);
  static constexpr GgmlType kAct = GgmlType::Q8_1;
  static constexpr int kOffset = 0;
  static constexpr bool kMin = true;
  static void load(const uint8_t* p, WBlock& b) {
    b.u = _mm256_or_si256(nibbles(p + 8), fifth_bits(p + 4));
    b.d = f16_to_f32(p);
    b.m = f16_to_f32(p + 2);
  }
};

template <class WT>
inline XBlock load_x(const uint8_t* p) {
  constexpr bool kQ8_1 = WT::kAct == GgmlType::Q8_1;
  XBlock x;
  x.q = load_256(p + (kQ8_1 ? 4 : 2));
  x.d = f16_to_f32(p);
  if constexpr (WT::kOffset != 0) x.off = _mm256_maddubs_epi16(bytes(WT::kOffset), x.q);
  if constexpr (WT::kMin) x.s = f16_to_f32(p + 2);
  return x;
}

template <class WT>
inline __m256i block_dot(const WBlock& w, const XBlock& x) {
  __m256i p16 = _mm256_maddubs_epi16(w.u, x.q);
  if constexpr (WT::kOffset != 0) p16 = _mm256_sub_epi16(p16, x.off);
  return _mm256_madd_epi16(p16, _mm256_set1_epi16(1));
}

template <class WT>
struct LegacyTile {
  static constexpr size_t kXBytes = WT::kAct == GgmlType::Q8_1 ? sizeof(quant::BlockQ8_1) : sizeof(quant::BlockQ8_0);

  template <int R, int C>
  static void tile(int64_t n, const uint8_t* w, size_t w_stride, const uint8_t* x, size_t x_stride, float* y,
                   size_t ldy) {
    __m256 acc[R][C];
    zero_tile(acc);
    float min_acc[R][C] = {};  // sum of m * s (Q4_1, Q5_1)
    const size_t ahead = prefetch_ahead(R, w_stride);
    for (int64_t ib = 0; ib < n / 32; ++ib) {
      WBlock wb[R];
      for (int r = 0; r < R; ++r) {
        if (ib % 2 == 0) prefetch_span<2 * WT::kBytes + 64>(w + r * w_stride + ahead + ib * WT::kBytes);  // later rows
        WT::load(w + r * w_stride + ib * WT::kBytes, wb[r]);
      }
      for (int c = 0; c < C; ++c) {
        const XBlock xb = load_x<WT>(x + c * x_stride + ib * kXBytes);
        for (int r = 0; r < R; ++r) {
          const __m256 dot = _mm256_cvtepi32_ps(block_dot<WT>(wb[r], xb));
          acc[r][c] = _mm256_fmadd_ps(dot, _mm256_set1_ps(wb[r].d * xb.d), acc[r][c]);
          if constexpr (WT::kMin) min_acc[r][c] += wb[r].m * xb.s;
        }
      }
    }
    store_tile(acc, y, ldy);
    if constexpr (WT::kMin)
      for (int c = 0; c < C; ++c)
        for (int r = 0; r < R; ++r) y[c * ldy + r] += min_acc[r][c];
  }
};

template <class WT, int R, int C>
constexpr MatmulKernels row() {
  constexpr auto quantize = WT::kAct == GgmlType::Q8_1 ? avx2_quantize_q8_1 : avx2_quantize_q8_0;
  return {WT::kAct, quantize, dispatch_tile<LegacyTile<WT>, R, C>, R, C, CpuLevel::Avx2};
}

constexpr int kPanelRows = 32, kPanelCols = 32;  // avx2_panel_legacy.cpp

// Q4_0, Q8_0, IQ4_NL and MXFP4 run every tile through the row-per-lane panels of avx2_panel_legacy.cpp.
template <GgmlType kType>
void panel_tile(int64_t n, const void* w, size_t w_stride, int n_rows, const void* xq, size_t x_stride, int n_cols,
                float* y, size_t ldy) {
  avx2_legacy_panel(kType, false)(n, static_cast<const uint8_t*>(w), w_stride, n_rows, static_cast<const uint8_t*>(xq),
                                  x_stride, n_cols, y, ldy);
}

template <GgmlType kType>
void packed_tile(int64_t n, const void* panel, int n_rows, const void* xq, size_t x_stride, int n_cols, float* y,
                 size_t ldy) {
  avx2_legacy_panel(kType, true)(n, static_cast<const uint8_t*>(panel), 0, n_rows, static_cast<const uint8_t*>(xq),
                                 x_stride, n_cols, y, ldy);
}

// Packed blocks: lead bytes of scale (fp16 d, MXFP4's E8M0), then n_dwords dwords of quants.
template <GgmlType kType>
constexpr MatmulKernels panel_row(int lead, int n_dwords) {
  return {GgmlType::Q8_0, avx2_quantize_q8_0, panel_tile<kType>, kPanelRows, kPanelCols, CpuLevel::Avx2,
          MatmulKernels::PackLayout{lead, n_dwords, 0}, packed_tile<kType>};
}

constexpr MatmulKernels kQ4_0 = panel_row<GgmlType::Q4_0>(2, 4);
constexpr MatmulKernels kQ4_1 = row<Q4_1, 2, 4>();
constexpr MatmulKernels kQ5_0 = row<Q5_0, 2, 4>();
constexpr MatmulKernels kQ5_1 = row<Q5_1, 2, 4>();
constexpr MatmulKernels kQ8_0 = panel_row<GgmlType::Q8_0>(2, 8);
constexpr MatmulKernels kIq4Nl = panel_row<GgmlType::IQ4_NL>(2, 4);
constexpr MatmulKernels kMxfp4 = panel_row<GgmlType::MXFP4>(1, 4);

}  // namespace

const MatmulKernels* avx2_legacy_kernels(GgmlType t) {
  switch (t) {
    case GgmlType::Q4_0: return &kQ4_0;
    case GgmlType::Q4_1: return &kQ4_1;
    case GgmlType::Q5_0: return &kQ5_0;
    case GgmlType::Q5_1: return &kQ5_1;
    case GgmlType::Q8_0: return &kQ8_0;
    case GgmlType::IQ4_NL: return &kIq4Nl;
    case GgmlType::MXFP4: return &kMxfp4;
    default: return nullptr;
  }
}

}  // namespace tern::kernels::x86
