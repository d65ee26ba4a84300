// AVX2 kernel for F16 and BF16 weights x f32 activations: 32-row panels read
// by element, one schedule for decode and prompt -- avx512_f16.cpp's plan
// (read that first) with 8-lane vectors and AVX2's 16 registers.
//
// Each output (row r, column c) is one f32 accumulator lane summing
// w[r][k] * x[c][k] in order of increasing k with fused multiply-adds (the
// weight widened exactly), whatever the tile, batch or packing: every path
// gives the same bits (and F16 the same bits as the AVX-512 kernel).
//
// A register tile is 16 rows x up to 6 columns (12 accumulators, two weight
// vectors, one broadcast); decode (1-2 columns) runs all 32 rows per k
// instead, so that 4-8 independent FMA chains cover the FMA latency:
//
//   for chunk of K (kChunk elements: 16 KiB of F16 weights, stays in L1):
//     for half of 16 rows, column group of 6:   acc <- parked (memory, L1)
//       for k in chunk:  acc[v][c] += w[v] * broadcast(x[c][k])   v = 8-row vector
//                                                parked <- acc
#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "kernels/x86/avx2_panel_util.h"
#include "kernels/x86/avx2_util.h"
#include "kernels/x86/by_element_glue.h"
#include "kernels/x86/x86_impl.h"

namespace tern::kernels::x86 {
namespace {

// The element formats: 8 rows' values at one k as an f32 vector.
struct F16E {
  static __m256 load(const uint16_t* p) { return _mm256_cvtph_ps(load_128(reinterpret_cast<const uint8_t*>(p))); }
};
struct Bf16E {
  static __m256 load(const uint16_t* p) {
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(load_128(reinterpret_cast<const uint8_t*>(p))), 16));
  }
};

constexpr int kRows = 32;        // panel rows: four vectors of 8
constexpr int kGroupCols = 6;    // columns of one 16-row register tile
constexpr int kDecodeCols = 2;   // up to this many columns run 32-row tiles
constexpr int kMaxCols = 96;     // columns per call, sharing each chunk of weights in L1
constexpr int kChunk = 256;      // elements of K per chunk: 16 KiB of weights
constexpr int kAheadBytes = 4096;  // decode: each k prefetches the line this far on

// Accumulators of every column, parked between chunks (12 KiB): [c][v], v = rows 8v .. 8v + 7.
struct alignas(32) Parked {
  __m256 acc[kMaxCols][4];
};

// Rows [8 v0, 8 (v0 + V)) x C columns over k = 0 .. len-1 of the chunk: w points at
// its first element (kRows values per k), x at column 0's first element, xs floats between columns.
template <class E, int V, int C>
inline void tile_chunk(const uint16_t* w, int v0, int len, const float* x, size_t xs, __m256 (*park)[4]) {
  constexpr int kAhead = kAheadBytes / (kRows * 2);
  __m256 acc[V][C];
  for (int c = 0; c < C; ++c)
    for (int v = 0; v < V; ++v) acc[v][c] = park[c][v0 + v];
  for (int k = 0; k < len; ++k) {
    if constexpr (C <= kDecodeCols) _mm_prefetch(reinterpret_cast<const char*>(w + kRows * (k + kAhead)), _MM_HINT_T0);
    __m256 wv[V];
    for (int v = 0; v < V; ++v) wv[v] = E::load(w + kRows * k + 8 * (v0 + v));
    for (int c = 0; c < C; ++c) {
      const __m256 xb = _mm256_broadcast_ss(x + c * xs + k);
      for (int v = 0; v < V; ++v) acc[v][c] = _mm256_fmadd_ps(wv[v], xb, acc[v][c]);
    }
  }
  for (int c = 0; c < C; ++c)
    for (int v = 0; v < V; ++v) park[c][v0 + v] = acc[v][c];
}

