// spec/suffix_cache.h — prompt lookup across requests: the token sequences
// of recently finished requests, indexed by their n-grams, so a request can
// be proposed what another one produced after the same few tokens (agent
// loops, templated and repeated traffic). Bounded: the oldest sequences go
// once the cache holds max_tokens tokens; index entries pointing at them are
// recognised as stale and dropped on lookup.
#pragma once

#include <cstdint>
#include <deque>
#include <span>
#include <unordered_map>
#include <vector>

#include "core/ids.h"

namespace tern::spec {

class SuffixCache {
 public:
  explicit SuffixCache(int64_t max_tokens = 1 << 20, int n = 3) : max_tokens_(max_tokens), n_(n) {}

  // A finished sequence (prompt and output) joins the cache.
  void add(std::span<const TokenId> tokens);
  // Up to k tokens that followed the most recent cached occurrence of the
  // last n tokens of `tokens`; empty when there is none.
  std::vector<TokenId> propose(std::span<const TokenId> tokens, int k) const;

  int64_t n_tokens() const { return n_tokens_; }
  size_t n_sequences() const { return seqs_.size(); }

 private:
  struct Where {
    uint64_t seq;  // serial number of the sequence
    uint32_t end;  // position just past the n-gram
  };
  uint64_t key(std::span<const TokenId> ngram) const;

  int64_t max_tokens_;
  int n_;
  std::deque<std::vector<TokenId>> seqs_;  // seqs_[i] has serial first_serial_ + i
  uint64_t first_serial_ = 0;
  int64_t n_tokens_ = 0;
  std::unordered_map<uint64_t, Where> index_;  // n-gram hash -> latest occurrence
};

}  // namespace tern::spec
