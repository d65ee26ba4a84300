// AVX-512 kernels for float weights: F32 and BF16 (F16 and FP8: avx512_f16.cpp).
//
//   F32   w f32 x f32 (act F32): one FMA per 16 weights per column
//   BF16  with AVX512-BF16: x rounded to bf16 (act BF16) and vdpbf16ps, 32 products per
//         instruction (exact products, f32 sums) — as ggml does for BF16 weights;
//         without it: w widened by a 16-bit shift (exact), x f32 (act F32)
// Row tails shorter than a vector use masked loads (lanes beyond n read as 0).
//
// One accumulation order for every tile shape (bit-exact batch invariance):
// output (r, c) is a zmm accumulator whose lane j sums the products of
// elements j, j + V, j + 2V ... (V = 16, or 32 as pairs for vdpbf16ps) in
// order of increasing k, one fused instruction per vector, the last vector
// masked; then hsum()'s fixed tree. Two schedules compute exactly that:
//
//   register tile (decode, n_cols < kTileCols): up to 4 rows x 3 columns over
//     the whole row, weights read (and widened) straight from memory;
//   panel (prompt, any tile with n_cols >= kTileCols): up to kPanelRows rows x
//     kPanelCols columns with K in chunks of kChunkVecs vectors. Per chunk the
//     panel's weight rows are packed once into a contiguous buffer (widened to
//     f32 — one vcvtph2ps per 16 weights for the whole panel, not per column —
//     or copied for vdpbf16ps), then every kTileRows x kTileCols register tile
//     runs over the chunk, its accumulators parked in memory between chunks:
//
//       for chunk of K:                     s.w [kPanelRows][chunk] packed, L1
//         for columns c0 += kTileCols:      x: the chunk of 4 columns (L2, then L1)
//           for rows r0 += kTileRows:       s.acc[c][r] <-> 24 zmm, 24 FMAs per vector
//
// Parking an accumulator in memory and reloading it changes no bit, so both
// schedules (and every tile shape) give identical results.
#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "kernels/cpu_features.h"
#include "kernels/x86/avx512_util.h"
#include "kernels/x86/tile_dispatch.h"
#include "kernels/x86/x86_impl.h"

namespace tern::kernels::x86 {
namespace {

using gguf::GgmlType;

void copy_f32(const float* x, void* xq, int64_t n) {
  std::memcpy(xq, x, static_cast<size_t>(n) * sizeof(float));
}

// Weights as 16 f32 lanes from element i (mask selects the valid lanes).
struct F32W {
  static constexpr size_t kElemBytes = 4;
  static __m512 load(const uint8_t* p, __mmask16 m) { return _mm512_maskz_loadu_ps(m, p); }
};
struct Bf16W {
  static constexpr size_t kElemBytes = 2;
  static __m512 load(const uint8_t* p, __mmask16 m) {
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, p)), 16));
  }
};

// The arithmetic of each family, shared by both schedules: kV elements per
// fused instruction; a packed weight vector is 64 bytes (f32 after widening,
// or raw bf16 pairs).
//
// Weights of type WT times f32 activations (F32, BF16 without AVX512-BF16).
template <class WT>
struct FmaOp {
  static constexpr int kV = 16;
  static constexpr size_t kWBytes = WT::kElemBytes;  // bytes of one weight in memory
  static constexpr size_t kXBytes = 4;               // bytes of one activation
  using Mask = __mmask16;
  static Mask tail_mask(int64_t k) { return static_cast<Mask>((1u << k) - 1); }
  // Weight vector from memory (masked lanes are 0).
  static __m512 load_w(const uint8_t* p, Mask m) { return WT::load(p, m); }
  static __m512 load_x(const uint8_t* p, Mask m) { return _mm512_maskz_loadu_ps(m, p); }
  // Packed weight vector (64 bytes, already widened).
  static __m512 load_packed(const float* p) { return _mm512_load_ps(p); }
  static void store_packed(float* p, __m512 w) { _mm512_store_ps(p, w); }
  static __m512 fma(__m512 acc, __m512 w, __m512 x) { return _mm512_fmadd_ps(w, x, acc); }
};

// BF16 weights times BF16 activations with vdpbf16ps. The file is compiled with
// -mavx512bf16, but only this op uses it and the table hands it out only when
// the CPU has AVX512-BF16.
struct DpBf16Op {
  static constexpr int kV = 32;
  static constexpr size_t kWBytes = 2;
  static constexpr size_t kXBytes = 2;
  using Mask = __mmask32;
  static Mask tail_mask(int64_t k) { return static_cast<Mask>((1ull << k) - 1); }
  static __m512i load_w(const uint8_t* p, Mask m) { return _mm512_maskz_loadu_epi16(m, p); }
  static __m512i load_x(const uint8_t* p, Mask m) { return _mm512_maskz_loadu_epi16(m, p); }
  static __m512i load_packed(const float* p) { return _mm512_load_si512(p); }
  static void store_packed(float* p, __m512i w) { _mm512_store_si512(p, w); }
  static __m512 fma(__m512 acc, __m512i w, __m512i x) {
    return _mm512_dpbf16_ps(acc, (__m512bh)w, (__m512bh)x);
  }
};

