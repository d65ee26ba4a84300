// quant/rows.h — scalar reference row functions of each block type (internal).
//
// quant.cpp's traits table is the only user; everything else reaches these
// through quant::traits(). All follow TypeTraits' contract: n is a multiple of
// the type's block_elems, rows are contiguous blocks, vec_dot takes an f32 x.
#pragma once

#include <cstdint>

namespace tern::quant::rows {

// legacy_quants.cpp — 32-element blocks.
void q4_1_to_float(const void* src, float* dst, int64_t n);
void q4_1_from_float(const float* src, void* dst, int64_t n);
float q4_1_vec_dot(const void* row, const float* x, int64_t n);
void q5_0_to_float(const void* src, float* dst, int64_t n);
void q5_0_from_float(const float* src, void* dst, int64_t n);
float q5_0_vec_dot(const void* row, const float* x, int64_t n);
void q5_1_to_float(const void* src, float* dst, int64_t n);
void q5_1_from_float(const float* src, void* dst, int64_t n);
float q5_1_vec_dot(const void* row, const float* x, int64_t n);
void q8_1_to_float(const void* src, float* dst, int64_t n);
void q8_1_from_float(const float* src, void* dst, int64_t n);
float q8_1_vec_dot(const void* row, const float* x, int64_t n);
void iq4_nl_to_float(const void* src, float* dst, int64_t n);
void iq4_nl_from_float(const float* src, void* dst, int64_t n);
float iq4_nl_vec_dot(const void* row, const float* x, int64_t n);

// sparse24.cpp — Q8_0_S24: Q8_0 values of a 2:4-sparse row (blocks.h).
void q8_0_s24_to_float(const void* src, float* dst, int64_t n);
// Keeps the 2 largest |x| of every 4 (ties to the lower column), then Q8_0's rounding of them.
void q8_0_s24_from_float(const float* src, void* dst, int64_t n);
float q8_0_s24_vec_dot(const void* row, const float* x, int64_t n);

// mxfp4.cpp — MXFP4 (32-element blocks, E8M0 scale); mxfp4_scale(e) = 2^(e - 128).
float mxfp4_scale(uint8_t e);
// ggml's exponent for a block whose largest magnitude is amax: floor(log2 amax) - 2 + 127
// (log2f, as ggml), so amax lands in [4, 8) steps; clamped to 0..255 (0 for amax = 0).
uint8_t mxfp4_exponent(float amax);
void mxfp4_to_float(const void* src, float* dst, int64_t n);
void mxfp4_from_float(const float* src, void* dst, int64_t n);
float mxfp4_vec_dot(const void* row, const float* x, int64_t n);

// k_quants.cpp (to_float, vec_dot) and k_quantize.cpp (from_float) — 256-element super-blocks.
void q2_k_to_float(const void* src, float* dst, int64_t n);
void q2_k_from_float(const float* src, void* dst, int64_t n);
float q2_k_vec_dot(const void* row, const float* x, int64_t n);
void q3_k_to_float(const void* src, float* dst, int64_t n);
void q3_k_from_float(const float* src, void* dst, int64_t n);
float q3_k_vec_dot(const void* row, const float* x, int64_t n);
void q4_k_to_float(const void* src, float* dst, int64_t n);
void q4_k_from_float(const float* src, void* dst, int64_t n);
float q4_k_vec_dot(const void* row, const float* x, int64_t n);
void q5_k_to_float(const void* src, float* dst, int64_t n);
void q5_k_from_float(const float* src, void* dst, int64_t n);
float q5_k_vec_dot(const void* row, const float* x, int64_t n);
void q6_k_to_float(const void* src, float* dst, int64_t n);
void q6_k_from_float(const float* src, void* dst, int64_t n);
float q6_k_vec_dot(const void* row, const float* x, int64_t n);
void q8_k_to_float(const void* src, float* dst, int64_t n);
// Importance-weighted variants (quant/block_codec.h): the sub-block fits use
// imp ([n]) as their weights where it is not all zero.
void q2_k_from_float_weighted(const float* src, const float* imp, void* dst, int64_t n);
void q3_k_from_float_weighted(const float* src, const float* imp, void* dst, int64_t n);
void q4_k_from_float_weighted(const float* src, const float* imp, void* dst, int64_t n);
void q5_k_from_float_weighted(const float* src, const float* imp, void* dst, int64_t n);
void q6_k_from_float_weighted(const float* src, const float* imp, void* dst, int64_t n);
void q8_k_from_float(const float* src, void* dst, int64_t n);
float q8_k_vec_dot(const void* row, const float* x, int64_t n);

// IQ4_NL with ggml's two reference settings: n_try = 7 searches 15 candidate
// scales (what llama-quantize writes; our from_float), n_try = -1 keeps the
// first fit (ggml's quantize_row_iq4_nl_ref, used for activations).
void iq4_nl_from_float_ntry(const float* src, void* dst, int64_t n, int n_try);
// The IQ4_NL scale search of one 32-element block (shared with IQ4_XS's sub-blocks): the scale of
// least x²-weighted error, 0 for an all-zero block; L gets the indices of the first fit (all 8,
// the entry nearest 0, for an all-zero block).
float iq4_best_scale(const float* x, int n_try, uint8_t* L);

// iq4_xs.cpp — IQ4_NL's code book in 256-element super-blocks with 6-bit sub-block scales.
void iq4_xs_to_float(const void* src, float* dst, int64_t n);
void iq4_xs_from_float(const float* src, void* dst, int64_t n);
float iq4_xs_vec_dot(const void* row, const float* x, int64_t n);

}  // namespace tern::quant::rows
