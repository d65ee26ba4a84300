#include "spec/suffix_cache.h"

#include <algorithm>

namespace tern::spec {

uint64_t SuffixCache::key(std::span<const TokenId> ngram) const {
  uint64_t h = 0xCBF29CE484222325ull;  // FNV-1a over the ids
  for (TokenId t : ngram) h = (h ^ static_cast<uint32_t>(t)) * 0x100000001B3ull;
  return h;
}

void SuffixCache::add(std::span<const TokenId> tokens) {
  if (static_cast<int64_t>(tokens.size()) > max_tokens_ || tokens.size() <= static_cast<size_t>(n_)) return;
  const uint64_t serial = first_serial_ + seqs_.size();
  seqs_.emplace_back(tokens.begin(), tokens.end());
  n_tokens_ += static_cast<int64_t>(tokens.size());
  // Every n-gram but the last (nothing follows it) points here now.
  for (size_t end = static_cast<size_t>(n_); end < tokens.size(); ++end)
    index_[key(tokens.subspan(end - static_cast<size_t>(n_), static_cast<size_t>(n_)))] = {serial, static_cast<uint32_t>(end)};
  while (n_tokens_ > max_tokens_) {
    n_tokens_ -= static_cast<int64_t>(seqs_.front().size());
    seqs_.pop_front();
    ++first_serial_;
  }
  // Stale entries are left to lookups; the index is rebuilt when it outgrows the cache.
  if (index_.size() > static_cast<size_t>(2 * max_tokens_)) {
    std::erase_if(index_, [&](const auto& kv) { return kv.second.seq < first_serial_; });
  }
}

std::vector<TokenId> SuffixCache::propose(std::span<const TokenId> tokens, int k) const {
  if (k <= 0 || tokens.size() < static_cast<size_t>(n_)) return {};
  const std::span<const TokenId> tail = tokens.subspan(tokens.size() - static_cast<size_t>(n_));
  auto it = index_.find(key(tail));
  if (it == index_.end() || it->second.seq < first_serial_) return {};
  const std::vector<TokenId>& s = seqs_[static_cast<size_t>(it->second.seq - first_serial_)];
  const size_t end = it->second.end;
  // The hash may collide: the stored n-gram must be the same tokens.
  if (!std::equal(tail.begin(), tail.end(), s.begin() + static_cast<std::ptrdiff_t>(end - static_cast<size_t>(n_))))
    return {};
  const size_t to = std::min(s.size(), end + static_cast<size_t>(k));
  return std::vector<TokenId>(s.begin() + static_cast<std::ptrdiff_t>(end), s.begin() + static_cast<std::ptrdiff_t>(to));
}

}  // namespace tern::spec
