// AVX-512 VNNI kernels for W8A8 (kernels/w8a8.h): per-token int8 activations
// against per-row int8 weights. vpdpbusd multiplies the activations' unsigned
// bytes (q + 128) by the weights' signed ones; the offset comes out as
// 128 * sum(w), exact in int32, so every level and both forms (rows in
// place, packed panels) produce the scalar reference's int32 sum and then the
// same single multiply by dx.
#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "kernels/w8a8.h"
#include "kernels/x86/avx512_util.h"
#include "kernels/x86/x86_impl.h"

namespace tern::kernels::x86 {
namespace {

constexpr int kMaxCols = 8;  // 2 x 8 accumulators, 2 weight vectors, 8 column pointers

float act_scale(const uint8_t* xr) {
  float d;
  std::memcpy(&d, xr, sizeof d);
  return d;
}

void quantize_act(const float* x, void* xq, int64_t n) {
  auto* out = static_cast<uint8_t*>(xq);
  const __m512 sign = _mm512_castsi512_ps(_mm512_set1_epi32(0x7fffffff));
  __m512 vmax = _mm512_setzero_ps();
  int64_t i = 0;
  // |x| first: vmaxps returns its second operand when either is NaN, so a
  // NaN is skipped as the reference's fmax skips it.
  for (; i + 16 <= n; i += 16) vmax = _mm512_max_ps(_mm512_and_ps(_mm512_loadu_ps(x + i), sign), vmax);
  float amax = _mm512_reduce_max_ps(vmax);
  for (; i < n; ++i) {
    const float v = x[i] < 0 ? -x[i] : x[i];
    if (v > amax) amax = v;
  }
  const float d = amax / 127.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  std::memset(out, 0, kW8ActHeader);
  std::memcpy(out, &d, sizeof d);
  uint8_t* q = out + kW8ActHeader;
  const __m512 vid = _mm512_set1_ps(id), lo = _mm512_set1_ps(-127.0f), hi = _mm512_set1_ps(127.0f);
  const __m512i bias = _mm512_set1_epi32(128);
  for (i = 0; i < n; i += 16) {
    const int k = n - i < 16 ? static_cast<int>(n - i) : 16;
    const __mmask16 m = static_cast<__mmask16>((1u << k) - 1);
    __m512 v = _mm512_mul_ps(_mm512_maskz_loadu_ps(m, x + i), vid);
    v = _mm512_min_ps(_mm512_max_ps(v, lo), hi);
    const __m512i qi = _mm512_add_epi32(_mm512_cvtps_epi32(v), bias);
    _mm_mask_storeu_epi8(q + i, m, _mm512_cvtepi32_epi8(qi));
  }
  std::memset(q + n, 128, static_cast<size_t>(w8_padded(n) - n));
}

inline __mmask64 tail_mask(int64_t left) { return left >= 64 ? ~__mmask64{0} : (__mmask64{1} << left) - 1; }

// Rows in place: four rows at a time share each activation load.
void tile(int64_t n, const void* w, size_t w_stride, int n_rows, const void* xq, size_t x_stride, int n_cols, float* y,
          size_t ldy) {
  const auto* wb = static_cast<const uint8_t*>(w);
  const __m512i ones = _mm512_set1_epi8(1);
  for (int r0 = 0; r0 < n_rows; r0 += 4) {
    const int nr = n_rows - r0 < 4 ? n_rows - r0 : 4;
    int32_t sum_w[4] = {0, 0, 0, 0};
    for (int r = 0; r < nr; ++r) {
      __m512i s = _mm512_setzero_si512();
      for (int64_t i = 0; i < n; i += 64)
        s = _mm512_dpbusd_epi32(s, ones, _mm512_maskz_loadu_epi8(tail_mask(n - i), wb + (r0 + r) * w_stride + i));
      sum_w[r] = _mm512_reduce_add_epi32(s);
    }
    for (int c = 0; c < n_cols; ++c) {
      const uint8_t* xr = static_cast<const uint8_t*>(xq) + c * x_stride;
      const uint8_t* q = xr + kW8ActHeader;
      __m512i acc[4] = {_mm512_setzero_si512(), _mm512_setzero_si512(), _mm512_setzero_si512(), _mm512_setzero_si512()};
      for (int64_t i = 0; i < n; i += 64) {
        const __m512i a = load_512(q + i);  // act rows are padded to 64 with q = 0
        const __mmask64 m = tail_mask(n - i);
        for (int r = 0; r < nr; ++r)
          acc[r] = _mm512_dpbusd_epi32(acc[r], a, _mm512_maskz_loadu_epi8(m, wb + (r0 + r) * w_stride + i));
      }
      const float dx = act_scale(xr);
      for (int r = 0; r < nr; ++r)
        y[c * ldy + r0 + r] = static_cast<float>(_mm512_reduce_add_epi32(acc[r]) - 128 * sum_w[r]) * dx;
    }
  }
}

inline __mmask16 row_mask(int n_rows, int h) {
  const int k = n_rows - 16 * h;
  return k >= 16 ? static_cast<__mmask16>(0xffff) : k <= 0 ? static_cast<__mmask16>(0) : static_cast<__mmask16>((1u << k) - 1);
}

// One packed panel against NC columns. Two plain accumulator arrays (not one
// [2][NC]) and NC <= 8 column pointers: with 12, GCC kept the accumulators
// in memory and re-loaded the pointers every step (pp512 ~20% slower).
template <int NC>
void panel_cols(int64_t n, const uint8_t* panel, int n_rows, const uint8_t* xq, size_t x_stride, float* y, size_t ldy) {
  __m512i acc0[NC], acc1[NC];
  const uint8_t* xc[NC];
#pragma GCC unroll 8
  for (int c = 0; c < NC; ++c) {
    acc0[c] = acc1[c] = _mm512_setzero_si512();
    xc[c] = xq + c * x_stride + kW8ActHeader;
  }
  const uint8_t* wg = panel + 192;
  const int64_t n_groups = w8_padded(n) / 64;
  for (int64_t g = 0; g < n_groups; ++g, wg += 2048) {
    _mm_prefetch(reinterpret_cast<const char*>(wg + 4096), _MM_HINT_T0);
    _mm_prefetch(reinterpret_cast<const char*>(wg + 4096 + 1024), _MM_HINT_T0);
    const int64_t xo = g * 64;
    // A group's chains start from zero and are added in once: carried
    // through the loop directly, GCC 12 copied every accumulator each step.
    __m512i t0[NC], t1[NC];
#pragma GCC unroll 8
    for (int c = 0; c < NC; ++c) t0[c] = t1[c] = _mm512_setzero_si512();
#pragma GCC unroll 16
    for (int j = 0; j < 16; ++j) {
      const __m512i w0 = load_512(wg + j * 128), w1 = load_512(wg + j * 128 + 64);
#pragma GCC unroll 8
      for (int c = 0; c < NC; ++c) {
        const __m512i a = _mm512_set1_epi32(static_cast<int>(load_u32(xc[c] + xo + 4 * j)));
        t0[c] = _mm512_dpbusd_epi32(t0[c], a, w0);
        t1[c] = _mm512_dpbusd_epi32(t1[c], a, w1);
      }
    }
#pragma GCC unroll 8
    for (int c = 0; c < NC; ++c) {
      acc0[c] = _mm512_add_epi32(acc0[c], t0[c]);
      acc1[c] = _mm512_add_epi32(acc1[c], t1[c]);
    }
  }
  const __m512i off0 = _mm512_slli_epi32(load_512(panel), 7);  // 128 * sum(w) per row
  const __m512i off1 = _mm512_slli_epi32(load_512(panel + 64), 7);
  const __mmask16 m0 = row_mask(n_rows, 0), m1 = row_mask(n_rows, 1);
#pragma GCC unroll 8
  for (int c = 0; c < NC; ++c) {
    const __m512 dx = _mm512_set1_ps(act_scale(xq + c * x_stride));
    _mm512_mask_storeu_ps(y + c * ldy, m0, _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(acc0[c], off0)), dx));
    _mm512_mask_storeu_ps(y + c * ldy + 16, m1, _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(acc1[c], off1)), dx));
  }
}

