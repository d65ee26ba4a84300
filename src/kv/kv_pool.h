// kv/kv_pool.h — the memory KV blocks live in, and how a block is laid out.
//
// A block holds block_size positions of every layer of its pool, keys and
// values, so copy-on-write and swap move one contiguous span:
//
//   pool: [block][layer][K|V][block_size][n_kv_head][head slice]   (core/kv_format.h)
//
// A slot is block * block_size + offset: the position's place in the pool.
// KvPoolView is the plain description the forward pass and the backends use;
// KvPool owns the memory (reserved up front, touched as blocks are written).
//
// A recurrent group's pool (state-space layers, kv/cache_spec.h) is a state
// pool instead: n_blocks state slots, each every layer's state in turn
// (row_bytes each, F32), block_size 1 and no heads; state() addresses it.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/kv_format.h"

namespace tern {

// KvType: tern/config.h; how a row is encoded and its size: core/kv_format.h.

struct KvPoolView {
  std::byte* base = nullptr;  // [n_blocks][n_layer][2][block_size][n_kv_head][head_dim]
  int32_t n_blocks = 0;
  KvType type = KvType::F16;
  int n_layer = 0;
  int block_size = 0;
  int n_kv_head = 0;
  int head_dim = 0;
  size_t row_bytes = 0;    // kv_row_bytes(type, n_kv_head, head_dim)
  size_t block_bytes = 0;  // n_layer * 2 * block_size * row_bytes

  // kv = 0 keys, 1 values.
  std::byte* row(int64_t block, int layer, int kv, int32_t offset) const {
    return base + static_cast<size_t>(block) * block_bytes +
           ((static_cast<size_t>(layer) * 2 + static_cast<size_t>(kv)) * static_cast<size_t>(block_size) +
            static_cast<size_t>(offset)) *
               row_bytes;
  }
  std::byte* slot_row(int64_t slot, int layer, int kv) const {
    return row(slot / block_size, layer, kv, static_cast<int32_t>(slot % block_size));
  }
  // A state pool's layer state of slot `slot`.
  float* state(int64_t slot, int layer) const {
    return reinterpret_cast<float*>(base + static_cast<size_t>(slot) * block_bytes +
                                    static_cast<size_t>(layer) * row_bytes);
  }
};

}  // namespace tern
