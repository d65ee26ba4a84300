// kv/cache_spec.h — what a group of layers keeps per sequence, as the KV
// manager must know it to allocate and free (the model declares one spec per
// group of layers that keep the same kind of state; see Model::kv_specs()).
//
//   FullAttention   every position's K/V, for the sequence's whole life
//   SlidingWindow   only the last `window` positions are ever read: blocks
//                   wholly before the window are freed while it runs
//   Recurrent       a fixed-size state per sequence (state-space layers):
//                   one slot, whatever the length (kept by the model's own
//                   state pool; the KV manager reserves the slot)
#pragma once

#include <cstdint>

#include "kv/kv_pool.h"

namespace tern {

enum class CacheKind : uint8_t { FullAttention, SlidingWindow, Recurrent };
const char* cache_kind_name(CacheKind k);

struct KvCacheSpec {
  CacheKind kind = CacheKind::FullAttention;
  int32_t window = 0;  // SlidingWindow: positions a token may attend to (itself included)
  int n_layer = 0;     // layers in this group (its pool holds all of them)
  int n_kv_head = 0;
  int head_dim = 0;
  KvType type = KvType::F16;
  int64_t state_floats = 0;  // Recurrent: one layer's state of one sequence (F32, whatever `type`)

  // Recurrent: the bytes of one layer's state (a pool "row"); else one position's K or V.
  size_t row_bytes() const {
    return kind == CacheKind::Recurrent ? static_cast<size_t>(state_floats) * sizeof(float)
                                        : kv_row_bytes(type, n_kv_head, head_dim);
  }
  // Blocks a sequence of n positions needs resident (the window's, for a sliding window).
  bool frees_old_blocks() const { return kind == CacheKind::SlidingWindow && window > 0; }
};

}  // namespace tern
