// kernels/x86/avx2_panel_util.h — helpers shared by the AVX2 row-per-lane panel
// kernels (avx2_panel_legacy.cpp, avx2_panel_kquants.cpp; internal).
//
// Include only from files compiled with -mavx2 -mfma -mf16c, after
// avx2_util.h. Everything is static (anonymous namespace): see the ODR rule in
// x86_impl.h.
#pragma once

#include <immintrin.h>

#include <cstddef>
#include <cstdint>

#include "kernels/x86/avx2_util.h"

namespace tern::kernels::x86 {
namespace {

inline __m256i bcast_dword(const uint8_t* p) { return _mm256_set1_epi32(static_cast<int>(load_u32(p))); }

// Dwords 0..3 of the 16 bytes at rows[r] + off (r < 8) -> out[j] lane r = row r's dword j.
inline void transpose_8x4(const uint8_t* const* rows, size_t off, __m256i out[4]) {
  __m256i a[4];  // a[q]: 128-bit lane 0 = row q, lane 1 = row 4 + q
  for (int q = 0; q < 4; ++q)
    a[q] = _mm256_inserti128_si256(_mm256_castsi128_si256(load_128(rows[q] + off)), load_128(rows[4 + q] + off), 1);
  const __m256i t0 = _mm256_unpacklo_epi32(a[0], a[1]), t1 = _mm256_unpackhi_epi32(a[0], a[1]);
  const __m256i t2 = _mm256_unpacklo_epi32(a[2], a[3]), t3 = _mm256_unpackhi_epi32(a[2], a[3]);
  out[0] = _mm256_unpacklo_epi64(t0, t2);
  out[1] = _mm256_unpackhi_epi64(t0, t2);
  out[2] = _mm256_unpacklo_epi64(t1, t3);
  out[3] = _mm256_unpackhi_epi64(t1, t3);
}

// The 32 rows of a panel in place; rows at or past n_rows repeat the last
// real row (their lanes are computed, never stored), so loads stay in bounds.
struct PanelRows {
  const uint8_t* p[32];
  int n_rows;
  PanelRows(const uint8_t* w, size_t w_stride, int n) : n_rows(n) {
    for (int r = 0; r < 32; ++r) p[r] = w + static_cast<size_t>(r < n ? r : n - 1) * w_stride;
  }
};

// Stores the first n_valid (may be <= 0 or >= 8) lanes of v at y.
inline void store_rows(float* y, __m256 v, int n_valid) {
  if (n_valid >= 8) return _mm256_storeu_ps(y, v);
  if (n_valid <= 0) return;
  const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  _mm256_maskstore_ps(y, _mm256_cmpgt_epi32(_mm256_set1_epi32(n_valid), lane), v);
}

// GEMV on rows in place: prefetch the next panel (the 32 rows after these,
// one contiguous region) as a sweep spread over this panel's n_blocks blocks.
inline void prefetch_next_panel(const uint8_t* w, size_t w_stride, int64_t ib, int64_t n_blocks) {
  const size_t total = 32 * w_stride, chunk = (total + n_blocks - 1) / n_blocks;
  const uint8_t* begin = w + total + static_cast<size_t>(ib) * chunk;
  for (size_t k = 0; k < chunk; k += 64) _mm_prefetch(reinterpret_cast<const char*>(begin + k), _MM_HINT_T0);
}

}  // namespace
}  // namespace tern::kernels::x86
