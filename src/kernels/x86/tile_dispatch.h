// kernels/x86/tile_dispatch.h — run-time (n_rows, n_cols) to a compile-time tile (internal).
//
// A tile kernel is written once as `K::template tile<R, C>(...)` with R and C
// constants, so its accumulators live in registers and its loops unroll. The
// MatmulKernels table holds one function pointer per type; dispatch_tile<K,
// MaxR, MaxC> is that pointer: it picks the instantiation for the shape the
// driver asks for (any 1 <= n_rows <= MaxR, 1 <= n_cols <= MaxC).
//
// ODR: everything here is a template in an anonymous namespace, so each
// level's translation unit (compiled with its own -m flags) gets private
// copies; nothing leaks to code compiled for the baseline ISA.
#pragma once

#include <cstddef>
#include <cstdint>

namespace tern::kernels::x86 {
namespace {

template <class K, int R, int C>
void dispatch_cols(int n_cols, int64_t n, const uint8_t* w, size_t w_stride, const uint8_t* x, size_t x_stride,
                   float* y, size_t ldy) {
  if constexpr (C > 1) {
    if (n_cols < C) return dispatch_cols<K, R, C - 1>(n_cols, n, w, w_stride, x, x_stride, y, ldy);
  }
  K::template tile<R, C>(n, w, w_stride, x, x_stride, y, ldy);
}

template <class K, int R, int C>
void dispatch_rows(int n_rows, int n_cols, int64_t n, const uint8_t* w, size_t w_stride, const uint8_t* x,
                   size_t x_stride, float* y, size_t ldy) {
  if constexpr (R > 1) {
    if (n_rows < R) return dispatch_rows<K, R - 1, C>(n_rows, n_cols, n, w, w_stride, x, x_stride, y, ldy);
  }
  dispatch_cols<K, R, C>(n_cols, n, w, w_stride, x, x_stride, y, ldy);
}

// The MatmulKernels::tile entry point of kernel family K with a MaxR x MaxC register tile.
template <class K, int MaxR, int MaxC>
void dispatch_tile(int64_t n, const void* w, size_t w_stride, int n_rows, const void* xq, size_t x_stride, int n_cols,
                   float* y, size_t ldy) {
  dispatch_rows<K, MaxR, MaxC>(n_rows, n_cols, n, static_cast<const uint8_t*>(w), w_stride,
                               static_cast<const uint8_t*>(xq), x_stride, y, ldy);
}

}  // namespace
}  // namespace tern::kernels::x86
