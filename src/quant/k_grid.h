// quant/k_grid.h — a K-quant super-block (Q4_K, Q5_K, Q6_K) seen as one grid
// per sub-block, for methods that choose each element's quant themselves
// (GPTQ, quant/gptq.h): the super-block's scales are fitted once, by the
// importance-weighted encoder (quant/k_quantize.cpp), and then element e of
// sub-block s may take any level dl[s] * q - ml[s] with q in [qmin, qmax]:
//
//   Q4_K  q 0..15, 8 sub-blocks of 32, dl = d * scale, ml = dmin * min
//   Q5_K  q 0..31, as Q4_K
//   Q6_K  q -32..31, 16 sub-blocks of 16, dl = d * scale (int8), ml = 0
//
// level() is the decoder's own f32 arithmetic, so it is the value the block
// will decode to. set_quant writes q into the block's bit layout
// (quant/k_blocks.h) and leaves the scales alone. Pure and thread-safe.
#pragma once

#include <cstdint>

#include "gguf/gguf_format.h"

namespace tern::quant {

struct KGrid {
  int sub_elems = 32;
  int qmin = 0, qmax = 15;
  float dl[16] = {};
  float ml[16] = {};

  float level(int e, int q) const { return dl[e / sub_elems] * static_cast<float>(q) - ml[e / sub_elems]; }
  // The q whose level is nearest to x (the grid is uniform: x + ml rounded in units of dl, clamped).
  int nearest(int e, float x) const;
};

// Q4_K, Q5_K and Q6_K.
bool k_grid_supported(gguf::GgmlType type);

// Fits the super-block of x[256] under importance w ([256], null: uniform),
// writes its bytes to `block` (scales and the nearest quants) and returns its grid.
KGrid k_grid_fit(gguf::GgmlType type, const float* x, const float* w, void* block);

// Sets element e's quant (qmin <= q <= qmax) in a block of `type`.
void k_grid_set(gguf::GgmlType type, void* block, int e, int q);

}  // namespace tern::quant
