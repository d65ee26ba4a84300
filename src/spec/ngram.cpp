#include "spec/ngram.h"

#include <algorithm>

namespace tern::spec {

std::vector<TokenId> propose_ngram(std::span<const TokenId> tokens, int k, const NgramConfig& c) {
  const size_t size = tokens.size();
  if (k <= 0) return {};
  for (int n = std::min<int>(c.n_max, static_cast<int>(size) - 1); n >= std::max(1, c.n_min); --n) {
    const std::span<const TokenId> key = tokens.subspan(size - static_cast<size_t>(n));
    // The most recent occurrence that is not the suffix itself.
    for (size_t i = size - static_cast<size_t>(n); i-- > 0;) {
      if (!std::equal(key.begin(), key.end(), tokens.begin() + static_cast<std::ptrdiff_t>(i))) continue;
      const size_t from = i + static_cast<size_t>(n);
      const size_t to = std::min(size, from + static_cast<size_t>(k));
      return std::vector<TokenId>(tokens.begin() + static_cast<std::ptrdiff_t>(from),
                                  tokens.begin() + static_cast<std::ptrdiff_t>(to));
    }
  }
  return {};
}

}  // namespace tern::spec
