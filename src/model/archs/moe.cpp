// qwen2moe and qwen3moe: the qwen2 / qwen3 blocks with a mixture-of-experts
// FFN (layers::moe_ffn) in place of the dense one. Mixtral is a llama row
// (archs/llama.cpp) whose file has experts.
#include "model/archs/llama.h"

namespace tern::archs {

// As llama.cpp's graphs call build_moe_ffn: qwen2moe does not renormalise the
// top-k weights and adds a shared expert gated by a sigmoid; qwen3moe
// renormalises and has none. Both size the experts by
// expert_feed_forward_length (default n_ff / expert_used_count).
constinit const MoeInfo kQwen2MoeInfo{.required = true, .expert_ffn_key = true, .norm_weights = false,
                                      .shared_expert = true};
constinit const MoeInfo kQwen3MoeInfo{.required = true, .expert_ffn_key = true, .norm_weights = true,
                                      .shared_expert = false};

extern const ArchInfo kQwen2Moe;
// NeoX pairing and q/k/v biases (when present), as qwen2; llama.cpp reads no
// sliding window for qwen2moe.
constinit const ArchInfo kQwen2Moe{.name = "qwen2moe",
                                   .rope_layout = kernels::RopeLayout::NeoX,
                                   .reads_sliding_window = false,
                                   .reads_qkv_bias = true,
                                   .block = llama_block,
                                   .moe = &kQwen2MoeInfo};

extern const ArchInfo kQwen3Moe;
// Per-head q/k norms, NeoX pairing, no biases, as qwen3.
constinit const ArchInfo kQwen3Moe{.name = "qwen3moe",
                                   .rope_layout = kernels::RopeLayout::NeoX,
                                   .reads_sliding_window = false,
                                   .reads_qkv_bias = false,
                                   .block = llama_block,
                                   .reads_qk_norm = true,
                                   .moe = &kQwen3MoeInfo};

}  // namespace tern::archs
