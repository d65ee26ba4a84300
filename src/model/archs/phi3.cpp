// phi3: Phi-3, Phi-3.5 and Phi-4 (all written as "phi3" by llama.cpp's
// converter). The Llama block over fused weights: attn_qkv holds the Q, K and
// V rows one after another and ffn_up the gate rows, then the up rows (the
// first half goes through SiLU, as llama.cpp's LLM_FFN_SWIGLU splits it); the
// loader binds each part as a view of its own, so the block is llama's.
// LongRoPE: rope_factors_long / _short divide the frequencies, the long set
// when the context in force exceeds rope.scaling.original_context_length,
// and rope.scaling.attn_factor scales q and k.
#include "model/archs/llama.h"

namespace tern::archs {

extern const ArchInfo kPhi3;
// NeoX pairing (Hugging Face's rotate_half, unpermuted). The converter writes
// attention.sliding_window (2047 for Phi-3-mini-4k, 0 for Phi-4) and tern
// honours it; llama.cpp currently switches Phi's window off (its PR 13676),
// which matters only past the window.
constinit const ArchInfo kPhi3{.name = "phi3",
                               .rope_layout = kernels::RopeLayout::NeoX,
                               .reads_sliding_window = true,
                               .reads_qkv_bias = false,
                               .block = llama_block,
                               .reads_long_rope = true,
                               .fused_qkv = true,
                               .fused_gate_up = true};

}  // namespace tern::archs
