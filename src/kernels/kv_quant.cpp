#include "kernels/kv_quant.h"

#include <immintrin.h>

#include <cstring>

#include "core/fp16.h"
#include "kernels/cpu_features.h"

namespace tern::kernels {
namespace {

// max|x| and the codes of x * inv as core/kv_format.cpp computes them:
// max is exact (any order gives the same value, a NaN is never the max:
// vmaxps(a, m) keeps m when a is NaN), r clamped to [-127, 127] (a NaN to
// -127: vmaxps(r, -127) returns -127 for a NaN r), plus ±0.5 by r's sign
// (-0.0 gets -0.5 here, +0.5 there: both truncate to 0), truncated.
__attribute__((target("avx512f,avx512bw,avx512vl,avx512dq"))) float abs_max_avx512(const float* x, int n) {
  __m512 m = _mm512_setzero_ps();
  int i = 0;
  for (; i + 16 <= n; i += 16) m = _mm512_max_ps(_mm512_abs_ps(_mm512_loadu_ps(x + i)), m);
  if (i < n) {
    const __mmask16 k = static_cast<__mmask16>((1u << (n - i)) - 1);
    m = _mm512_max_ps(_mm512_abs_ps(_mm512_maskz_loadu_ps(k, x + i)), m);
  }
  return _mm512_reduce_max_ps(m);
}

__attribute__((target("avx512f,avx512bw,avx512vl,avx512dq"))) void round_codes_avx512(const float* x, int n, float inv, int8_t* q) {
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

bool wide() {
  static const bool w = cpu_supports(CpuLevel::Avx512);
  return w;
}

}  // namespace

void quantize_query(const float* q, int head_dim, int8_t* codes, float* scales) {
  if (!wide()) return kv_quantize_query(q, head_dim, codes, scales);
  const int g = kv_group_elems(KvType::Q8_0, head_dim);
  for (int k = 0; k < head_dim / g; ++k) {
    const float d = abs_max_avx512(q + k * g, g) / 127.0f;
    scales[k] = d;
    round_codes_avx512(q + k * g, g, d > 0.0f ? 1.0f / d : 0.0f, codes + k * g);
  }
}

void encode_kv_row(KvType t, const float* x, int n_kv_head, int head_dim, void* dst) {
  if (t != KvType::Q8_0 || !wide()) return kv_encode_row(t, x, n_kv_head, head_dim, dst);
  const int g = kv_group_elems(t, head_dim), n_groups = head_dim / g;
  auto* out = static_cast<uint8_t*>(dst);
  for (int h = 0; h < n_kv_head; ++h, x += head_dim) {
    uint8_t* scales = out + kv_head_bytes(t, head_dim) * static_cast<size_t>(h);
    auto* codes = reinterpret_cast<int8_t*>(scales + 2 * n_groups);
    for (int k = 0; k < n_groups; ++k) {
      const uint16_t dh = float_to_fp16(abs_max_avx512(x + k * g, g) / 127.0f);
      const float d = fp16_to_float(dh);
      std::memcpy(scales + 2 * k, &dh, 2);
      round_codes_avx512(x + k * g, g, d > 0.0f ? 1.0f / d : 0.0f, codes + k * g);
    }
  }
}

}  // namespace tern::kernels
