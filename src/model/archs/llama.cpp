// llama: the reference member of the family (Llama 1-3, TinyLlama, the
// stories models, and Mistral files converted as "llama").
#include "model/archs/llama.h"

namespace tern::archs {

void llama_block(const Pass& p, const LayerWeights& l, const LayerHParams& lh) {
  const Activations& a = p.act;
  layers::rms_norm(p, a.x, l.attn_norm, a.xn, p.n);
  layers::attention(p, l, lh, a.xn, a.proj);
  layers::residual_add(p, a.x, a.proj);
  layers::rms_norm(p, a.x, l.ffn_norm, a.xn, p.n);
  if (p.hp.is_moe())
    layers::moe_ffn(p, l.moe, a.xn, a.proj);  // Mixtral, qwen2moe, qwen3moe
  else
    layers::gated_ffn(p, l.ffn, a.xn, a.proj);
  layers::residual_add(p, a.x, a.proj);
}

// Mixtral is written as "llama" with expert_count > 0: expert width
// feed_forward_length, top-k weights renormalised (llama.cpp's llama graph
// passes norm_w = true), no shared expert.
constinit const MoeInfo kLlamaMoe{.required = false, .expert_ffn_key = false, .norm_weights = true,
                                  .shared_expert = false};

extern const ArchInfo kLlama;
// GGUF converters permute Q and K rows so that adjacent-pair (Normal) RoPE
// applies. llama.cpp reads optional q/k/v biases for llama (some fine-tunes
// carry them); the sliding window is honoured when a file states one. Llama
// 3.1+ files carry rope_freqs.weight: Meta's long-context frequency divisors.
constinit const ArchInfo kLlama{.name = "llama",
                                .rope_layout = kernels::RopeLayout::Normal,
                                .reads_sliding_window = true,
                                .reads_qkv_bias = true,
                                .block = llama_block,
                                .reads_rope_freqs = true,
                                .moe = &kLlamaMoe};

}  // namespace tern::archs
