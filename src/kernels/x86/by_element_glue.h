// kernels/x86/by_element_glue.h — the MatmulKernels row of a by-element panel
// kernel (avx2_f16.cpp, avx512_f16.cpp; internal): its tile and packed-tile
// entry points around one panel function, the f32 activation copy and the
// by-element pack layout.
//
// Everything is static (anonymous namespace): each level's file instantiates
// its own copy (see the ODR rule in x86_impl.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "kernels/x86/x86_impl.h"

namespace tern::kernels::x86 {
namespace {

// A panel over one 32-row panel: weights packed (by element, whole row) or rows in place.
using ByElementPanel = void (*)(int64_t n, const uint8_t* packed, const uint8_t* w, size_t w_stride, int n_rows,
                                const float* x, size_t xs, int n_cols, float* y, size_t ldy);

template <ByElementPanel kPanel>
void by_element_tile(int64_t n, const void* w, size_t w_stride, int n_rows, const void* xq, size_t x_stride,
                     int n_cols, float* y, size_t ldy) {
  kPanel(n, nullptr, static_cast<const uint8_t*>(w), w_stride, n_rows, static_cast<const float*>(xq),
         x_stride / sizeof(float), n_cols, y, ldy);
}

template <ByElementPanel kPanel>
void by_element_packed_tile(int64_t n, const void* panel, int n_rows, const void* xq, size_t x_stride, int n_cols,
                            float* y, size_t ldy) {
  kPanel(n, static_cast<const uint8_t*>(panel), nullptr, 0, n_rows, static_cast<const float*>(xq),
         x_stride / sizeof(float), n_cols, y, ldy);
}

inline void copy_f32(const float* x, void* xq, int64_t n) {
  std::memcpy(xq, x, static_cast<size_t>(n) * sizeof(float));
}

// The table row: f32 activations, 32-row panels of max_cols columns, act_block bytes of activations per pass.
template <ByElementPanel kPanel>
constexpr MatmulKernels by_element_row(int max_cols, CpuLevel level, size_t act_block) {
  MatmulKernels::PackLayout layout;
  layout.by_element = true;
  return {gguf::GgmlType::F32, copy_f32, by_element_tile<kPanel>,        32,       max_cols,
          level,               layout,   by_element_packed_tile<kPanel>, act_block};
}

}  // namespace
}  // namespace tern::kernels::x86
