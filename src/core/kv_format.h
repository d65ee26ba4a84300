// core/kv_format.h — how one key or value row is stored in the KV cache, per
// KvType. A row is n_kv_head head slices laid end to end; a head slice is:
//
//   F32, F16   head_dim elements
//   Q8_0       groups of G elements, G = 32, or head_dim itself when head_dim
//              is not a multiple of 32 (stories260K's 8), so a group never
//              spans two heads: [head_dim / G IEEE-half scales d][head_dim
//              int8 codes q], x ≈ d * q with d = max|x| / 127 (rounded to
//              half) and q the nearest integer to x / d of its group (halves
//              away from zero). The
//              codes are contiguous so a kernel loads a head's in one go.
//   Q4_0       the same groups, [head_dim / G half scales][head_dim / 2 bytes
//              of 4-bit codes]: within a group, byte i holds element i in its
//              low nibble and element i + G/2 in its high one, each as q + 8
//              with q in [-8, 7]; d = m / -8 for the group's element m of
//              largest magnitude (rounded to half), so m itself is exactly
//              -8 d and the range's extra negative step is not wasted (ggml's
//              Q4_0 rule), and q the nearest integer to x / d, clamped.
//   Fp8        head_dim OCP FP8 E4M3 bytes (core/fp8.h: nearest, ties to
//              even, saturating at ±448; no scale, as vLLM's fp8 cache with
//              its default scale of 1). Attention reads them as the halves
//              they exactly are, so scores and P·V are the f16 cache's
//              arithmetic on those values.
//
// These scalar codecs are the reference: the attention kernels read the same
// bytes and compute each value element as the same f32 product d * q.
//
// A q8_0 or q4_0 cache also fixes how scores are computed (as llama.cpp does with
// its q8_0 cache): the query is rounded to the same groups
// (kv_quantize_query), and a score is the sum over groups of
// d_key * d_query * (the exact integer dot product of their codes). Integer
// dot products are exact in every implementation (|sum| < 2^24 even in f32),
// so SIMD int8 kernels and float ones agree.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

#include "tern/config.h"

namespace tern {

const char* kv_type_name(KvType t);
// "f32", "f16", "q8_0", "q4_0", "fp8" (what --kv-type accepts), or nullopt.
std::optional<KvType> parse_kv_type(std::string_view name);
// The accepted names for an error message: "f16, f32, q8_0, q4_0 or fp8".
const char* kv_type_choices();

// Whether keys and values are integer codes with a scale per group (q8_0,
// q4_0): scores are then integer dot products with the query's q8_0 codes.
inline bool kv_is_int(KvType t) { return t == KvType::Q8_0 || t == KvType::Q4_0; }

// Elements per scale group (0 for the float types).
int kv_group_elems(KvType t, int head_dim);
size_t kv_head_bytes(KvType t, int head_dim);
inline size_t kv_row_bytes(KvType t, int n_kv_head, int head_dim) {
  return static_cast<size_t>(n_kv_head) * kv_head_bytes(t, head_dim);
}

// One head slice of head_dim floats to its stored form, and back.
void kv_encode_head(KvType t, const float* x, int head_dim, void* dst);
void kv_decode_head(KvType t, const void* src, int head_dim, float* x);
// A whole row: n_kv_head slices.
void kv_encode_row(KvType t, const float* x, int n_kv_head, int head_dim, void* dst);

// Q8_0: a query head of head_dim floats as codes and one f32 scale per group
// (d = max|x| / 127 unrounded, code = nearest integer of x * (1 / d)); q4_0
// caches round their queries the same way (same groups).
void kv_quantize_query(const float* q, int head_dim, int8_t* codes, float* scales);
// Q8_0 or Q4_0: a stored head slice's codes (as int8) and scales (as f32).
void kv_codes(KvType t, const void* head, int head_dim, int8_t* codes, float* scales);
// Q4_0: a head slice's codes unpacked to int8 ([head_dim]).
void kv_q4_unpack(const void* head, int head_dim, int8_t* codes);

}  // namespace tern