// ---- Register tile: R rows x C columns over the whole row (decode) ----------

template <class Op>
struct RegTile {
  template <int R, int C>
  static inline void step(const uint8_t* w, size_t w_stride, const uint8_t* x, size_t x_stride, int64_t i,
                          typename Op::Mask m, __m512 (&acc)[R][C]) {
    decltype(Op::load_x(x, m)) xv[C];
    for (int c = 0; c < C; ++c) xv[c] = Op::load_x(x + c * x_stride + i * Op::kXBytes, m);
    for (int r = 0; r < R; ++r) {
      prefetch_span<Op::kV * Op::kWBytes>(w + (r + R) * w_stride + i * Op::kWBytes);  // next row tile (GEMV)
      const auto wv = Op::load_w(w + r * w_stride + i * Op::kWBytes, m);
      for (int c = 0; c < C; ++c) acc[r][c] = Op::fma(acc[r][c], wv, xv[c]);
    }
  }

  template <int R, int C>
  static void tile(int64_t n, const uint8_t* w, size_t w_stride, const uint8_t* x, size_t x_stride, float* y,
                   size_t ldy) {
    __m512 acc[R][C];
    zero_tile(acc);
    const typename Op::Mask all = static_cast<typename Op::Mask>(~0ull);
    int64_t i = 0;
    for (; i + Op::kV <= n; i += Op::kV) step<R, C>(w, w_stride, x, x_stride, i, all, acc);
    if (i < n) step<R, C>(w, w_stride, x, x_stride, i, Op::tail_mask(n - i), acc);
    store_tile(acc, y, ldy);
  }
};

// ---- Panel: up to kPanelRows rows x kPanelCols columns, K in chunks (prompt) --

// Tuned on Zen 5 (48 KiB L1D, 1 MiB L2): scratch = 24 KiB packed weights + 24 KiB accumulators.
constexpr int kPanelRows = 12;
constexpr int kPanelCols = 32;
constexpr int kTileRows = 6;  // a 6 x 4 register tile: 24 accumulators, 10 loads per 24 FMAs
constexpr int kTileCols = 4;
constexpr int kChunkVecs = 32;      // vectors of K per chunk: 512 elements (1024 for vdpbf16ps)
constexpr int kPrefetchChunks = 2;  // weights are prefetched into L2 this many chunks ahead

// One panel's scratch, 64-byte aligned, on the stack (L1 while a chunk runs).
struct alignas(64) PanelScratch {
  float w[kPanelRows][kChunkVecs * 16];  // packed weights of the chunk: [r][vector][64 bytes]
  __m512 acc[kPanelCols][kPanelRows];    // parked accumulators [c][r]
};

// The chunk of K being computed: nv vectors, the last masked by `last` (all ones when full).
template <class Op>
struct Chunk {
  int nv;
  typename Op::Mask last;
};

// [hsum(v[0]), hsum(v[1]), hsum(v[2]), hsum(v[3])] with hsum()'s exact tree
// (lanes i + i+8, then i + i+4, then i + i+2, then i + i+1), four at a time.
inline __m128 hsum4(const __m512* v) {
  const __m512 p = _mm512_add_ps(_mm512_shuffle_f32x4(v[0], v[1], _MM_SHUFFLE(1, 0, 1, 0)),
                                 _mm512_shuffle_f32x4(v[0], v[1], _MM_SHUFFLE(3, 2, 3, 2)));
  const __m512 q = _mm512_add_ps(_mm512_shuffle_f32x4(v[2], v[3], _MM_SHUFFLE(1, 0, 1, 0)),
                                 _mm512_shuffle_f32x4(v[2], v[3], _MM_SHUFFLE(3, 2, 3, 2)));
  // 128-bit lane g = the 8-lane sums of v[g], halves added: lanes 0..3 of each.
  __m512 z = _mm512_add_ps(_mm512_shuffle_f32x4(p, q, _MM_SHUFFLE(2, 0, 2, 0)),
                           _mm512_shuffle_f32x4(p, q, _MM_SHUFFLE(3, 1, 3, 1)));
  z = _mm512_add_ps(z, _mm512_permute_ps(z, _MM_SHUFFLE(1, 0, 3, 2)));
  z = _mm512_add_ps(z, _mm512_movehdup_ps(z));
  return _mm512_castps512_ps128(
      _mm512_permutexvar_ps(_mm512_set_epi32(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 12, 8, 4, 0), z));
}

