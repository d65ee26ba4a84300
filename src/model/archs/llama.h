// model/archs/llama.h — the Llama block, which other architectures of the
// family (mistral, qwen2) reuse as it is.
#pragma once

#include "model/arch.h"

namespace tern::archs {

// Pre-norm attention and pre-norm gated FFN, each added to the residual stream:
//   x += attention(rmsnorm(x) * attn_norm)
//   x += gated_ffn(rmsnorm(x) * ffn_norm)   (moe_ffn when the model has experts)
void llama_block(const Pass& p, const LayerWeights& l, const LayerHParams& lh);

}  // namespace tern::archs
