// AVX-512 loops of the q8_0 KV cache's roundings (kernels/kv_quant.cpp).
#include <immintrin.h>

#include <cstdint>

#include "kernels/x86/x86_impl.h"

namespace tern::kernels::x86 {

// max|x| and the codes of x * inv as core/kv_format.cpp computes them:
// max is exact (any order gives the same value, a NaN is never the max:
// vmaxps(a, m) keeps m when a is NaN), r clamped to [-127, 127] (a NaN to
// -127: vmaxps(r, -127) returns -127 for a NaN r), plus ±0.5 by r's sign
// (-0.0 gets -0.5 here, +0.5 there: both truncate to 0), truncated.
float avx512_abs_max(const float* x, int n) {
  __m512 m = _mm512_setzero_ps();
  int i = 0;
  for (; i + 16 <= n; i += 16) m = _mm512_max_ps(_mm512_abs_ps(_mm512_loadu_ps(x + i)), m);
  if (i < n) {
    const __mmask16 k = static_cast<__mmask16>((1u << (n - i)) - 1);
    m = _mm512_max_ps(_mm512_abs_ps(_mm512_maskz_loadu_ps(k, x + i)), m);
  }
  return _mm512_reduce_max_ps(m);
}

void avx512_round_codes(const float* x, int n, float inv, int8_t* q) {
  const __m512 vinv = _mm512_set1_ps(inv), lo = _mm512_set1_ps(-127.0f), hi = _mm512_set1_ps(127.0f);
  const __m512 half = _mm512_set1_ps(0.5f), sign = _mm512_set1_ps(-0.0f);
  for (int i = 0; i < n; i += 16) {
    const __mmask16 k = n - i >= 16 ? static_cast<__mmask16>(0xffff) : static_cast<__mmask16>((1u << (n - i)) - 1);
    __m512 r = _mm512_mul_ps(_mm512_maskz_loadu_ps(k, x + i), vinv);
    r = _mm512_min_ps(_mm512_max_ps(r, lo), hi);
    r = _mm512_add_ps(r, _mm512_or_ps(half, _mm512_and_ps(r, sign)));
    _mm_mask_storeu_epi8(q + i, k, _mm512_cvtepi32_epi8(_mm512_cvttps_epi32(r)));
  }
}

}  // namespace tern::kernels::x86