// One vector step of an R x C register tile: vector v of the chunk (x: its column 0).
template <class Op, int R, int C>
inline void chunk_step(const PanelScratch& s, int r0, const uint8_t* x, size_t x_stride, int v,
                       typename Op::Mask m, __m512 (&acc)[R][C]) {
  decltype(Op::load_x(x, m)) xv[C];
  for (int c = 0; c < C; ++c) xv[c] = Op::load_x(x + c * x_stride + v * Op::kV * Op::kXBytes, m);
  for (int r = 0; r < R; ++r) {
    auto wv = Op::load_packed(&s.w[r0 + r][v * 16]);
    asm("" : "+v"(wv));  // one load per weight vector, not one folded into each of the C FMAs
    for (int c = 0; c < C; ++c) acc[r][c] = Op::fma(acc[r][c], wv, xv[c]);
  }
}

// acc[c][r] of rows r0 .. r0 + R - 1 x columns c0 .. c0 + C - 1 over one chunk
// (x points at the chunk's first element of column 0).
template <class Op, int R, int C>
inline void chunk_tile(PanelScratch& s, int r0, int c0, const uint8_t* x, size_t x_stride, Chunk<Op> ch) {
  __m512 acc[R][C];
  for (int c = 0; c < C; ++c)
    for (int r = 0; r < R; ++r) acc[r][c] = s.acc[c0 + c][r0 + r];
  const uint8_t* xc = x + c0 * x_stride;
  const typename Op::Mask all = static_cast<typename Op::Mask>(~0ull);
  for (int v = 0; v < ch.nv - 1; ++v) chunk_step<Op, R, C>(s, r0, xc, x_stride, v, all, acc);
  chunk_step<Op, R, C>(s, r0, xc, x_stride, ch.nv - 1, ch.last, acc);
  for (int c = 0; c < C; ++c)
    for (int r = 0; r < R; ++r) s.acc[c0 + c][r0 + r] = acc[r][c];
}

// The last n_rows % kTileRows rows (R = kTileRows - 1 first, counting down to the shape asked).
template <class Op, int R, int C>
inline void chunk_row_tail(int rows, PanelScratch& s, int r0, int c0, const uint8_t* x, size_t x_stride,
                           Chunk<Op> ch) {
  if constexpr (R > 1) {
    if (rows < R) return chunk_row_tail<Op, R - 1, C>(rows, s, r0, c0, x, x_stride, ch);
  }
  chunk_tile<Op, R, C>(s, r0, c0, x, x_stride, ch);
}

// Every row of the panel for columns c0 .. c0 + C - 1.
template <class Op, int C>
inline void chunk_cols(PanelScratch& s, int n_rows, int c0, const uint8_t* x, size_t x_stride, Chunk<Op> ch) {
  int r0 = 0;
  for (; r0 + kTileRows <= n_rows; r0 += kTileRows) chunk_tile<Op, kTileRows, C>(s, r0, c0, x, x_stride, ch);
  if (r0 < n_rows) chunk_row_tail<Op, kTileRows - 1, C>(n_rows - r0, s, r0, c0, x, x_stride, ch);
}

// The last n_cols % kTileCols columns.
template <class Op, int C>
inline void chunk_col_tail(int cols, PanelScratch& s, int n_rows, int c0, const uint8_t* x, size_t x_stride,
                           Chunk<Op> ch) {
  if constexpr (C > 1) {
    if (cols < C) return chunk_col_tail<Op, C - 1>(cols, s, n_rows, c0, x, x_stride, ch);
  }
  chunk_cols<Op, C>(s, n_rows, c0, x, x_stride, ch);
}

// Packs the chunk at element k0 of the panel's rows into s.w.
template <class Op>
inline void pack_chunk(PanelScratch& s, const uint8_t* w, size_t w_stride, int n_rows, int64_t k0,
                       Chunk<Op> ch) {
  const typename Op::Mask all = static_cast<typename Op::Mask>(~0ull);
  for (int r = 0; r < n_rows; ++r) {
    const uint8_t* row = w + r * w_stride + k0 * Op::kWBytes;
    for (int v = 0; v < ch.nv; ++v)
      Op::store_packed(&s.w[r][v * 16],
                       Op::load_w(row + v * Op::kV * Op::kWBytes, v == ch.nv - 1 ? ch.last : all));
  }
}

