// AVX2 tiles for float weights: F32 and FP8 (through half, as avx512_float.cpp
// explains; F16 and BF16 run avx2_f16.cpp's by-element panels), all
// against f32 activations (act F32): widening is exact, so the only error is
// the f32 summation order. Row tails shorter than 8 go through a zero-padded
// copy.
#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "kernels/x86/avx2_util.h"
#include "kernels/x86/tile_dispatch.h"
#include "kernels/x86/x86_impl.h"

namespace tern::kernels::x86 {
namespace {

using gguf::GgmlType;

void copy_f32(const float* x, void* xq, int64_t n) { std::memcpy(xq, x, static_cast<size_t>(n) * sizeof(float)); }

struct F32W {
  static constexpr size_t kElemBytes = 4;
  static __m256 load(const uint8_t* p) { return _mm256_loadu_ps(reinterpret_cast<const float*>(p)); }
};

struct F8E4M3W {
  static constexpr size_t kElemBytes = 1;
  static __m256 load(const uint8_t* p) {
    const __m128i b = _mm_cvtepu8_epi16(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
    const __m128i h = _mm_or_si128(_mm_slli_epi16(_mm_and_si128(b, _mm_set1_epi16(0x7f)), 7),
                                   _mm_slli_epi16(_mm_and_si128(b, _mm_set1_epi16(0x80)), 8));
    return _mm256_mul_ps(_mm256_cvtph_ps(h), _mm256_set1_ps(256.0f));
  }
};
struct F8E5M2W {
  static constexpr size_t kElemBytes = 1;
  static __m256 load(const uint8_t* p) {
    return _mm256_cvtph_ps(_mm_slli_epi16(_mm_cvtepu8_epi16(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))), 8));
  }
};

template <class WT>
struct FmaTile {
  template <int R, int C, bool kPrefetch = true>
  static inline void step(const uint8_t* w, size_t w_stride, const uint8_t* x, size_t x_stride, __m256 (&acc)[R][C]) {
    __m256 xv[C];
    for (int c = 0; c < C; ++c) xv[c] = _mm256_loadu_ps(reinterpret_cast<const float*>(x + c * x_stride));
    for (int r = 0; r < R; ++r) {
      if constexpr (kPrefetch) prefetch_span<8 * WT::kElemBytes>(w + (r + R) * w_stride);  // next row tile (GEMV)
      const __m256 wv = WT::load(w + r * w_stride);
      for (int c = 0; c < C; ++c) acc[r][c] = _mm256_fmadd_ps(wv, xv[c], acc[r][c]);
    }
  }

  template <int R, int C>
  static void tile(int64_t n, const uint8_t* w, size_t w_stride, const uint8_t* x, size_t x_stride, float* y,
                   size_t ldy) {
    __m256 acc[R][C];
    zero_tile(acc);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) step<R, C>(w + i * WT::kElemBytes, w_stride, x + i * 4, x_stride, acc);
    if (i < n) {
      // The last n - i elements of every row and column, zero-padded to 8.
      const size_t tail = static_cast<size_t>(n - i);
      uint8_t wt[R][8 * WT::kElemBytes] = {};
      uint8_t xt[C][8 * 4] = {};
      for (int r = 0; r < R; ++r) std::memcpy(wt[r], w + r * w_stride + i * WT::kElemBytes, tail * WT::kElemBytes);
      for (int c = 0; c < C; ++c) std::memcpy(xt[c], x + c * x_stride + i * 4, tail * 4);
      step<R, C, false>(wt[0], sizeof(wt[0]), xt[0], sizeof(xt[0]), acc);
    }
    store_tile(acc, y, ldy);
  }
};

constexpr MatmulKernels kF32 = {GgmlType::F32, copy_f32, dispatch_tile<FmaTile<F32W>, 3, 4>, 3, 4, CpuLevel::Avx2};
constexpr MatmulKernels kF8E4M3 = {GgmlType::F32, copy_f32, dispatch_tile<FmaTile<F8E4M3W>, 3, 4>, 3, 4, CpuLevel::Avx2};
constexpr MatmulKernels kF8E5M2 = {GgmlType::F32, copy_f32, dispatch_tile<FmaTile<F8E5M2W>, 3, 4>, 3, 4, CpuLevel::Avx2};

}  // namespace

const MatmulKernels* avx2_float_kernels(GgmlType t) {
  switch (t) {
    case GgmlType::F32: return &kF32;
    case GgmlType::F8_E4M3: return &kF8E4M3;
    case GgmlType::F8_E5M2: return &kF8E5M2;
    default: return nullptr;
  }
}

}  // namespace tern::kernels::x86
