// AVX-512 VNNI table for the 32-element block types. Q4_0, Q8_0 and IQ4_NL run
// every tile through the row-per-lane panels of avx512_panel_legacy.cpp; Q4_1,
// Q5_0 and Q5_1 use the register tiles below.
//
// Work goes in groups of four blocks ("x4 lanes", avx512_util.h): one zmm
// holds elements 0..15 of four consecutive blocks ("lo"), another their
// elements 16..31 ("hi"), so the nibble halves of Q4/Q5 blocks need no
// shuffle and two vpdpbusd give every block's dot in its own 128-bit lane.
// Each lane group is then scaled by dw * dx of its block in f32:
//
//   acc[r][c] += f32(int_dot) * (dw ⊙ dx)        [+ m ⊙ s for Q4_1/Q5_1]
//
// vpdpbusd multiplies unsigned by signed bytes; q is unsigned here:
//   Q5_0        q in 0..31, x signed: dot(q - 16, x) = dot(q, x) - 16 * sum(x)
//   Q4_1, Q5_1  no offset; the minimum enters as m * s (s = dx * sum(xq), Q8_1)
// The 16 * sum(x) term is computed once per column and group and shared by
// every row of the tile. Integer sums are exact; the f32 part differs from the
// scalar reference only in summation order. Each (row, column) result is the
// same operations whatever the tile shape (batch invariance).
#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "kernels/x86/avx512_util.h"
#include "kernels/x86/tile_dispatch.h"
#include "kernels/x86/x86_impl.h"
#include "quant/blocks.h"

namespace tern::kernels::x86 {
namespace {

using gguf::GgmlType;

constexpr int kGroup = 4;  // blocks per step

// One column's activations for a group of blocks.
struct XGroup {
  __m512i lo, hi;  // x4 lanes of int8
  __m512 d;        // dx per block, x4
  __m512i init;    // -o * sum(x) per lane (offset types), else unused
  __m512 s;        // Q8_1 s once per block (Q4_1, Q5_1), else unused
};

// One row's weights for a group of blocks.
struct WGroup {
  __m512i lo, hi;  // x4 lanes of weight bytes
  __m512 d;        // dw per block, x4
  __m512 m;        // minimum per block, x4 (Q4_1, Q5_1)
};

// Nibbles of NB blocks whose 16 qs bytes sit at p + k * stride.
template <int NB>
inline void load_nibbles(const uint8_t* p, size_t stride, WGroup& g) {
  const __m512i t = load_128x4<NB>(p, stride);
  g.lo = _mm512_and_si512(t, bytes(0x0f));
  g.hi = _mm512_and_si512(_mm512_srli_epi16(t, 4), bytes(0x0f));
}

// Fifth bits of Q5 blocks (qh u32 at p + k * stride) into bit 4 of lo / hi.
template <int NB>
inline void add_fifth_bits(const uint8_t* p, size_t stride, WGroup& g) {
  uint64_t m_lo = 0, m_hi = 0;
  for (int k = 0; k < NB; ++k) {
    const uint32_t qh = load_u32(p + k * stride);
    m_lo |= static_cast<uint64_t>(qh & 0xffff) << (16 * k);
    m_hi |= static_cast<uint64_t>(qh >> 16) << (16 * k);
  }
  g.lo = _mm512_mask_add_epi8(g.lo, m_lo, g.lo, bytes(16));
  g.hi = _mm512_mask_add_epi8(g.hi, m_hi, g.hi, bytes(16));
}

struct Q4_1 {
  static constexpr size_t kBytes = sizeof(quant::BlockQ4_1);
  static constexpr GgmlType kAct = GgmlType::Q8_1;
  static constexpr int kOffset = 0;
  static constexpr bool kMin = true;
  template <int NB>
  static void load(const uint8_t* p, WGroup& g) {
    load_nibbles<NB>(p + 4, kBytes, g);
    g.d = spread_x4(load_f16x4<NB>(p, kBytes));
    g.m = spread_x4(load_f16x4<NB>(p + 2, kBytes));
  }
};

struct Q5_0 {
  static constexpr size_t kBytes = sizeof(quant::BlockQ5_0);
  static constexpr GgmlType kAct = GgmlType::Q8_0;
  static constexpr int kOffset = 16;
  static constexpr bool kMin = false;
  template <int NB>
  static void load(const uint8_t* p, WGroup& g) {
    load_nibbles<NB>(p + 6, kBytes, g);
    add_fifth_bits<NB>(p + 2, kBytes, g);
    g.d = spread_x4(load_f16x4<NB>(p, kBytes));
  }
};

struct Q5_1 {
  static constexpr size_t kBytes = sizeof(quant::BlockQ5_1);
  static constexpr GgmlType kAct = GgmlType::Q8_1;
  static constexpr int kOffset = 0;
  static constexpr bool kMin = true;
  template <int NB>
  static void load(const uint8_t* p, WGroup& g) {
    load_nibbles<NB>(p + 8, kBytes, g);
    add_fifth_bits<NB>(p + 4, kBytes, g);
    g.d = spread_x4(load_f16x4<NB>(p, kBytes));
    g.m = spread_x4(load_f16x4<NB>(p + 2, kBytes));
  }
};

template <class WT, int NB>
inline XGroup load_x(const uint8_t* p) {
  constexpr bool kQ8_1 = WT::kAct == GgmlType::Q8_1;
  constexpr size_t kStride = kQ8_1 ? sizeof(quant::BlockQ8_1) : sizeof(quant::BlockQ8_0);
  constexpr int kQs = kQ8_1 ? 4 : 2;
  XGroup g;
  g.lo = load_128x4<NB>(p + kQs, kStride);
  g.hi = load_128x4<NB>(p + kQs + 16, kStride);
  g.d = spread_x4(load_f16x4<NB>(p, kStride));
  if constexpr (WT::kOffset != 0) {
    const __m512i o = bytes(WT::kOffset);
    const __m512i s = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), o, g.lo), o, g.hi);
    g.init = _mm512_sub_epi32(_mm512_setzero_si512(), s);
  }
  if constexpr (WT::kMin) g.s = spread_once_x4(load_f16x4<NB>(p + 2, kStride));
  return g;
}