// Prefetches into L2 the kBytes at `next` + r * w_stride of every panel row r:
// a later chunk of the same rows or, past the row end, of the next panel (the
// driver's next tile). Into L2 only: L1 holds the packed chunk and the
// accumulators.
template <size_t kBytes>
inline void prefetch_rows(const uint8_t* next, size_t w_stride, int n_rows) {
  for (int r = 0; r < n_rows; ++r)
    for (size_t b = 0; b < kBytes; b += 64)
      _mm_prefetch(reinterpret_cast<const char*>(next + r * w_stride + b), _MM_HINT_T1);
}

template <class Op>
void panel(int64_t n, const uint8_t* w, size_t w_stride, int n_rows, const uint8_t* x, size_t x_stride,
           int n_cols, float* y, size_t ldy) {
  PanelScratch s;
  for (int c = 0; c < n_cols; ++c)
    for (int r = 0; r < n_rows; ++r) s.acc[c][r] = _mm512_setzero_ps();
  constexpr int64_t kChunkElems = kChunkVecs * Op::kV;
  const int64_t n_padded = (n + kChunkElems - 1) / kChunkElems * kChunkElems;  // n in whole chunks
  for (int64_t k0 = 0; k0 < n; k0 += kChunkElems) {
    const int64_t len = n - k0 < kChunkElems ? n - k0 : kChunkElems;
    const int64_t rem = len % Op::kV;
    const Chunk<Op> ch{static_cast<int>((len + Op::kV - 1) / Op::kV),
                       rem ? Op::tail_mask(rem) : static_cast<typename Op::Mask>(~0ull)};
    pack_chunk<Op>(s, w, w_stride, n_rows, k0, ch);
    const int64_t k_ahead = k0 + kPrefetchChunks * kChunkElems;
    prefetch_rows<kChunkElems * Op::kWBytes>(
        k_ahead < n ? w + k_ahead * Op::kWBytes : w + n_rows * w_stride + (k_ahead - n_padded) * Op::kWBytes,
        w_stride, n_rows);
    const uint8_t* xk = x + k0 * Op::kXBytes;
    int c0 = 0;
    for (; c0 + kTileCols <= n_cols; c0 += kTileCols)
      chunk_cols<Op, kTileCols>(s, n_rows, c0, xk, x_stride, ch);
    if (c0 < n_cols) chunk_col_tail<Op, kTileCols - 1>(n_cols - c0, s, n_rows, c0, xk, x_stride, ch);
  }
  for (int c = 0; c < n_cols; ++c) {
    int r = 0;
    for (; r + 4 <= n_rows; r += 4) _mm_storeu_ps(y + c * ldy + r, hsum4(&s.acc[c][r]));
    for (; r < n_rows; ++r) y[c * ldy + r] = hsum(s.acc[c][r]);
  }
}

// The MatmulKernels::tile of every float type: register tiles of 4 rows for
// decode-sized calls (fewer than kTileCols columns), the panel otherwise.
template <class Op>
void float_tile(int64_t n, const void* w, size_t w_stride, int n_rows, const void* xq, size_t x_stride,
                int n_cols, float* y, size_t ldy) {
  const auto* wb = static_cast<const uint8_t*>(w);
  const auto* xb = static_cast<const uint8_t*>(xq);
  if (n_cols >= kTileCols) return panel<Op>(n, wb, w_stride, n_rows, xb, x_stride, n_cols, y, ldy);
  for (int r0 = 0; r0 < n_rows; r0 += 4)
    dispatch_tile<RegTile<Op>, 4, kTileCols - 1>(n, wb + r0 * w_stride, w_stride,
                                                 n_rows - r0 < 4 ? n_rows - r0 : 4, xb, x_stride, n_cols,
                                                 y + r0, ldy);
}

template <class Op>
constexpr MatmulKernels float_row(GgmlType act_type, void (*quantize_act)(const float*, void*, int64_t)) {
  return {act_type, quantize_act, float_tile<Op>, kPanelRows, kPanelCols, CpuLevel::Avx512};
}

constexpr MatmulKernels kF32 = float_row<FmaOp<F32W>>(GgmlType::F32, copy_f32);
constexpr MatmulKernels kBf16Fma = float_row<FmaOp<Bf16W>>(GgmlType::F32, copy_f32);
constexpr MatmulKernels kBf16Dp = float_row<DpBf16Op>(GgmlType::BF16, avx512_convert_bf16);

}  // namespace

const MatmulKernels* avx512_float_kernels(GgmlType t) {
  switch (t) {
    case GgmlType::F32:
      return &kF32;
    case GgmlType::F16:
      return avx512_f16_kernels();
    case GgmlType::BF16:
      return cpu_features().avx512bf16 ? &kBf16Dp : &kBf16Fma;
    case GgmlType::F8_E4M3:
    case GgmlType::F8_E5M2:
      return avx512_fp8_kernels(t);  // F16's by-element panels (avx512_f16.cpp)
    default:
      return nullptr;
  }
}

}  // namespace tern::kernels::x86
