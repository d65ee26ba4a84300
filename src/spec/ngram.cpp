#include "spec/ngram.h"

#include <algorithm>

namespace tern::spec {

std::vector<std::vector<TokenId>> propose_ngram_paths(std::span<const TokenId> tokens, int k, int n_paths,
                                                      const NgramConfig& c) {
  std::vector<std::vector<TokenId>> out;
  const size_t size = tokens.size();
  if (k <= 0 || n_paths <= 0) return out;
  for (int n = std::min<int>(c.n_max, static_cast<int>(size) - 1); n >= std::max(1, c.n_min); --n) {
    const std::span<const TokenId> key = tokens.subspan(size - static_cast<size_t>(n));
    // Occurrences other than the suffix itself, most recent first.
    for (size_t i = size - static_cast<size_t>(n); i-- > 0;) {
      if (!std::equal(key.begin(), key.end(), tokens.begin() + static_cast<std::ptrdiff_t>(i))) continue;
      const size_t from = i + static_cast<size_t>(n);
      const size_t to = std::min(size, from + static_cast<size_t>(k));
      std::vector<TokenId> path(tokens.begin() + static_cast<std::ptrdiff_t>(from),
                                tokens.begin() + static_cast<std::ptrdiff_t>(to));
      // Nothing new when it starts another path (or another path starts it).
      const bool seen = std::any_of(out.begin(), out.end(), [&](const std::vector<TokenId>& p) {
        const size_t m = std::min(p.size(), path.size());
        return std::equal(p.begin(), p.begin() + static_cast<std::ptrdiff_t>(m), path.begin());
      });
      if (seen) continue;
      out.push_back(std::move(path));
      if (static_cast<int>(out.size()) >= n_paths) return out;
    }
  }
  return out;
}

std::vector<TokenId> propose_ngram(std::span<const TokenId> tokens, int k, const NgramConfig& c) {
  auto paths = propose_ngram_paths(tokens, k, 1, c);
  return paths.empty() ? std::vector<TokenId>() : std::move(paths.front());
}

}  // namespace tern::spec
