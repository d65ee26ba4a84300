#include "backend/attention_blocks.h"

#include <algorithm>

#include "core/assert.h"

namespace tern::backend {

void build_attention_blocks(const kernels::AttentionShape& shape, const AttentionInput& in, const float* q,
                            float* out, std::vector<kernels::QueryBlock>& blocks) {
  const int64_t q_dim = static_cast<int64_t>(shape.n_head) * shape.head_dim;
  const KvPoolView& pool = in.pool;
  blocks.resize(in.spans.size());
  for (size_t i = 0; i < in.spans.size(); ++i) {
    const QuerySpan& sp = in.spans[i];
    kernels::QueryBlock& qb = blocks[i];
    qb.q = q + sp.first_token * q_dim;
    qb.out = out + sp.first_token * q_dim;
    qb.n_q = sp.n_q;
    qb.pos0 = sp.pos0;
    qb.runs.clear();
    const std::span<const int32_t> table = in.tables[static_cast<size_t>(sp.seq)];
    // Positions a query of this block may see: from the first query's window
    // start (a sliding window's older blocks may be freed: never read) to the last query.
    const int32_t first = shape.sliding_window > 0 ? std::max(0, sp.pos0 - shape.sliding_window + 1) : 0;
    const int32_t end = sp.pos0 + sp.n_q;
    TERN_ASSERT(end <= static_cast<int32_t>(table.size()) * pool.block_size);
    for (int32_t pos = first; pos < end;) {
      const int32_t block = table[static_cast<size_t>(pos / pool.block_size)];
      TERN_ASSERT(block >= 0);
      const int32_t offset = pos % pool.block_size;
      const int32_t n = std::min(end - pos, pool.block_size - offset);
      qb.runs.push_back({pool.row(block, in.layer, 0, offset), pool.row(block, in.layer, 1, offset), pos, n});
      pos += n;
    }
  }
}

}  // namespace tern::backend
