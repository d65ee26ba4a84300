// kernels/x86/avx2_util.h — small AVX2 helpers shared by the avx2_*.cpp files (internal).
//
// Include only from files compiled with -mavx2 -mfma -mf16c. Everything is
// static (anonymous namespace): see the ODR rule in x86_impl.h.
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

inline float f16_to_f32(const uint8_t* p) { return _cvtsh_ss(load_u16(p)); }

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

inline __m256i bytes(int v) { return _mm256_set1_epi8(static_cast<char>(v)); }

inline float hsum(__m256 v) {
  __m128 b = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  b = _mm_add_ps(b, _mm_movehl_ps(b, b));
  return _mm_cvtss_f32(_mm_add_ss(b, _mm_movehdup_ps(b)));
}
inline float hmax(__m256 v) {
  __m128 b = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  b = _mm_max_ps(b, _mm_movehl_ps(b, b));
  return _mm_cvtss_f32(_mm_max_ss(b, _mm_movehdup_ps(b)));
}
inline int hsum_epi32(__m256i v) {
  __m128i b = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  b = _mm_add_epi32(b, _mm_unpackhi_epi64(b, b));
  return _mm_cvtsi128_si32(_mm_add_epi32(b, _mm_shuffle_epi32(b, 1)));
}

inline __m256 abs_ps(__m256 v) { return _mm256_andnot_ps(_mm256_set1_ps(-0.0f), v); }

// Four vectors of 8 int32 (element order a, b, c, d) -> 32 int8, saturated.
inline __m256i pack_32_epi8(__m256i a, __m256i b, __m256i c, __m256i d) {
  const __m256i ab = _mm256_packs_epi32(a, b), cd = _mm256_packs_epi32(c, d);  // lane-interleaved int16
  const __m256i abcd = _mm256_packs_epi16(ab, cd);                             // dwords a0 b0 c0 d0 a1 b1 c1 d1
  return _mm256_permutevar8x32_epi32(abcd, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

// u8 x s8 pairs -> int16 -> int32 sums of 4 (vpmaddubsw + vpmaddwd).
inline __m256i madd_u8s8_epi32(__m256i u, __m256i s) {
  return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1));
}

template <int R, int C>
inline void zero_tile(__m256 (&acc)[R][C]) {
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < C; ++c) acc[r][c] = _mm256_setzero_ps();
}

template <int R, int C>
inline void store_tile(const __m256 (&acc)[R][C], float* y, size_t ldy) {
  for (int c = 0; c < C; ++c)
    for (int r = 0; r < R; ++r) y[c * ldy + r] = hsum(acc[r][c]);
}

}  // namespace
}  // namespace tern::kernels::x86