void packed_tile(int64_t n, const void* panel, int n_rows, const void* xq, size_t x_stride, int n_cols, float* y,
                 size_t ldy) {
  const auto* p = static_cast<const uint8_t*>(panel);
  const auto* x = static_cast<const uint8_t*>(xq);
  for (int c = 0; c < n_cols;) {
    const int left = n_cols - c;
    const uint8_t* xc = x + c * x_stride;
    float* yc = y + c * ldy;
    switch (left >= kMaxCols ? kMaxCols : left) {
      case 8: panel_cols<8>(n, p, n_rows, xc, x_stride, yc, ldy); c += 8; break;
      case 7: panel_cols<7>(n, p, n_rows, xc, x_stride, yc, ldy); c += 7; break;
      case 6: panel_cols<6>(n, p, n_rows, xc, x_stride, yc, ldy); c += 6; break;
      case 5: panel_cols<5>(n, p, n_rows, xc, x_stride, yc, ldy); c += 5; break;
      case 4: panel_cols<4>(n, p, n_rows, xc, x_stride, yc, ldy); c += 4; break;
      case 3: panel_cols<3>(n, p, n_rows, xc, x_stride, yc, ldy); c += 3; break;
      case 2: panel_cols<2>(n, p, n_rows, xc, x_stride, yc, ldy); c += 2; break;
      default: panel_cols<1>(n, p, n_rows, xc, x_stride, yc, ldy); c += 1; break;
    }
  }
}

constexpr MatmulKernels kW8a8 = [] {
  MatmulKernels k{gguf::GgmlType::I8, quantize_act, tile, 32, kMaxCols, CpuLevel::Avx512};
  k.packed_tile = packed_tile;
  k.act_biased = true;
  return k;
}();

}  // namespace

const MatmulKernels* avx512_w8a8_kernels(gguf::GgmlType weight_type) {
  return weight_type == gguf::GgmlType::I8 ? &kW8a8 : nullptr;
}

}  // namespace tern::kernels::x86
