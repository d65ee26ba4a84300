// backend/attention_blocks.h — one layer's attention input (query spans and
// block tables) turned into the kernels' query blocks, each with the runs of
// positions it may attend to (one run per KV block), for host backends.
#pragma once

#include <span>
#include <vector>

#include "backend/backend.h"

namespace tern::backend {

// q, out: [n_tokens][n_head][head_dim]. Blocks are reused (cleared, refilled).
void build_attention_blocks(const kernels::AttentionShape& shape, const AttentionInput& in, const float* q,
                            float* out, std::vector<kernels::QueryBlock>& blocks);

// in.mass: each sequence's attention mass added from its blocks (built by the call above).
void add_attention_mass(const kernels::AttentionShape& shape, const AttentionInput& in,
                        std::span<const kernels::QueryBlock> blocks);

}  // namespace tern::backend