template <class WT>
inline __m512i block_dots(const WGroup& w, const XGroup& x) {
  const __m512i init = WT::kOffset != 0 ? x.init : _mm512_setzero_si512();
  return _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(init, w.lo, x.lo), w.hi, x.hi);
}

template <class WT>
struct LegacyTile {
  static constexpr size_t kXBytes = WT::kAct == GgmlType::Q8_1 ? sizeof(quant::BlockQ8_1) : sizeof(quant::BlockQ8_0);

  template <int R, int C, int NB>
  static inline void step(const uint8_t* w, size_t w_stride, size_t ahead, const uint8_t* x, size_t x_stride,
                          __m512 (&acc)[R][C]) {
    XGroup xg[C];
    for (int c = 0; c < C; ++c) xg[c] = load_x<WT, NB>(x + c * x_stride);
    for (int r = 0; r < R; ++r) {
      // Rows the next tiles will read, at the same offset: rows are short
      // streams that the hardware prefetcher picks up too late.
      prefetch_span<NB * WT::kBytes + 64>(w + r * w_stride + ahead);
      WGroup wg;
      WT::template load<NB>(w + r * w_stride, wg);
      for (int c = 0; c < C; ++c) {
        const __m512 dot = _mm512_cvtepi32_ps(block_dots<WT>(wg, xg[c]));
        acc[r][c] = _mm512_fmadd_ps(dot, _mm512_mul_ps(wg.d, xg[c].d), acc[r][c]);
        if constexpr (WT::kMin) acc[r][c] = _mm512_fmadd_ps(wg.m, xg[c].s, acc[r][c]);
      }
    }
  }

  template <int R, int C>
  static void tile(int64_t n, const uint8_t* w, size_t w_stride, const uint8_t* x, size_t x_stride, float* y,
                   size_t ldy) {
    __m512 acc[R][C];
    zero_tile(acc);
    const int64_t nb = n / 32;
    int64_t ib = 0;
    const size_t ahead = prefetch_ahead(R, w_stride);
    for (; ib + kGroup <= nb; ib += kGroup)
      step<R, C, kGroup>(w + ib * WT::kBytes, w_stride, ahead, x + ib * kXBytes, x_stride, acc);
    for (; ib < nb; ++ib) step<R, C, 1>(w + ib * WT::kBytes, w_stride, ahead, x + ib * kXBytes, x_stride, acc);
    store_tile(acc, y, ldy);
  }
};

constexpr int kTileRows = 4, kTileCols = 4;                       // register tile of LegacyTile
constexpr int kPanelRows = 32, kPanelCols = 32;                   // avx512_panel_legacy.cpp

