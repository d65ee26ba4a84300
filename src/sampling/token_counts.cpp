#include "sampling/token_counts.h"

#include "core/assert.h"

namespace tern {

namespace {
constexpr size_t kMinCapacity = 16;
}

size_t TokenCounts::home_slot(TokenId id) const {
  // Fibonacci hashing: token ids are dense small integers, so multiplying by
  // 2^32/phi and keeping the top bits spreads neighbours across the table.
  const uint32_t h = static_cast<uint32_t>(id) * 2654435769u;
  return shift_ >= 32 ? 0 : static_cast<size_t>(h >> shift_);
}

size_t TokenCounts::find_slot(TokenId id) const {
  const size_t mask = keys_.size() - 1;
  size_t i = home_slot(id);
  while (keys_[i] != kEmpty && keys_[i] != id) i = (i + 1) & mask;
  return i;
}

void TokenCounts::grow() {
  std::vector<TokenId> old_keys = std::move(keys_);
  std::vector<int32_t> old_counts = std::move(counts_);
  const size_t capacity = old_keys.empty() ? kMinCapacity : old_keys.size() * 2;
  keys_.assign(capacity, kEmpty);
  counts_.assign(capacity, 0);
  shift_ = 32;
  for (size_t c = capacity; c > 1; c >>= 1) --shift_;
  for (size_t i = 0; i < old_keys.size(); ++i) {
    if (old_keys[i] == kEmpty) continue;
    const size_t slot = find_slot(old_keys[i]);
    keys_[slot] = old_keys[i];
    counts_[slot] = old_counts[i];
  }
}

void TokenCounts::increment(TokenId id) {
  TERN_ASSERT(id >= 0);
  // Keep the load factor at most 1/2 so probe runs stay short.
  if ((n_used_ + 1) * 2 > keys_.size()) grow();
  const size_t slot = find_slot(id);
  if (keys_[slot] == kEmpty) {
    keys_[slot] = id;
    counts_[slot] = 0;
    ++n_used_;
  }
  ++counts_[slot];
}

int32_t TokenCounts::count(TokenId id) const {
  if (keys_.empty() || id < 0) return 0;
  const size_t slot = find_slot(id);
  return keys_[slot] == kEmpty ? 0 : counts_[slot];
}

void TokenCounts::decrement(TokenId id) {
  TERN_ASSERT_MSG(!keys_.empty(), "decrement of a token that was never counted");
  size_t hole = find_slot(id);
  TERN_ASSERT_MSG(keys_[hole] == id, "decrement of a token that was never counted");
  if (--counts_[hole] > 0) return;

  // Backward-shift deletion: walk the probe run after the hole and move back
  // every entry whose home slot does not lie cyclically in (hole, j]; such an
  // entry would otherwise become unreachable once the hole is empty.
  const size_t mask = keys_.size() - 1;
  size_t j = hole;
  while (true) {
    j = (j + 1) & mask;
    if (keys_[j] == kEmpty) break;
    const size_t home = home_slot(keys_[j]);
    const bool stays = hole <= j ? (hole < home && home <= j) : (hole < home || home <= j);
    if (stays) continue;
    keys_[hole] = keys_[j];
    counts_[hole] = counts_[j];
    hole = j;
  }
  keys_[hole] = kEmpty;
  --n_used_;
}

}  // namespace tern
