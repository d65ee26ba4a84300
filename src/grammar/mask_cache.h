// grammar/mask_cache.h — token masks shared by every matcher of one grammar
// over one vocabulary.
//
// Why: a batch of requests under the same JSON Schema walks the same grammar
// states — the first character of a string, a digit of a number — and each
// state's mask is a walk of the whole vocabulary trie (milliseconds for a
// 32k vocabulary). A matcher caches masks for itself; with one of these
// shared between matchers, each state is walked once per batch, not once per
// request. Keys are stacks spelled out (Matcher::stack_key), not a matcher's
// own node ids, so any matcher of the grammar can find them.
//
// Bounded by bytes (oldest entries out); thread-safe. One cache belongs to
// one (grammar, vocabulary) pair: whoever creates it keeps them together.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace tern::grammar {

class MaskCache {
 public:
  using Bits = std::shared_ptr<const std::vector<uint64_t>>;
  static constexpr size_t kDefaultBytes = size_t{32} << 20;

  explicit MaskCache(size_t max_bytes = kDefaultBytes) : max_bytes_(max_bytes) {}

  // The mask stored under `key`, or null.
  Bits find(const std::string& key) const;
  // Stores a mask (a key already present keeps its first mask: both are the same).
  void insert(const std::string& key, Bits bits);
  size_t size() const;
  size_t hits() const;  // find() calls that found a mask

 private:
  mutable std::mutex mu_;
  std::unordered_map<std::string, Bits> map_;
  std::deque<std::string> order_;  // oldest first
  size_t bytes_ = 0;
  size_t max_bytes_;
  mutable size_t hits_ = 0;
};

}  // namespace tern::grammar
