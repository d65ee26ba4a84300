// AVX2 kernel for W8A8 (kernels/w8a8.h), for CPUs without AVX-512 VNNI: codes
// widened to int16 and multiplied by vpmaddwd, whose pair sums are exact for
// every int8 (vpmaddubsw's would saturate: 255 * 127 * 2 > 32767), then the
// scalar reference's int32 sum and its single multiply by dx. Activations are
// quantized by the scalar reference itself (a small share of the time), so
// every level writes the same bytes.
#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "kernels/w8a8.h"
#include "kernels/x86/tile_dispatch.h"
#include "kernels/x86/x86_impl.h"

namespace tern::kernels::x86 {
namespace {

constexpr int kRows = 4, kCols = 2;  // 8 accumulators + 4 weight + 2 activation vectors of 16 ymm

inline __m256i widen16(const uint8_t* p) { return _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); }

inline int32_t hsum(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_unpackhi_epi64(s, s));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 1));
  return _mm_cvtsi128_si32(s);
}

struct W8 {
  template <int R, int C>
  static void tile(int64_t n, const uint8_t* w, size_t w_stride, const uint8_t* x, size_t x_stride, float* y, size_t ldy) {
    __m256i acc[R][C];
    for (int r = 0; r < R; ++r)
      for (int c = 0; c < C; ++c) acc[r][c] = _mm256_setzero_si256();
    const __m128i flip = _mm_set1_epi8(static_cast<char>(0x80));
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
      __m256i xv[C];
      for (int c = 0; c < C; ++c)  // q = stored byte - 128, i.e. the byte with its top bit flipped, as int8
        xv[c] = _mm256_cvtepi8_epi16(_mm_xor_si128(
            _mm_loadu_si128(reinterpret_cast<const __m128i*>(x + c * x_stride + kW8ActHeader + i)), flip));
      for (int r = 0; r < R; ++r) {
        const __m256i wv = widen16(w + r * w_stride + i);
        for (int c = 0; c < C; ++c) acc[r][c] = _mm256_add_epi32(acc[r][c], _mm256_madd_epi16(wv, xv[c]));
      }
    }
    if (i < n) {  // the last n - i < 16 weights through a zero-padded copy (activations are padded)
      __m256i xv[C];
      for (int c = 0; c < C; ++c)
        xv[c] = _mm256_cvtepi8_epi16(_mm_xor_si128(
            _mm_loadu_si128(reinterpret_cast<const __m128i*>(x + c * x_stride + kW8ActHeader + i)), flip));
      for (int r = 0; r < R; ++r) {
        alignas(16) uint8_t buf[16] = {};
        std::memcpy(buf, w + r * w_stride + i, static_cast<size_t>(n - i));
        const __m256i wv = widen16(buf);
        for (int c = 0; c < C; ++c) acc[r][c] = _mm256_add_epi32(acc[r][c], _mm256_madd_epi16(wv, xv[c]));
      }
    }
    for (int c = 0; c < C; ++c) {
      float dx;
      std::memcpy(&dx, x + c * x_stride, sizeof dx);
      for (int r = 0; r < R; ++r) y[c * ldy + r] = static_cast<float>(hsum(acc[r][c])) * dx;
    }
  }
};

constexpr MatmulKernels kW8a8{gguf::GgmlType::I8, quantize_act_i8, dispatch_tile<W8, kRows, kCols>, kRows, kCols,
                              CpuLevel::Avx2};

}  // namespace

const MatmulKernels* avx2_w8a8_kernels(gguf::GgmlType weight_type) {
  return weight_type == gguf::GgmlType::I8 ? &kW8a8 : nullptr;
}

}  // namespace tern::kernels::x86
