// quant/gptq.h — GPTQ (Frantar et al., 2022) into the existing block types.
//
// A linear layer y = W x is quantized column by column (in input order) so
// that its output on calibration inputs changes as little as possible: with
// H = sum over calibration rows of x xᵀ, the error a column's rounding leaves
// is spread over the columns not yet quantized through U, the upper Cholesky
// factor of H⁻¹ (H damped by `damp` times its mean diagonal):
//     e = (w_i - q(w_i)) / U_ii,    w_k -= e * U_ik  for k > i.
// Block formats have one scale per 32 columns of a row, so the scale of a
// block is fitted (quant/block_codec.h, weighted by diag(H)) when the column
// loop reaches the block — from weights that already carry the compensation
// of every earlier column — and the block's columns are then rounded to it.
// GPTQ is one greedy pass; a refinement then lowers the same objective,
// the layer's output error on the calibration inputs, further: single
// indices move to a neighbouring level and block scales are refitted by
// least squares with the indices fixed, each change kept only when the
// error falls (so the result is never worse than GPTQ's own).
// The result is ordinary blocks (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, IQ4_NL, MXFP4).
//
// K-quants (gptq_encode_k: Q4_K, Q5_K, Q6_K): the same column loop over
// super-blocks of 256 columns. When the loop reaches a super-block, its scales
// (the super-scale and every sub-block's scale and minimum, quant/k_grid.h)
// are fitted to the compensated weights by the importance-weighted K-quant
// encoder under diag(H), as for the 32-element blocks; each column is then
// rounded to its sub-block's grid and its error spread as above. The
// refinement pass is not run for them (their sub-block scales are tied by the
// six-bit packing under one super-scale; left for later).
//
// Input channels no calibration row touched (H_ii = 0) are set to 0 as in the
// paper. Rows are independent: they run in tiles over the pool, and the bytes
// do not depend on the number of threads. Arithmetic is double.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/status.h"
#include "core/thread_pool.h"
#include "quant/block_codec.h"

namespace tern::quant {

struct GptqOptions {
  double damp = 0.01;  // fraction of mean(diag H) added to the diagonal
  // After the column loop, lower the same objective further by moving single
  // indices to a neighbouring level and refitting block scales (Refiner in gptq.cpp).
  bool refine = true;
};

// w: [n_rows][n_cols] f32; h: [n_cols][n_cols] symmetric (row-major);
// out: [n_rows][row bytes of c.type]. InvalidArgument on shapes, or when H
// stays not positive definite after raising the damping 100-fold.
Status gptq_encode(const BlockCodec& c, std::span<const float> w, int64_t n_rows, int64_t n_cols,
                   std::span<const double> h, const GptqOptions& o, uint8_t* out, ThreadPool& pool);

// As gptq_encode, into Q4_K, Q5_K or Q6_K (n_cols a multiple of 256; o.refine unused).
Status gptq_encode_k(gguf::GgmlType type, std::span<const float> w, int64_t n_rows, int64_t n_cols,
                     std::span<const double> h, const GptqOptions& o, uint8_t* out, ThreadPool& pool);

// The factor the column loop uses: U upper triangular ([n][n] row-major) with
// Uᵀ U = (H + damping)⁻¹, dead channels already given H_ii = 1. Exposed for tests.
Result<std::vector<double>> gptq_inverse_factor(std::span<const double> h, int64_t n, double damp);

}  // namespace tern::quant