// Types with a panel kernel run every tile through it (avx512_panel_legacy.cpp).
template <GgmlType kType>
void panel_tile(int64_t n, const void* w, size_t w_stride, int n_rows, const void* xq, size_t x_stride, int n_cols,
                float* y, size_t ldy) {
  avx512_legacy_panel(kType, false)(n, static_cast<const uint8_t*>(w), w_stride, n_rows, static_cast<const uint8_t*>(xq),
                             x_stride, n_cols, y, ldy);
}

template <GgmlType kType>
void packed_panel_tile(int64_t n, const void* panel, int n_rows, const void* xq, size_t x_stride, int n_cols, float* y,
                       size_t ldy) {
  avx512_legacy_panel(kType, true)(n, static_cast<const uint8_t*>(panel), 0, n_rows, static_cast<const uint8_t*>(xq), x_stride,
                             n_cols, y, ldy);
}

template <class WT>
constexpr MatmulKernels row() {
  constexpr auto quantize = WT::kAct == GgmlType::Q8_1 ? avx512_quantize_q8_1 : avx512_quantize_q8_0;
  return {WT::kAct, quantize, dispatch_tile<LegacyTile<WT>, kTileRows, kTileCols>, kTileRows, kTileCols,
          CpuLevel::Avx512};
}

// Block layout of the packed panels: lead bytes, dwords, trailing bytes.
constexpr MatmulKernels::PackLayout pack_layout(GgmlType t) {
  switch (t) {
    case GgmlType::Q4_0: return {2, 4, 0};
    case GgmlType::Q8_0: return {2, 8, 0};
    case GgmlType::IQ4_NL: return {2, 4, 0};
    case GgmlType::MXFP4: return {1, 4, 0};
    default: return {};
  }
}

template <GgmlType kType>
constexpr MatmulKernels panel_row() {
  MatmulKernels k{GgmlType::Q8_0, avx512_quantize_q8_0_biased, panel_tile<kType>, kPanelRows, kPanelCols,
                  CpuLevel::Avx512, pack_layout(kType), packed_panel_tile<kType>};
  k.act_biased = true;
  return k;
}

void s24_tile(int64_t n, const void* w, size_t w_stride, int n_rows, const void* xq, size_t x_stride, int n_cols,
              float* y, size_t ldy) {
  avx512_sparse24_panel(false)(n, static_cast<const uint8_t*>(w), w_stride, n_rows, static_cast<const uint8_t*>(xq),
                               x_stride, n_cols, y, ldy);
}

void s24_packed_tile(int64_t n, const void* panel, int n_rows, const void* xq, size_t x_stride, int n_cols, float* y,
                     size_t ldy) {
  avx512_sparse24_panel(true)(n, static_cast<const uint8_t*>(panel), 0, n_rows, static_cast<const uint8_t*>(xq),
                              x_stride, n_cols, y, ldy);
}

// Q8_0_S24: Q8_0's panel on the sparse layout (avx512_sparse24.cpp; matmul_kernels.cpp checks VBMI2).
constexpr MatmulKernels s24_row() {
  MatmulKernels::PackLayout pack;
  pack.sparse24 = true;
  MatmulKernels k{GgmlType::Q8_0, avx512_quantize_q8_0_biased, s24_tile, kPanelRows, kPanelCols, CpuLevel::Avx512,
                  pack, s24_packed_tile};
  k.act_biased = true;
  return k;
}

constexpr MatmulKernels kQ8_0S24 = s24_row();
constexpr MatmulKernels kQ4_0 = panel_row<GgmlType::Q4_0>();
constexpr MatmulKernels kQ4_1 = row<Q4_1>();
constexpr MatmulKernels kQ5_0 = row<Q5_0>();
constexpr MatmulKernels kQ5_1 = row<Q5_1>();
constexpr MatmulKernels kQ8_0 = panel_row<GgmlType::Q8_0>();
constexpr MatmulKernels kIq4Nl = panel_row<GgmlType::IQ4_NL>();
constexpr MatmulKernels kMxfp4 = panel_row<GgmlType::MXFP4>();

}  // namespace

const MatmulKernels* avx512_legacy_kernels(GgmlType t) {
  switch (t) {
    case GgmlType::Q4_0: return &kQ4_0;
    case GgmlType::Q4_1: return &kQ4_1;
    case GgmlType::Q5_0: return &kQ5_0;
    case GgmlType::Q5_1: return &kQ5_1;
    case GgmlType::Q8_0: return &kQ8_0;
    case GgmlType::Q8_0_S24: return &kQ8_0S24;
    case GgmlType::IQ4_NL: return &kIq4Nl;
    case GgmlType::MXFP4: return &kMxfp4;
    default: return nullptr;
  }
}

}  // namespace tern::kernels::x86
