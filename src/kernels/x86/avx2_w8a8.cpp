// AVX2 kernel for W8A8 (kernels/w8a8.h), for CPUs without AVX-512 VNNI.
// vpmaddubsw multiplies unsigned by signed bytes and adds pairs into int16
// with saturation; it is exact here because the unsigned operand is |w|
// (0..128, -128 included) and the signed one x with w's sign (|x| <= 127, so
// the flip never overflows): a pair is at most 2 * 128 * 127 = 32512 < 32767.
// vpmaddwd by ones then widens to int32, the scalar reference's exact sum,
// then its single multiply by dx. Activations are quantized with the scalar
// reference's operations in the same order (max of |x|, one multiply by
// 1 / dx, clamp, round half to even), so every level writes the same bytes.
#include <immintrin.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "kernels/w8a8.h"
#include "kernels/x86/tile_dispatch.h"
#include "kernels/x86/x86_impl.h"

namespace tern::kernels::x86 {
namespace {

constexpr int kRows = 4, kCols = 2;  // 8 accumulators, 2 activation vectors, |w| and temporaries of 16 ymm

inline int32_t hsum(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_unpackhi_epi64(s, s));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 1));
  return _mm_cvtsi128_si32(s);
}

// kernels/w8a8.h's activation row; the reference's bytes (tested at every level).
void quantize_act(const float* x, void* xq, int64_t n) {
  auto* out = static_cast<uint8_t*>(xq);
  const __m256 sign = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  __m256 vmax = _mm256_setzero_ps();
  int64_t i = 0;
  // |x| first: vmaxps returns its second operand when either is NaN, so a
  // NaN is skipped as the reference's fmax skips it.
  for (; i + 8 <= n; i += 8) vmax = _mm256_max_ps(_mm256_and_ps(_mm256_loadu_ps(x + i), sign), vmax);
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, vmax);
  float amax = 0.0f;
  for (float v : lanes) amax = std::fmax(amax, v);
  for (; i < n; ++i) amax = std::fmax(amax, std::fabs(x[i]));
  const float d = amax / 127.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  std::memset(out, 0, kW8ActHeader);
  std::memcpy(out, &d, sizeof d);
  uint8_t* q = out + kW8ActHeader;
  const __m256 vid = _mm256_set1_ps(id), lo = _mm256_set1_ps(-127.0f), hi = _mm256_set1_ps(127.0f);
  const __m256i bias = _mm256_set1_epi32(128);
  for (i = 0; i + 8 <= n; i += 8) {
    // NaN * id is NaN; vmaxps then gives -127, as the reference's fmax does.
    const __m256 v = _mm256_min_ps(_mm256_max_ps(_mm256_mul_ps(_mm256_loadu_ps(x + i), vid), lo), hi);
    const __m256i qi = _mm256_add_epi32(_mm256_cvtps_epi32(v), bias);  // 1..255
    const __m128i w16 = _mm_packus_epi32(_mm256_castsi256_si128(qi), _mm256_extracti128_si256(qi, 1));
    _mm_storel_epi64(reinterpret_cast<__m128i*>(q + i), _mm_packus_epi16(w16, w16));
  }
  for (; i < n; ++i) q[i] = static_cast<uint8_t>(static_cast<int>(std::nearbyint(std::fmin(std::fmax(x[i] * id, -127.0f), 127.0f))) + 128);
  std::memset(q + n, 128, static_cast<size_t>(w8_padded(n) - n));
}

struct W8 {
  // acc[c] += sum of wv[k] * x[c][k] over 32 bytes, per dword: |w| times x with w's sign.
  template <int C>
  static inline void dot32(__m256i wv, const __m256i* xv, __m256i* acc) {
    const __m256i ones = _mm256_set1_epi16(1);
    const __m256i wabs = _mm256_abs_epi8(wv);
    for (int c = 0; c < C; ++c)
      acc[c] = _mm256_add_epi32(acc[c], _mm256_madd_epi16(_mm256_maddubs_epi16(wabs, _mm256_sign_epi8(xv[c], wv)), ones));
  }

  template <int R, int C>
  static void tile(int64_t n, const uint8_t* w, size_t w_stride, const uint8_t* x, size_t x_stride, float* y, size_t ldy) {
    __m256i acc[R][C];
    for (int r = 0; r < R; ++r)
      for (int c = 0; c < C; ++c) acc[r][c] = _mm256_setzero_si256();
    const __m256i flip = _mm256_set1_epi8(static_cast<char>(0x80));
    // Activations are padded to a multiple of 64 with q = 0, so they load whole.
    auto load_x = [&](__m256i* xv, int64_t i) {
      for (int c = 0; c < C; ++c)  // q = stored byte - 128, i.e. the byte with its top bit flipped, as int8
        xv[c] = _mm256_xor_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + c * x_stride + kW8ActHeader + i)), flip);
    };
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
      __m256i xv[C];
      load_x(xv, i);
      for (int r = 0; r < R; ++r)
        dot32<C>(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + r * w_stride + i)), xv, acc[r]);
    }
    if (i < n) {  // the last n - i < 32 weights through a zero-padded copy
      __m256i xv[C];
      load_x(xv, i);
      for (int r = 0; r < R; ++r) {
        alignas(32) uint8_t buf[32] = {};
        std::memcpy(buf, w + r * w_stride + i, static_cast<size_t>(n - i));
        dot32<C>(_mm256_load_si256(reinterpret_cast<const __m256i*>(buf)), xv, acc[r]);
      }
    }
    for (int c = 0; c < C; ++c) {
      float dx;
      std::memcpy(&dx, x + c * x_stride, sizeof dx);
      for (int r = 0; r < R; ++r) y[c * ldy + r] = static_cast<float>(hsum(acc[r][c])) * dx;
    }
  }
};

constexpr MatmulKernels kW8a8{gguf::GgmlType::I8, quantize_act, dispatch_tile<W8, kRows, kCols>, kRows, kCols,
                              CpuLevel::Avx2};

}  // namespace

const MatmulKernels* avx2_w8a8_kernels(gguf::GgmlType weight_type) {
  return weight_type == gguf::GgmlType::I8 ? &kW8a8 : nullptr;
}

}  // namespace tern::kernels::x86
