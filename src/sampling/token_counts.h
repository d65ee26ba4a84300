// sampling/token_counts.h — how often each token occurs in a penalty window.
//
// Contract: a small open-addressing map TokenId -> count (> 0). Entries whose
// count drops to zero are erased, so iteration visits exactly the distinct
// tokens of the window. Memory is O(distinct tokens), not O(n_vocab): a server
// holds one Sampler per running sequence, and a per-sequence [n_vocab] table
// would cost megabytes each at a 256k vocabulary.
//
// Layout: linear probing over a power-of-two table, erasure by backward shift
// (no tombstones, so lookups never degrade over a long generation).
//
//   keys_   [capacity]  TokenId, kEmpty where unused
//   counts_ [capacity]  int32, meaningful only where keys_ is not kEmpty
//
// Not thread-safe; owned by one Sampler.
#pragma once

#include <cstdint>
#include <vector>

#include "core/ids.h"

namespace tern {

class TokenCounts {
 public:
  TokenCounts() = default;

  // Adds one occurrence of `id` (id >= 0).
  void increment(TokenId id);
  // Removes one occurrence of `id`; the id must currently have count > 0.
  void decrement(TokenId id);
  // Count of `id`, 0 when absent.
  int32_t count(TokenId id) const;
  // Number of distinct tokens with count > 0.
  size_t size() const { return n_used_; }

  // Calls fn(id, count) once per distinct token, in table order.
  template <typename Fn>
  void for_each(Fn&& fn) const {
    for (size_t i = 0; i < keys_.size(); ++i) {
      if (keys_[i] != kEmpty) fn(keys_[i], counts_[i]);
    }
  }

 private:
  static constexpr TokenId kEmpty = -1;

  size_t home_slot(TokenId id) const;
  size_t find_slot(TokenId id) const;  // slot holding id, or the empty slot where it would go
  void grow();

  std::vector<TokenId> keys_;    // [capacity], capacity a power of two (or 0)
  std::vector<int32_t> counts_;  // [capacity]
  size_t n_used_ = 0;
  int shift_ = 32;               // 32 - log2(capacity), for Fibonacci hashing
};

}  // namespace tern
