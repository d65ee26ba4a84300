#include "spec/tree.h"

#include <algorithm>

namespace tern::spec {

size_t TokenTree::add_path(std::span<const TokenId> path, size_t max_nodes, int32_t under) {
  size_t added = 0;
  int32_t node = under;
  for (TokenId t : path) {
    int32_t next = -1;
    for (size_t j = static_cast<size_t>(node + 1); j < tokens.size(); ++j)
      if (parents[j] == node && tokens[j] == t) {
        next = static_cast<int32_t>(j);
        break;
      }
    if (next < 0) {
      if (tokens.size() >= max_nodes) break;
      tokens.push_back(t);
      parents.push_back(node);
      next = static_cast<int32_t>(tokens.size() - 1);
      ++added;
    }
    node = next;
  }
  return added;
}

TokenTree TokenTree::chain(std::span<const TokenId> path) {
  TokenTree t;
  t.tokens.assign(path.begin(), path.end());
  for (size_t i = 0; i < path.size(); ++i) t.parents.push_back(static_cast<int32_t>(i) - 1);
  return t;
}

std::vector<int32_t> TokenTree::children(int32_t node) const {
  std::vector<int32_t> out;
  for (size_t j = static_cast<size_t>(node + 1); j < tokens.size(); ++j)
    if (parents[j] == node) out.push_back(static_cast<int32_t>(j));
  return out;
}

int32_t TokenTree::depth() const {
  std::vector<int32_t> d(tokens.size(), 1);
  int32_t best = 0;
  for (size_t j = 0; j < tokens.size(); ++j) {
    if (parents[j] >= 0) d[j] = d[static_cast<size_t>(parents[j])] + 1;
    best = std::max(best, d[j]);
  }
  return best;
}

}  // namespace tern::spec
