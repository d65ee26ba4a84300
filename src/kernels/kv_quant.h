// kernels/kv_quant.h — the q8_0 KV cache's two roundings at SIMD speed: a
// query head to codes and scales (once per head per attention call) and a key
// or value row as stored (once per token per layer). They give exactly the
// bytes of core/kv_format.h's scalar codecs (the reference): the same
// operations in the same order, vectorised where the CPU allows.
#pragma once

#include <cstdint>

#include "core/kv_format.h"

namespace tern::kernels {

// = kv_quantize_query.
void quantize_query(const float* q, int head_dim, int8_t* codes, float* scales);
// = kv_encode_row.
void encode_kv_row(KvType t, const float* x, int n_kv_head, int head_dim, void* dst);

}  // namespace tern::kernels
