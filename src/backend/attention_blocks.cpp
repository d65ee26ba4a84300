#include "backend/attention_blocks.h"

#include <algorithm>

#include "core/assert.h"

namespace tern::backend {

void build_attention_blocks(const kernels::AttentionShape& shape, const AttentionInput& in, const float* q,
                            float* out, std::vector<kernels::QueryBlock>& blocks) {
  const int64_t q_dim = static_cast<int64_t>(shape.n_head) * shape.head_dim;
  const KvPoolView& pool = in.pool;
  blocks.resize(in.spans.size());
  std::vector<int64_t> path;  // a block's tree tokens, leaf first
  for (size_t i = 0; i < in.spans.size(); ++i) {
    const QuerySpan& sp = in.spans[i];
    kernels::QueryBlock& qb = blocks[i];
    qb.q = q + sp.first_token * q_dim;
    qb.out = out + sp.first_token * q_dim;
    qb.n_q = sp.n_q;
    qb.pos0 = sp.pos0;
    qb.runs.clear();
    const SeqWindow win = in.windows.empty() ? SeqWindow{} : in.windows[static_cast<size_t>(sp.seq)];
    qb.n_sink = win.n_sink;
    qb.window = win.window;
    qb.kv_lo = win.kv_lo;
    qb.q_sink = win.n_sink > 0 ? in.q_sink + sp.first_token * q_dim : nullptr;
    TERN_ASSERT(win.n_sink == 0 || in.q_sink);
    const std::span<const int32_t> table = in.tables[static_cast<size_t>(sp.seq)];
    // Positions a query of this block may see: the sinks, then from the first
    // query's window start (older blocks may be freed: never read) to the last query.
    int32_t first = shape.sliding_window > 0 ? std::max(0, sp.pos0 - shape.sliding_window + 1) : 0;
    if (win.active()) first = std::max(first, win.lo(sp.pos0));
    int32_t end = sp.pos0 + sp.n_q;
    // In a tree, the block table serves positions up to the root; the tree
    // tokens on the way to the block's last token are read at their slots.
    path.clear();
    if (!in.parent.empty()) {
      for (int64_t t = sp.first_token + sp.n_q - 1; in.parent[static_cast<size_t>(t)] >= 0;
           t = in.parent[static_cast<size_t>(t)])
        path.push_back(t);
      if (!path.empty()) end = in.positions[static_cast<size_t>(path.back())];  // the root's position + 1
    }
    TERN_ASSERT(end <= static_cast<int32_t>(table.size()) * pool.block_size);
    auto add_runs = [&](int32_t from, int32_t to) {
      for (int32_t pos = from; pos < to;) {
        const int32_t block = table[static_cast<size_t>(pos / pool.block_size)];
        const int32_t offset = pos % pool.block_size;
        const int32_t n = std::min(to - pos, pool.block_size - offset);
        if (block < 0 && win.evicting()) {  // evicted by importance: a gap the kernels skip
          pos += n;
          continue;
        }
        TERN_ASSERT(block >= 0);
        qb.runs.push_back({pool.row(block, in.layer, 0, offset), pool.row(block, in.layer, 1, offset), pos, n});
        pos += n;
      }
    };
    add_runs(0, std::min({win.n_sink, first, end}));
    add_runs(first, end);
    // Root to leaf; neighbours in one block join one run.
    for (size_t j = path.size(); j-- > 0;) {
      const size_t t = static_cast<size_t>(path[j]);
      const int32_t pos = in.positions[t];
      if (pos < first) continue;
      const int64_t slot = in.slots[t];
      const int32_t block = static_cast<int32_t>(slot / pool.block_size), offset = static_cast<int32_t>(slot % pool.block_size);
      kernels::KvRun* last = qb.runs.empty() ? nullptr : &qb.runs.back();
      if (last && last->pos0 + last->n == pos &&
          static_cast<const std::byte*>(last->k) + static_cast<size_t>(last->n) * pool.row_bytes ==
              pool.row(block, in.layer, 0, offset) &&
          offset > 0) {
        ++last->n;
        continue;
      }
      qb.runs.push_back({pool.row(block, in.layer, 0, offset), pool.row(block, in.layer, 1, offset), pos, 1});
    }
  }
}

void add_attention_mass(const kernels::AttentionShape& shape, const AttentionInput& in,
                        std::span<const kernels::QueryBlock> blocks) {
  if (in.mass.empty()) return;
  for (size_t i = 0; i < in.spans.size(); ++i) {
    const KvMass& m = in.mass[static_cast<size_t>(in.spans[i].seq)];
    if (m.mass) kernels::attention_mass(shape, blocks[i], m.from, m.mass);
  }
}

}  // namespace tern::backend
