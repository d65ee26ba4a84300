// AVX-512 activation quantizers: f32 rows -> Q8_0, Q8_1, Q8_K blocks and BF16.
//
// Each is bit-exact with the scalar reference (quant::traits(T)->from_float,
// float_to_bf16): the same f32 operations in the same order, and the same
// rounding rule — Q8_0/Q8_1 round half away from zero (C's lround/round),
// Q8_K rounds half to even (the default MXCSR mode of vcvtps2dq). Block
// layouts: quant/blocks.h, quant/k_blocks.h.
#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "kernels/x86/avx512_util.h"
#include "kernels/x86/x86_impl.h"
#include "quant/blocks.h"
#include "quant/k_blocks.h"

namespace tern::kernels::x86 {
namespace {

using quant::BlockQ8_0;
using quant::BlockQ8_1;
using quant::BlockQ8_K;

inline uint16_t f32_to_f16(float v) { return _cvtss_sh(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }

// Round half away from zero, exactly: t = trunc(v); v - t is exact for |v| < 2^23.
inline __m512 round_half_away(__m512 v) {
  const __m512 t = _mm512_roundscale_ps(v, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
  const __m512 frac = _mm512_abs_ps(_mm512_sub_ps(v, t));
  const __mmask16 up = _mm512_cmp_ps_mask(frac, _mm512_set1_ps(0.5f), _CMP_GE_OQ);
  const __m512 one = _mm512_or_ps(_mm512_set1_ps(1.0f), _mm512_and_ps(v, _mm512_set1_ps(-0.0f)));
  return _mm512_mask_add_ps(t, up, t, one);
}

// 32 floats -> 32 int8 (half away from zero, saturated to -128..127); returns their sum.
inline int quantize_32(const float* x, float id, int8_t* q) {
  const __m512 vid = _mm512_set1_ps(id);
  const __m512i a = _mm512_cvtps_epi32(round_half_away(_mm512_mul_ps(_mm512_loadu_ps(x), vid)));
  const __m512i b = _mm512_cvtps_epi32(round_half_away(_mm512_mul_ps(_mm512_loadu_ps(x + 16), vid)));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(q), _mm512_cvtsepi32_epi8(a));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(q + 16), _mm512_cvtsepi32_epi8(b));
  return hsum_epi32(_mm512_add_epi32(a, b));
}

inline float absmax_32(const float* x) {
  return hmax(_mm512_max_ps(_mm512_abs_ps(_mm512_loadu_ps(x)), _mm512_abs_ps(_mm512_loadu_ps(x + 16))));
}

}  // namespace

// d = amax / 127 (stored as fp16), q = lround(x / d) with the f32 inverse 1 / d.
void avx512_quantize_q8_0(const float* x, void* xq, int64_t n) {
  auto* b = static_cast<BlockQ8_0*>(xq);
  for (int64_t i = 0; i < n / quant::kQK8_0; ++i, x += quant::kQK8_0) {
    const float d = absmax_32(x) / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    b[i].d = f32_to_f16(d);
    quantize_32(x, id, b[i].qs);
  }
}

// Q8_0 with every quant stored as q + 128 (unsigned): the activations of the
// VNNI panel kernels (avx512_panel_legacy.cpp, MatmulKernels::act_biased).
void avx512_quantize_q8_0_biased(const float* x, void* xq, int64_t n) {
  avx512_quantize_q8_0(x, xq, n);
  auto* b = static_cast<BlockQ8_0*>(xq);
  for (int64_t i = 0; i < n / quant::kQK8_0; ++i) {
    const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b[i].qs));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(b[i].qs), _mm256_xor_si256(q, _mm256_set1_epi8(static_cast<char>(0x80))));
  }
}

// As Q8_0 (q clamped to +-127, which the rounding never exceeds), plus s = fp16(sum(q) * d).
void avx512_quantize_q8_1(const float* x, void* xq, int64_t n) {
  auto* b = static_cast<BlockQ8_1*>(xq);
  for (int64_t i = 0; i < n / quant::kQK8_1; ++i, x += quant::kQK8_1) {
    const float d = absmax_32(x) / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    b[i].d = f32_to_f16(d);
    const int sum = quantize_32(x, id, b[i].qs);
    b[i].s = f32_to_f16(static_cast<float>(sum) * d);
  }
}

// The element of largest magnitude (the first on ties) maps to -127:
// iscale = -127 / max, q = round-half-even(iscale * x), d = 1 / iscale;
// bsums[s] = sum of q over elements 16s..16s+15 (one zmm each).
void avx512_quantize_q8_k(const float* x, void* xq, int64_t n) {
  auto* b = static_cast<BlockQ8_K*>(xq);
  constexpr int kChunks = quant::kQK_K / 16;
  for (int64_t i = 0; i < n / quant::kQK_K; ++i, x += quant::kQK_K) {
    __m512 vmax = _mm512_setzero_ps();
    for (int k = 0; k < kChunks; ++k) vmax = _mm512_max_ps(vmax, _mm512_abs_ps(_mm512_loadu_ps(x + 16 * k)));
    const float amax = hmax(vmax);
    if (amax == 0.0f) {
      std::memset(&b[i], 0, sizeof(BlockQ8_K));
      continue;
    }
    float max = 0.0f;
    for (int k = 0; k < kChunks; ++k) {
      const __mmask16 hit =
          _mm512_cmp_ps_mask(_mm512_abs_ps(_mm512_loadu_ps(x + 16 * k)), _mm512_set1_ps(amax), _CMP_EQ_OQ);
      if (hit) {
        max = x[16 * k + __builtin_ctz(hit)];
        break;
      }
    }
    const float iscale = -127.0f / max;
    const __m512 vs = _mm512_set1_ps(iscale);
    for (int k = 0; k < kChunks; ++k) {
      const __m512i q = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_loadu_ps(x + 16 * k), vs));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(b[i].qs + 16 * k), _mm512_cvtsepi32_epi8(q));
      b[i].bsums[k] = static_cast<int16_t>(hsum_epi32(q));
    }
    b[i].d = 1.0f / iscale;
  }
}

// Round to nearest even on the top 16 bits; NaN keeps its sign and payload top and is made quiet.
void avx512_convert_bf16(const float* x, void* xq, int64_t n) {
  auto* out = static_cast<uint16_t*>(xq);
  const __m512i round = _mm512_set1_epi32(0x7fff), one = _mm512_set1_epi32(1);
  const __m512i abs_mask = _mm512_set1_epi32(0x7fffffff), inf = _mm512_set1_epi32(0x7f800000);
  int64_t i = 0;
  auto convert16 = [&](__m512i u) {
    const __mmask16 nan = _mm512_cmpgt_epu32_mask(_mm512_and_si512(u, abs_mask), inf);
    __m512i r = _mm512_add_epi32(u, _mm512_add_epi32(round, _mm512_and_si512(_mm512_srli_epi32(u, 16), one)));
    r = _mm512_mask_or_epi32(r, nan, u, _mm512_set1_epi32(0x400000));
    return _mm512_cvtepi32_epi16(_mm512_srli_epi32(r, 16));
  };
  for (; i + 16 <= n; i += 16)
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i), convert16(_mm512_castps_si512(_mm512_loadu_ps(x + i))));
  if (i < n) {
    const __mmask16 m = static_cast<__mmask16>((1u << (n - i)) - 1);
    const __m256i r = convert16(_mm512_castps_si512(_mm512_maskz_loadu_ps(m, x + i)));
    _mm256_mask_storeu_epi16(out + i, m, r);
  }
}

}  // namespace tern::kernels::x86
