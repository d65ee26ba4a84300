// AVX-512 tiles for float weights: F32, F16 (f32 activations) and BF16.
//
//   F32   w f32 x f32 (act F32): one FMA per 16 weights per column
//   F16   w widened with vcvtph2ps (exact), x f32 (act F32): no activation rounding at all
//   BF16  with AVX512-BF16: x rounded to bf16 (act BF16) and vdpbf16ps, 32 products per
//         instruction (exact products, f32 sums) — as ggml does for BF16 weights;
//         without it: w widened by a 16-bit shift (exact), x f32 (act F32)
// Row tails shorter than a vector use masked loads (lanes beyond n read as 0).
#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "kernels/cpu_features.h"
#include "kernels/x86/avx512_util.h"
#include "kernels/x86/tile_dispatch.h"
#include "kernels/x86/x86_impl.h"

namespace tern::kernels::x86 {
namespace {

using gguf::GgmlType;

void copy_f32(const float* x, void* xq, int64_t n) { std::memcpy(xq, x, static_cast<size_t>(n) * sizeof(float)); }

// Weights as 16 f32 lanes from element i (mask selects the valid lanes).
struct F32W {
  static constexpr size_t kElemBytes = 4;
  static __m512 load(const uint8_t* p, __mmask16 m) { return _mm512_maskz_loadu_ps(m, p); }
};
struct F16W {
  static constexpr size_t kElemBytes = 2;
  static __m512 load(const uint8_t* p, __mmask16 m) { return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, p)); }
};
struct Bf16W {
  static constexpr size_t kElemBytes = 2;
  static __m512 load(const uint8_t* p, __mmask16 m) {
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, p)), 16));
  }
};

// Weights of type WT times f32 activations.
template <class WT>
struct FmaTile {
  template <int R, int C>
  static inline void step(const uint8_t* w, size_t w_stride, const uint8_t* x, size_t x_stride, int64_t i, __mmask16 m,
                          __m512 (&acc)[R][C]) {
    __m512 xv[C];
    for (int c = 0; c < C; ++c) xv[c] = _mm512_maskz_loadu_ps(m, x + c * x_stride + i * 4);
    for (int r = 0; r < R; ++r) {
      prefetch_span<16 * WT::kElemBytes>(w + (r + R) * w_stride + i * WT::kElemBytes);  // next row tile (GEMV)
      const __m512 wv = WT::load(w + r * w_stride + i * WT::kElemBytes, m);
      for (int c = 0; c < C; ++c) acc[r][c] = _mm512_fmadd_ps(wv, xv[c], acc[r][c]);
    }
  }

  template <int R, int C>
  static void tile(int64_t n, const uint8_t* w, size_t w_stride, const uint8_t* x, size_t x_stride, float* y,
                   size_t ldy) {
    __m512 acc[R][C];
    zero_tile(acc);
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) step<R, C>(w, w_stride, x, x_stride, i, 0xffff, acc);
    if (i < n) step<R, C>(w, w_stride, x, x_stride, i, static_cast<__mmask16>((1u << (n - i)) - 1), acc);
    store_tile(acc, y, ldy);
  }
};

// BF16 weights times BF16 activations with vdpbf16ps. The file is compiled with
// -mavx512bf16, but only this tile uses it and the table hands it out only when
// the CPU has AVX512-BF16.
struct DpBf16Tile {
  template <int R, int C>
  static inline void step(const uint8_t* w, size_t w_stride, const uint8_t* x, size_t x_stride, int64_t i, __mmask32 m,
                          __m512 (&acc)[R][C]) {
    __m512i xv[C];
    for (int c = 0; c < C; ++c) xv[c] = _mm512_maskz_loadu_epi16(m, x + c * x_stride + i * 2);
    for (int r = 0; r < R; ++r) {
      prefetch_span<64>(w + (r + R) * w_stride + i * 2);  // next row tile (GEMV)
      const __m512i wv = _mm512_maskz_loadu_epi16(m, w + r * w_stride + i * 2);
      for (int c = 0; c < C; ++c) acc[r][c] = _mm512_dpbf16_ps(acc[r][c], (__m512bh)wv, (__m512bh)xv[c]);
    }
  }

  template <int R, int C>
  static void tile(int64_t n, const uint8_t* w, size_t w_stride, const uint8_t* x, size_t x_stride, float* y,
                   size_t ldy) {
    __m512 acc[R][C];
    zero_tile(acc);
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) step<R, C>(w, w_stride, x, x_stride, i, 0xffffffffu, acc);
    if (i < n) step<R, C>(w, w_stride, x, x_stride, i, static_cast<__mmask32>((1ull << (n - i)) - 1), acc);
    store_tile(acc, y, ldy);
  }
};

constexpr MatmulKernels kF32 = {GgmlType::F32, copy_f32, dispatch_tile<FmaTile<F32W>, 4, 4>, 4, 4, CpuLevel::Avx512};
constexpr MatmulKernels kF16 = {GgmlType::F32, copy_f32, dispatch_tile<FmaTile<F16W>, 4, 4>, 4, 4, CpuLevel::Avx512};
constexpr MatmulKernels kBf16Fma = {GgmlType::F32, copy_f32, dispatch_tile<FmaTile<Bf16W>, 4, 4>, 4, 4,
                                    CpuLevel::Avx512};
constexpr MatmulKernels kBf16Dp = {GgmlType::BF16, avx512_convert_bf16, dispatch_tile<DpBf16Tile, 4, 4>, 4, 4,
                                   CpuLevel::Avx512};

}  // namespace

const MatmulKernels* avx512_float_kernels(GgmlType t) {
  switch (t) {
    case GgmlType::F32: return &kF32;
    case GgmlType::F16: return &kF16;
    case GgmlType::BF16: return cpu_features().avx512bf16 ? &kBf16Dp : &kBf16Fma;
    default: return nullptr;
  }
}

}  // namespace tern::kernels::x86
