// quant/quant.h — per-type conversion table (scalar reference paths).
//
// A row of n elements of type T occupies n / block_elems * block_bytes bytes;
// n must be a multiple of block_elems. to_float decodes a row; from_float
// encodes one with the same rounding rules as ggml's reference quantizers, so
// files we write match files other tools write. vec_dot is the reference
// dot product of a row of T with an f32 vector (accumulated in f32 per block,
// summed in double-free f32 order: block by block, left to right).
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
};

// Traits of a type this build can compute with, or nullptr.
const TypeTraits* traits(GgmlType type);

inline size_t row_bytes(const TypeTraits& t, int64_t n) { return static_cast<size_t>(n / t.block_elems) * t.block_bytes; }

}  // namespace tern::quant
