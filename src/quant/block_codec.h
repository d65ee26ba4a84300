// quant/block_codec.h — the 32-element block types seen as "a scale (and an
// offset) per block, and an index into a fixed grid per element", so methods
// that choose the scale and the indices themselves — importance-weighted
// rounding, GPTQ (quant/gptq.h) — write ordinary blocks that every decoder,
// tern's kernels and llama.cpp's, reads unchanged.
//
//   symmetric  x̂ = d * grid[q]       Q4_0 (q-8), Q5_0 (q-16), Q8_0 (q-127), IQ4_NL (its table),
//                                    MXFP4 (the 15 distinct FP4 values, ascending; d a power of two)
//   affine     x̂ = d * q + m         Q4_1 (q < 16), Q5_1 (q < 32)
//
// d and m are kept as the values the block stores (fp16; MXFP4: a power of
// two, its E8M0 byte), so level() is the value the decoder will produce (up
// to the decoder's own float rounding).
// All functions are pure and thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "gguf/gguf_format.h"

namespace tern::quant {

struct BlockFit {
  float d = 0.0f;  // fp16-representable scale
  float m = 0.0f;  // fp16-representable offset (affine types; 0 otherwise)
};

struct BlockCodec {
  gguf::GgmlType type;
  int block_elems;
  bool affine;
  std::span<const float> grid;  // ascending values of the indices, in units of d (affine: 0, 1, ...)
};

// The codec of a 32-element block type, or nullptr (K-quants, float types, ...).
const BlockCodec* block_codec(gguf::GgmlType type);

// The scale (or offset) the block can store nearest to v: fp16, or for MXFP4
// the nearest power of two 2^(e-128), e in 0..254 (log-nearest, 0 stays 0).
float stored_scale(const BlockCodec& c, float v);

// The grid index whose level is nearest to x (ties to the upper index).
int nearest_index(const BlockCodec& c, const BlockFit& f, float x);
inline float level(const BlockCodec& c, const BlockFit& f, int q) {
  return c.affine ? c.grid[q] * f.d + f.m : f.d * c.grid[q];
}

// Scale (and offset) for one block of x minimising sum_j w[j] * (x[j] - x̂[j])²
// over a search of candidate scales, each refined by least squares on its
// indices; w null = every weight 1. Never worse (in that error) than the
// absmax / min-max fit ggml's reference quantizer uses.
BlockFit fit_block(const BlockCodec& c, const float* x, const float* w);
// Weighted error sum_j w[j] * (x[j] - level(nearest(x[j])))² of a fit (w null: 1).
double block_error(const BlockCodec& c, const BlockFit& f, const float* x, const float* w);

// Writes one block from its fit and the index of each element (q[j] < grid.size()).
void store_block(const BlockCodec& c, const BlockFit& f, const uint8_t* q, void* block);

// A row of n elements (a multiple of block_elems): each block fitted with
// fit_block under importance w ([n], null = uniform) and its elements rounded
// to the nearest level.
void encode_row_weighted(const BlockCodec& c, const float* x, const float* w, void* dst, int64_t n);

// Importance-weighted rounding of a row for any type that has it: the codec
// types above, and Q4_K, Q5_K, Q6_K (ggml's super-block procedure with the
// importance as the sub-block fits' weights; quant/k_quantize.cpp). False
// for other types.
bool supports_weighted(gguf::GgmlType type);
bool encode_row_importance(gguf::GgmlType type, const float* x, const float* w, void* dst, int64_t n);

}  // namespace tern::quant
