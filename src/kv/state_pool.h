// kv/state_pool.h — the memory of a recurrent group's states (state-space
// layers, kv/cache_spec.h): a fixed number of slots, each every layer's
// state of one sequence, F32. A slot's contents mean nothing until the
// forward pass starts its sequence at position 0 (it zeroes the state then),
// so a freed slot is handed to the next sequence as it is.
#pragma once

#include <cstddef>
#include <cstdlib>
#include <memory>

#include "core/status.h"
#include "kv/cache_spec.h"
#include "kv/kv_pool.h"

namespace tern {

class StatePool {
 public:
  // IoError naming the size when the slots cannot be allocated.
  static Result<std::unique_ptr<StatePool>> create(const KvCacheSpec& spec, int n_slots);

  KvPoolView view() const { return view_; }
  size_t slot_bytes() const { return view_.block_bytes; }
  size_t bytes() const { return slot_bytes() * static_cast<size_t>(view_.n_blocks); }

 private:
  struct Free {
    void operator()(void* p) const { std::free(p); }
  };
  std::unique_ptr<std::byte, Free> mem_;  // calloc: pages are touched as slots are first used
  KvPoolView view_;
};

}  // namespace tern
