// kernels/w8a8.h — W8A8 matmul (SmoothQuant's form): int8 weights with one
// scale per output row, int8 activations with one scale per token, an exact
// int32 dot product, and two float multiplies per output.
//
//   y[c][r] = f32(sum_i xq[c][i] * wq[r][i]) * dx[c]      (the tile kernels)
//   y[c][r] *= sw[r]                                      (kernels::matmul, WeightView::row_scale)
//
// Weights: a matrix of type I8 (rows of n int8, as in the file) plus its
// per-row f32 scales. Activations, per token (quantize_act_i8):
//   dx = max|x| / 127, q = round-half-even(x * (1 / dx)) in [-127, 127]
// written as one act row: [f32 dx][60 bytes zero] then n bytes q + 128
// (unsigned, for vpdpbusd), padded with 128 (q = 0) to a multiple of 64.
// Every level computes the same int32 sum and the same two multiplies, so the
// levels agree bit for bit and a result does not depend on the batch.
//
// Packed panels (kernels/pack.h; 32 rows, rows past the matrix are zeros):
//   [32 x int32 sum of the row's quants] [64 bytes zero]
//   then per 64 columns g: [dword j < 16][half h < 2][16 rows x 4 bytes]
// (columns past n are zeros), so one panel is 192 + 32 * round_up(n, 64) bytes.
#pragma once

#include <cstddef>
#include <cstdint>

namespace tern::kernels {

inline constexpr size_t kW8ActHeader = 64;
inline int64_t w8_padded(int64_t n) { return (n + 63) / 64 * 64; }
inline size_t w8_act_row_bytes(int64_t n) { return kW8ActHeader + static_cast<size_t>(w8_padded(n)); }
inline size_t w8_panel_bytes(int64_t n) { return 192 + 32 * static_cast<size_t>(w8_padded(n)); }

// The scalar reference of both steps (the Scalar level's table entry).
void quantize_act_i8(const float* x, void* xq, int64_t n);
void w8_tile_scalar(int64_t n, const void* w, size_t w_stride, int n_rows, const void* xq, size_t x_stride, int n_cols,
                    float* y, size_t ldy);
// One packed panel of rows [r0, r0 + 32) of a matrix of n_rows rows of n int8 (row r at w + r * w_stride).
void w8_pack_panel(const uint8_t* w, size_t w_stride, int64_t n_rows, int64_t n, int64_t r0, uint8_t* dst);

}  // namespace tern::kernels
