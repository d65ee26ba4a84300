// qwen2: the Llama block with q/k/v biases (Qwen1.5, Qwen2, Qwen2.5).
#include "model/archs/llama.h"

namespace tern::archs {

extern const ArchInfo kQwen2;
// qwen2 files keep Hugging Face's half-split (NeoX) RoPE pairing: the
// converter does not permute Q and K rows as it does for llama.
constinit const ArchInfo kQwen2{"qwen2", kernels::RopeLayout::NeoX, /*reads_sliding_window=*/true,
                                /*reads_qkv_bias=*/true, llama_block};

}  // namespace tern::archs
