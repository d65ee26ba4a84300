// AVX2 activation quantizers: f32 rows -> Q8_0, Q8_1, Q8_K blocks and BF16.
//
// Bit-exact with the scalar reference, as act_quant_avx512.cpp: same f32
// operations, Q8_0/Q8_1 round half away from zero, Q8_K half to even.
#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "kernels/x86/avx2_util.h"
#include "kernels/x86/x86_impl.h"
#include "quant/blocks.h"
#include "quant/k_blocks.h"

namespace tern::kernels::x86 {
namespace {

using quant::BlockQ8_0;
using quant::BlockQ8_1;
using quant::BlockQ8_K;

inline uint16_t f32_to_f16(float v) { return _cvtss_sh(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }

// Round half away from zero, exactly (see act_quant_avx512.cpp), then to int32.
inline __m256i round_half_away(__m256 v) {
  const __m256 t = _mm256_round_ps(v, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
  const __m256 up = _mm256_cmp_ps(abs_ps(_mm256_sub_ps(v, t)), _mm256_set1_ps(0.5f), _CMP_GE_OQ);
  const __m256 one = _mm256_or_ps(_mm256_set1_ps(1.0f), _mm256_and_ps(v, _mm256_set1_ps(-0.0f)));
  return _mm256_cvtps_epi32(_mm256_add_ps(t, _mm256_and_ps(up, one)));
}

// 32 floats -> 32 int8 (half away from zero); returns their sum.
inline int quantize_32(const float* x, float id, int8_t* q) {
  const __m256 vid = _mm256_set1_ps(id);
  __m256i i[4];
  for (int k = 0; k < 4; ++k) i[k] = round_half_away(_mm256_mul_ps(_mm256_loadu_ps(x + 8 * k), vid));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(q), pack_32_epi8(i[0], i[1], i[2], i[3]));
  return hsum_epi32(_mm256_add_epi32(_mm256_add_epi32(i[0], i[1]), _mm256_add_epi32(i[2], i[3])));
}

inline float absmax_32(const float* x) {
  __m256 m = abs_ps(_mm256_loadu_ps(x));
  for (int k = 1; k < 4; ++k) m = _mm256_max_ps(m, abs_ps(_mm256_loadu_ps(x + 8 * k)));
  return hmax(m);
}

}  // namespace

void avx2_quantize_q8_0(const float* x, void* xq, int64_t n) {
  auto* b = static_cast<BlockQ8_0*>(xq);
  for (int64_t i = 0; i < n / quant::kQK8_0; ++i, x += quant::kQK8_0) {
    const float d = absmax_32(x) / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    b[i].d = f32_to_f16(d);
    quantize_32(x, id, b[i].qs);
  }
}

void avx2_quantize_q8_1(const float* x, void* xq, int64_t n) {
  auto* b = static_cast<BlockQ8_1*>(xq);
  for (int64_t i = 0; i < n / quant::kQK8_1; ++i, x += quant::kQK8_1) {
    const float d = absmax_32(x) / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    b[i].d = f32_to_f16(d);
    const int sum = quantize_32(x, id, b[i].qs);
    b[i].s = f32_to_f16(static_cast<float>(sum) * d);
  }
}

void avx2_quantize_q8_k(const float* x, void* xq, int64_t n) {
  auto* b = static_cast<BlockQ8_K*>(xq);
  for (int64_t i = 0; i < n / quant::kQK_K; ++i, x += quant::kQK_K) {
    __m256 vmax = _mm256_setzero_ps();
    for (int k = 0; k < quant::kQK_K / 8; ++k) vmax = _mm256_max_ps(vmax, abs_ps(_mm256_loadu_ps(x + 8 * k)));
    const float amax = hmax(vmax);
    if (amax == 0.0f) {
      std::memset(&b[i], 0, sizeof(BlockQ8_K));
      continue;
    }
    float max = 0.0f;
    for (int k = 0; k < quant::kQK_K / 8; ++k) {
      const int hit = _mm256_movemask_ps(_mm256_cmp_ps(abs_ps(_mm256_loadu_ps(x + 8 * k)), _mm256_set1_ps(amax), _CMP_EQ_OQ));
      if (hit) {
        max = x[8 * k + __builtin_ctz(static_cast<unsigned>(hit))];
        break;
      }
    }
    const float iscale = -127.0f / max;
    const __m256 vs = _mm256_set1_ps(iscale);
    for (int k = 0; k < quant::kQK_K / 32; ++k) {
      __m256i q[4];
      for (int j = 0; j < 4; ++j) q[j] = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + 32 * k + 8 * j), vs));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(b[i].qs + 32 * k), pack_32_epi8(q[0], q[1], q[2], q[3]));
      b[i].bsums[2 * k] = static_cast<int16_t>(hsum_epi32(_mm256_add_epi32(q[0], q[1])));
      b[i].bsums[2 * k + 1] = static_cast<int16_t>(hsum_epi32(_mm256_add_epi32(q[2], q[3])));
    }
    b[i].d = 1.0f / iscale;
  }
}

void avx2_convert_bf16(const float* x, void* xq, int64_t n) {
  auto* out = static_cast<uint16_t*>(xq);
  const __m256i round = _mm256_set1_epi32(0x7fff), one = _mm256_set1_epi32(1);
  const __m256i abs_mask = _mm256_set1_epi32(0x7fffffff), inf = _mm256_set1_epi32(0x7f800000);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256i u = _mm256_castps_si256(_mm256_loadu_ps(x + i));
    const __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(u, abs_mask), inf);
    const __m256i r = _mm256_add_epi32(u, _mm256_add_epi32(round, _mm256_and_si256(_mm256_srli_epi32(u, 16), one)));
    const __m256i v = _mm256_blendv_epi8(r, _mm256_or_si256(u, _mm256_set1_epi32(0x400000)), nan);
    const __m256i h = _mm256_srli_epi32(v, 16);
    const __m128i packed = _mm_packus_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i), packed);
  }
  for (; i < n; ++i) {  // tail: the same rule in scalar code
    uint32_t u;
    std::memcpy(&u, x + i, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) {
      out[i] = static_cast<uint16_t>((u >> 16) | 0x40u);
    } else {
      out[i] = static_cast<uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
    }
  }
}

}  // namespace tern::kernels::x86
