// qwen3: the Llama block with an RMSNorm over each query and key head before
// RoPE (attn_q_norm / attn_k_norm, [head_dim]) and no q/k/v biases. Qwen3's
// head size (key_length 128) is not n_embd / n_head in most sizes.
#include "model/archs/llama.h"

namespace tern::archs {

extern const ArchInfo kQwen3;
// NeoX pairing, as qwen2. llama.cpp reads no sliding window for qwen3 (its
// configs disable it), and neither does tern.
constinit const ArchInfo kQwen3{.name = "qwen3",
                                .rope_layout = kernels::RopeLayout::NeoX,
                                .reads_sliding_window = false,
                                .reads_qkv_bias = false,
                                .block = llama_block,
                                .reads_qk_norm = true};

}  // namespace tern::archs
