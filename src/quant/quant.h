// quant/quant.h — per-type conversion table (scalar reference paths).
//
// Types: F32, F16, BF16; Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q8_1, IQ4_NL (32-element
// blocks, quant/blocks.h); Q2_K..Q6_K, Q8_K and IQ4_XS (256-element super-blocks,
// quant/k_blocks.h). Other ggml types (IQ2_*, IQ3_*, IQ1_*, TQ*) have no row
// here: traits() returns nullptr for them.
//
// A row of n elements of type T occupies n / block_elems * block_bytes bytes;
// n must be a multiple of block_elems.
//   to_float    decodes a row, bit-exact with ggml's dequantize_row_*.
//   from_float  encodes one with ggml's reference quantizer rules
//               (quantize_row_*_ref, i.e. llama-quantize without an importance
//               matrix; for IQ4_NL its 15-candidate scale search), so files we
//               write match files other tools write.
//   vec_dot     the reference dot product of a row of T with an f32 vector:
//               f32 sums per (sub-)block with the scales factored out, then
//               added block by block, left to right.
// All functions are pure and thread-safe; the table is immutable.
#pragma once

#include <cstddef>
#include <cstdint>

#include "gguf/gguf_format.h"

namespace tern::quant {

using gguf::GgmlType;

struct TypeTraits {
  GgmlType type;
  const char* name;
  uint32_t block_elems;
  uint32_t block_bytes;
  void (*to_float)(const void* src, float* dst, int64_t n);
  void (*from_float)(const float* src, void* dst, int64_t n);
  float (*vec_dot)(const void* row, const float* x, int64_t n);
  // The activation type ggml's fast kernels quantize x to for this weight type
  // (Q8_0, Q8_1 or Q8_K; the float types pair with themselves). The scalar
  // vec_dot above ignores it and takes f32 x.
  GgmlType vec_dot_type;
};

// Traits of a type this build can compute with, or nullptr.
const TypeTraits* traits(GgmlType type);

inline size_t row_bytes(const TypeTraits& t, int64_t n) { return static_cast<size_t>(n / t.block_elems) * t.block_bytes; }

// One scale for a whole row of int8 (W8A8's weight rows and per-token
// activations): returns d = max|x| / 127 and writes q = round-half-even(x / d)
// (x times 1/d, clamped to +-127 before rounding, max before min, so NaN gives
// -127; d = 0 gives q = 0).
float quantize_row_i8(const float* x, int64_t n, int8_t* q);

// Types whose rows carry one f32 scale apart from their codes (the tensor
// "<name>.scale"): I8 (W8A8) and the FP8 types. Their traits have no
// from_float; the codes of a row depend on its scale.
bool has_row_scale(GgmlType type);
inline bool is_fp8(GgmlType type) { return type == GgmlType::F8_E4M3 || type == GgmlType::F8_E5M2; }
// A row of such a type: writes its codes to q and returns its scale (I8:
// quantize_row_i8; FP8: d = max|x| / largest finite value, codes = x / d
// rounded to nearest even; d = 0 gives zero codes).
float quantize_row_scaled(GgmlType type, const float* x, int64_t n, void* q);

}  // namespace tern::quant
