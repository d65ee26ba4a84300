// kernels/arm/tile_dispatch.h — run-time n_cols to a compile-time tile (internal).
//
// The AArch64 tiles take n_rows at run time (spare rows repeat the last one)
// and the column count as a template argument, so their accumulators stay in
// registers. Templates in an anonymous namespace: each level's translation
// unit gets its own copies (ODR rule in arm_impl.h).
#pragma once

#include <cstddef>
#include <cstdint>

namespace tern::kernels::arm {
namespace {

// The MatmulKernels::tile entry point of family K: tile<C> for C = n_cols (1..MaxC).
template <class K, int MaxC>
void dispatch(int64_t n, const void* w, size_t w_stride, int n_rows, const void* xq, size_t x_stride, int n_cols,
              float* y, size_t ldy) {
  if constexpr (MaxC > 1) {
    if (n_cols < MaxC) return dispatch<K, MaxC - 1>(n, w, w_stride, n_rows, xq, x_stride, n_cols, y, ldy);
  }
  K::template tile<MaxC>(n, static_cast<const uint8_t*>(w), w_stride, n_rows, static_cast<const uint8_t*>(xq),
                         x_stride, y, ldy);
}

}  // namespace
}  // namespace tern::kernels::arm
