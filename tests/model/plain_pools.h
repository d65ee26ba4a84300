// KV pools for one sequence over plain memory, for model tests that build a
// ForwardInput by hand: block b of the table is pool block b.
#pragma once

#include <cstddef>
#include <vector>

#include "kv/kv_pool.h"
#include "model/model.h"

namespace tern::test {

struct PlainPools {
  std::vector<std::vector<std::byte>> memory;
  std::vector<KvPoolView> views;
  PlainPools(const Model& m, KvType type, int block_size, int n_blocks) {
    for (const KvCacheSpec& s : m.kv_specs(type)) {
      KvPoolView v;
      v.n_blocks = n_blocks;
      v.type = type;
      v.n_layer = s.n_layer;
      v.block_size = block_size;
      v.n_kv_head = s.n_kv_head;
      v.head_dim = s.head_dim;
      v.row_bytes = s.row_bytes();
      v.block_bytes = static_cast<size_t>(s.n_layer) * 2 * static_cast<size_t>(block_size) * v.row_bytes;
      memory.emplace_back(v.block_bytes * static_cast<size_t>(n_blocks));
      v.base = memory.back().data();
      views.push_back(v);
    }
  }
};

}  // namespace tern::test
