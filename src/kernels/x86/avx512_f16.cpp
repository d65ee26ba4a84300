// AVX-512 kernel for F16 and FP8 weights x f32 activations: 32-row panels,
// one schedule for decode and prompt.
//
// Each output (row r, column c) is one f32 accumulator lane summing
// w[r][k] * x[c][k] in order of increasing k with fused multiply-adds (the
// F16 weight widened exactly by vcvtph2ps, an FP8 code first turned into half
// bits as avx512_float.cpp explains; activations are not rounded).
// That order does not depend on the tile shape, the batch size or whether the
// weights were packed, so every path gives the same bits.
//
// Weights are read "by element": for each k, the 32 rows' values side by side
// (64 bytes of F16 or 32 of FP8 = two vectors of 16 rows). A packed panel (MatmulKernels::pack,
// by_element) is exactly that for the whole row; rows in place are copied into
// that form one K chunk at a time. A register tile is 32 rows x up to 12
// columns (24 accumulators); per k it loads two weight vectors and broadcasts
// one activation per column, so 24 FMAs cost 2 widening loads and 12
// broadcasts:
//
//   for chunk of K (kChunk elements: 16 KiB of weights, stays in L1):
//     for column group of 12:         acc[2][12] <- parked (memory, L1)
//       for k in chunk:               w0, w1 = rows 0..15, 16..31 at k
//         for c in group:             acc[h][c] += w_h * broadcast(x[c][k])
//                                     parked <- acc
//
// Parking accumulators between chunks changes no bit.
#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "kernels/x86/by_element_glue.h"
#include "kernels/x86/x86_impl.h"

namespace tern::kernels::x86 {
namespace {

// The element formats: the 32 rows' values at one k as two f32 vectors.
struct F16E {
  using T = uint16_t;
  static constexpr float kScale = 1.0f;
  static void load(const T* p, __m512& w0, __m512& w1) {
    w0 = _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(p)));
    w1 = _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(p + 16)));
  }
};
// E4M3 sign-extended and shifted: the half of value / 2^8 (kScale puts the 2^8 back on the sums).
struct F8E4M3E {
  using T = uint8_t;
  static constexpr float kScale = 256.0f;
  static void load(const T* p, __m512& w0, __m512& w1) {
    const __m512i b = _mm512_cvtepi8_epi16(_mm256_load_si256(reinterpret_cast<const __m256i*>(p)));
    const __m512i h = _mm512_and_si512(_mm512_slli_epi16(b, 7), _mm512_set1_epi16(static_cast<short>(0xbf80)));
    w0 = _mm512_cvtph_ps(_mm512_castsi512_si256(h));
    w1 = _mm512_cvtph_ps(_mm512_extracti64x4_epi64(h, 1));
  }
};
struct F8E5M2E {  // E5M2 is a half's high byte
  using T = uint8_t;
  static constexpr float kScale = 1.0f;
  static void load(const T* p, __m512& w0, __m512& w1) {
    const __m512i h = _mm512_slli_epi16(_mm512_cvtepu8_epi16(_mm256_load_si256(reinterpret_cast<const __m256i*>(p))), 8);
    w0 = _mm512_cvtph_ps(_mm512_castsi512_si256(h));
    w1 = _mm512_cvtph_ps(_mm512_extracti64x4_epi64(h, 1));
  }
};

constexpr int kRows = 32;       // panel rows: two vectors of 16
constexpr int kGroupCols = 12;  // columns of one register tile
constexpr int kMaxCols = 96;    // columns per call: 8 groups share each chunk of weights in L1
constexpr int kChunk = 256;     // elements of K per chunk: 16 KiB of weights
// Decode (1-2 columns) streams the weights at memory speed: each k also
// prefetches the line 4 KiB on (past a panel's end into the next panel, which
// follows it in memory). Measured on bench-1b F16 tg64: 25.2/26.9 -> 28.7/29.1
// tok/s (16 KiB ahead: 27.3/28.2).
constexpr int kPrefetchCols = 2;
constexpr int kAheadBytes = 4096;

// Accumulators of every column group, parked between chunks (12 KiB).
struct alignas(64) Parked {
  __m512 acc[kMaxCols][2];
};

// acc[h][c] over k = 0 .. len-1 of the chunk: w points at its first element
// (64 bytes per k), x at column 0's first element, xs floats between columns.
template <class E, int C>
inline void group_chunk(const typename E::T* w, int len, const float* x, size_t xs, __m512* park) {
  constexpr int kAhead = kAheadBytes / (kRows * static_cast<int>(sizeof(typename E::T)));
  __m512 acc[2][C];
  for (int c = 0; c < C; ++c) {
    acc[0][c] = park[2 * c];
    acc[1][c] = park[2 * c + 1];
  }
  for (int k = 0; k < len; ++k) {
    if constexpr (C <= kPrefetchCols) _mm_prefetch(reinterpret_cast<const char*>(w + kRows * (k + kAhead)), _MM_HINT_T0);
    __m512 w0, w1;
    E::load(w + kRows * k, w0, w1);
    for (int c = 0; c < C; ++c) {
      const __m512 xb = _mm512_set1_ps(x[c * xs + k]);
      acc[0][c] = _mm512_fmadd_ps(w0, xb, acc[0][c]);
      acc[1][c] = _mm512_fmadd_ps(w1, xb, acc[1][c]);
    }
  }
  for (int c = 0; c < C; ++c) {
    park[2 * c] = acc[0][c];
    park[2 * c + 1] = acc[1][c];
  }
}

