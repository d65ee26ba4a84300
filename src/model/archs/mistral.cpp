// mistral: the Llama block; Mistral 7B v0.1 attends over a sliding window
// (attention.sliding_window).
#include "model/archs/llama.h"

namespace tern::archs {

extern const ArchInfo kMistral;
// Converted like llama: Q and K rows permuted for adjacent-pair (Normal) RoPE.
constinit const ArchInfo kMistral{"mistral", kernels::RopeLayout::Normal, /*reads_sliding_window=*/true,
                                  /*reads_qkv_bias=*/true, llama_block};

}  // namespace tern::archs
