// kernels/x86/avx512_util.h — small AVX-512 helpers shared by the avx512_*.cpp files (internal).
//
// Include only from files compiled with the AVX-512 flags. Everything is
// static (anonymous namespace): no symbol compiled for AVX-512 may be shared
// with baseline code (see x86_impl.h).
//
// "x4 lanes" layout used by the 32-element block kernels: a zmm holds four
// 128-bit lanes, lane k belonging to block k of a group of four consecutive
// blocks; a float vector of per-block values repeats block k's value in the
// four f32 lanes 4k..4k+3.
#pragma once

#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace tern::kernels::x86 {
namespace {

inline uint16_t load_u16(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}

inline uint32_t load_u32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

inline __m128i load_128(const uint8_t* p) { return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p)); }
inline __m256i load_256(const uint8_t* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }
inline __m512i load_512(const uint8_t* p) { return _mm512_loadu_si512(p); }

// NB (1..4) 16-byte loads at p + k * stride into 128-bit lane k; lanes >= NB are zero.
template <int NB>
inline __m512i load_128x4(const uint8_t* p, size_t stride) {
  __m512i v = _mm512_zextsi128_si512(load_128(p));
  if constexpr (NB > 1) v = _mm512_inserti32x4(v, load_128(p + stride), 1);
  if constexpr (NB > 2) v = _mm512_inserti32x4(v, load_128(p + 2 * stride), 2);
  if constexpr (NB > 3) v = _mm512_inserti32x4(v, load_128(p + 3 * stride), 3);
  return v;
}

// NB (1..4) fp16 values at p + k * stride as f32 [v0 v1 v2 v3] (zero beyond NB).
template <int NB>
inline __m128 load_f16x4(const uint8_t* p, size_t stride) {
  uint64_t bits = load_u16(p);
  if constexpr (NB > 1) bits |= static_cast<uint64_t>(load_u16(p + stride)) << 16;
  if constexpr (NB > 2) bits |= static_cast<uint64_t>(load_u16(p + 2 * stride)) << 32;
  if constexpr (NB > 3) bits |= static_cast<uint64_t>(load_u16(p + 3 * stride)) << 48;
  return _mm_cvtph_ps(_mm_cvtsi64_si128(static_cast<long long>(bits)));
}

// [v0 v1 v2 v3] -> [v0 x4, v1 x4, v2 x4, v3 x4].
inline __m512 spread_x4(__m128 v) {
  const __m512i idx = _mm512_set_epi32(3, 3, 3, 3, 2, 2, 2, 2, 1, 1, 1, 1, 0, 0, 0, 0);
  return _mm512_permutexvar_ps(idx, _mm512_castps128_ps512(v));
}

// [v0 v1 v2 v3] -> [v0 0 0 0, v1 0 0 0, ...]: a per-block value counted once by a full lane sum.
inline __m512 spread_once_x4(__m128 v) {
  const __m512i idx = _mm512_set_epi32(3, 3, 3, 3, 2, 2, 2, 2, 1, 1, 1, 1, 0, 0, 0, 0);
  return _mm512_maskz_permutexvar_ps(0x1111, idx, _mm512_castps128_ps512(v));
}

// Horizontal reductions (GCC 12's _mm512_reduce_* trip -Wuninitialized in its own headers).
inline float hsum(__m512 v) {
  const __m256 a = _mm256_add_ps(_mm512_castps512_ps256(v), _mm512_extractf32x8_ps(v, 1));
  __m128 b = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
  b = _mm_add_ps(b, _mm_movehl_ps(b, b));
  return _mm_cvtss_f32(_mm_add_ss(b, _mm_movehdup_ps(b)));
}
inline float hmax(__m512 v) {
  const __m256 a = _mm256_max_ps(_mm512_castps512_ps256(v), _mm512_extractf32x8_ps(v, 1));
  __m128 b = _mm_max_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
  b = _mm_max_ps(b, _mm_movehl_ps(b, b));
  return _mm_cvtss_f32(_mm_max_ss(b, _mm_movehdup_ps(b)));
}
inline int hsum_epi32(__m512i v) {
  const __m256i a = _mm256_add_epi32(_mm512_castsi512_si256(v), _mm512_extracti32x8_epi32(v, 1));
  __m128i b = _mm_add_epi32(_mm256_castsi256_si128(a), _mm256_extracti128_si256(a, 1));
  b = _mm_add_epi32(b, _mm_unpackhi_epi64(b, b));
  return _mm_cvtsi128_si32(_mm_add_epi32(b, _mm_shuffle_epi32(b, 1)));
}

// Bytes ahead of the current row at which a GEMV tile prefetches weights: the
// rows the driver's next tiles will read, at least 16 KiB ahead (about a
// microsecond of streaming, several DRAM latencies) and at least the tile.
inline size_t prefetch_ahead(int rows_in_tile, size_t w_stride) {
  size_t rows = (16384 + w_stride - 1) / w_stride;
  if (rows < static_cast<size_t>(rows_in_tile)) rows = static_cast<size_t>(rows_in_tile);
  if (rows > 64) rows = 64;
  return rows * w_stride;
}

// Prefetch kBytes starting at p into L1, one request per cache line.
template <size_t kBytes>
inline void prefetch_span(const uint8_t* p) {
  for (size_t k = 0; k < kBytes; k += 64) _mm_prefetch(reinterpret_cast<const char*>(p + k), _MM_HINT_T0);
}

inline __m512i bytes(int v) { return _mm512_set1_epi8(static_cast<char>(v)); }

// Zero the accumulators of an R x C tile.
template <int R, int C>
inline void zero_tile(__m512 (&acc)[R][C]) {
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < C; ++c) acc[r][c] = _mm512_setzero_ps();
}

// y[c * ldy + r] = sum of the lanes of acc[r][c].
template <int R, int C>
inline void store_tile(const __m512 (&acc)[R][C], float* y, size_t ldy) {
  for (int c = 0; c < C; ++c)
    for (int r = 0; r < R; ++r) y[c * ldy + r] = hsum(acc[r][c]);
}

}  // namespace
}  // namespace tern::kernels::x86