// The last n_cols % kGroupCols columns (C counts down to the shape asked).
template <class E, int C>
inline void tail_chunk(int cols, const typename E::T* w, int len, const float* x, size_t xs, __m512* park) {
  if constexpr (C > 1) {
    if (cols < C) return tail_chunk<E, C - 1>(cols, w, len, x, xs, park);
  }
  group_chunk<E, C>(w, len, x, xs, park);
}

// Rows in place -> the by-element form of chunk [k0, k0 + len) (rows past
// n_rows are left as they are: their lanes are never stored).
template <class T>
inline void gather_chunk(const uint8_t* w, size_t w_stride, int n_rows, int64_t k0, int len, T* out) {
  for (int r = 0; r < n_rows; ++r) {
    const auto* row = reinterpret_cast<const T*>(w + r * w_stride) + k0;
    for (int k = 0; k < len; ++k) out[kRows * k + r] = row[k];
  }
}

// One panel: weights either packed (by element, whole row) or rows in place.
template <class E>
void by_element_panel(int64_t n, const uint8_t* packed, const uint8_t* w, size_t w_stride, int n_rows, const float* x,
                      size_t xs, int n_cols, float* y, size_t ldy) {
  using T = typename E::T;
  Parked p;
  for (int c = 0; c < n_cols; ++c) p.acc[c][0] = p.acc[c][1] = _mm512_setzero_ps();
  alignas(64) T staged[kChunk * kRows];  // rows in place only
  for (int64_t k0 = 0; k0 < n; k0 += kChunk) {
    const int len = static_cast<int>(n - k0 < kChunk ? n - k0 : kChunk);
    const T* wc;
    if (packed) {
      wc = reinterpret_cast<const T*>(packed) + kRows * k0;
    } else {
      gather_chunk(w, w_stride, n_rows, k0, len, staged);
      wc = staged;
    }
    int c0 = 0;
    for (; c0 + kGroupCols <= n_cols; c0 += kGroupCols)
      group_chunk<E, kGroupCols>(wc, len, x + c0 * xs + k0, xs, &p.acc[c0][0]);
    if (c0 < n_cols) tail_chunk<E, kGroupCols - 1>(n_cols - c0, wc, len, x + c0 * xs + k0, xs, &p.acc[c0][0]);
  }
  if constexpr (E::kScale != 1.0f)
    for (int c = 0; c < n_cols; ++c)
      for (__m512& a : p.acc[c]) a = _mm512_mul_ps(a, _mm512_set1_ps(E::kScale));
  const __mmask16 lo = n_rows >= 16 ? 0xffff : static_cast<__mmask16>((1u << n_rows) - 1);
  const __mmask16 hi = n_rows >= 32 ? 0xffff : n_rows <= 16 ? 0 : static_cast<__mmask16>((1u << (n_rows - 16)) - 1);
  for (int c = 0; c < n_cols; ++c) {
    _mm512_mask_storeu_ps(y + c * ldy, lo, p.acc[c][0]);
    _mm512_mask_storeu_ps(y + c * ldy + 16, hi, p.acc[c][1]);
  }
}


// A 512-token prompt is one pass over the weights up to rows of 8192 (16 MiB
// of f32 activations, read from L3 by broadcasts): +5-7% pp512 on a 1B model
// over the 512 KiB default, which streamed its 2 GB of weights 5 times.
const MatmulKernels kF16 = by_element_row<by_element_panel<F16E>>(kMaxCols, CpuLevel::Avx512, size_t{16} << 20);
const MatmulKernels kF8E4M3 = by_element_row<by_element_panel<F8E4M3E>>(kMaxCols, CpuLevel::Avx512, size_t{16} << 20);
const MatmulKernels kF8E5M2 = by_element_row<by_element_panel<F8E5M2E>>(kMaxCols, CpuLevel::Avx512, size_t{16} << 20);

}  // namespace

const MatmulKernels* avx512_f16_kernels() { return &kF16; }
const MatmulKernels* avx512_fp8_kernels(gguf::GgmlType t) {
  return t == gguf::GgmlType::F8_E4M3 ? &kF8E4M3 : t == gguf::GgmlType::F8_E5M2 ? &kF8E5M2 : nullptr;
}

}  // namespace tern::kernels::x86