// The last cols (< kGroupCols) columns of a 16-row half (C counts down to the shape asked).
template <class E, int C>
inline void tail_chunk(int cols, const uint16_t* w, int v0, int len, const float* x, size_t xs, __m256 (*park)[4]) {
  if constexpr (C > 1) {
    if (cols < C) return tail_chunk<E, C - 1>(cols, w, v0, len, x, xs, park);
  }
  tile_chunk<E, 2, C>(w, v0, len, x, xs, park);
}

// Rows in place -> the by-element form of chunk [k0, k0 + len) (rows past
// n_rows are left as they are: their lanes are never stored).
inline void gather_chunk(const uint8_t* w, size_t w_stride, int n_rows, int64_t k0, int len, uint16_t* out) {
  for (int r = 0; r < n_rows; ++r) {
    const uint8_t* row = w + r * w_stride + 2 * k0;
    for (int k = 0; k < len; ++k) std::memcpy(out + kRows * k + r, row + 2 * k, 2);
  }
}

// One panel: weights either packed (by element, whole row) or rows in place.
template <class E>
void by_element_panel(int64_t n, const uint8_t* packed, const uint8_t* w, size_t w_stride, int n_rows, const float* x,
                      size_t xs, int n_cols, float* y, size_t ldy) {
  Parked p;
  for (int c = 0; c < n_cols; ++c)
    for (__m256& a : p.acc[c]) a = _mm256_setzero_ps();
  alignas(32) uint16_t staged[kChunk * kRows];  // rows in place only
  for (int64_t k0 = 0; k0 < n; k0 += kChunk) {
    const int len = static_cast<int>(n - k0 < kChunk ? n - k0 : kChunk);
    const uint16_t* wc;
    if (packed) {
      wc = reinterpret_cast<const uint16_t*>(packed) + kRows * k0;
    } else {
      gather_chunk(w, w_stride, n_rows, k0, len, staged);
      wc = staged;
    }
    const float* xc = x + k0;
    if (n_cols == 1) {
      tile_chunk<E, 4, 1>(wc, 0, len, xc, xs, p.acc);
      continue;
    }
    if (n_cols == 2) {
      tile_chunk<E, 4, 2>(wc, 0, len, xc, xs, p.acc);
      continue;
    }
    for (int v0 = 0; v0 < 4; v0 += 2) {
      int c0 = 0;
      for (; c0 + kGroupCols <= n_cols; c0 += kGroupCols)
        tile_chunk<E, 2, kGroupCols>(wc, v0, len, xc + c0 * xs, xs, p.acc + c0);
      if (c0 < n_cols) tail_chunk<E, kGroupCols - 1>(n_cols - c0, wc, v0, len, xc + c0 * xs, xs, p.acc + c0);
    }
  }
  for (int c = 0; c < n_cols; ++c)
    for (int v = 0; v < 4; ++v) store_rows(y + c * ldy + 8 * v, p.acc[c][v], n_rows - 8 * v);
}


// Activations blocked at 1 MiB (the driver passes over each block of columns
// once per weight row tile): on a Zen 3 (512 KiB L2) pp512 of bench-1b F16 ran
// 7% faster than with AVX-512's 16 MiB single pass (59.1/57.3 -> 63.9/61.4
// tok/s, interleaved); 256 KiB measured the same as 1 MiB.
constexpr MatmulKernels kF16 = by_element_row<by_element_panel<F16E>>(kMaxCols, CpuLevel::Avx2, size_t{1} << 20);
constexpr MatmulKernels kBf16 = by_element_row<by_element_panel<Bf16E>>(kMaxCols, CpuLevel::Avx2, size_t{1} << 20);

}  // namespace

const MatmulKernels* avx2_by_element_kernels(gguf::GgmlType t) {
  return t == gguf::GgmlType::F16 ? &kF16 : t == gguf::GgmlType::BF16 ? &kBf16 : nullptr;
}

}  // namespace tern::kernels::x86
