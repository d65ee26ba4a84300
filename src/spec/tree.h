// spec/tree.h — a token tree of proposals: several continuations of one
// sequence merged where they share a prefix, verified in one pass
// (engine/model_runner.h). Nodes are stored parent first, the first
// continuation added first, so that the first path is a chain at the front
// and any prefix of the nodes is itself a tree (what the scheduler keeps
// when the step's budget is short).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/ids.h"

namespace tern::spec {

struct TokenTree {
  std::vector<TokenId> tokens;
  std::vector<int32_t> parents;  // index of each node's parent; -1: the sequence's last token

  size_t size() const { return tokens.size(); }
  bool empty() const { return tokens.empty(); }
  // Adds `path` below `under` (-1: the root), sharing the nodes that exist,
  // as far as max_nodes allows. Returns the nodes added.
  size_t add_path(std::span<const TokenId> path, size_t max_nodes, int32_t under = -1);
  // A chain of the tokens (parents -1, 0, 1, ...).
  static TokenTree chain(std::span<const TokenId> path);
  // Children of `node` (-1: the root), in order.
  std::vector<int32_t> children(int32_t node) const;
  int32_t depth() const;  // nodes on the longest path
};

}  // namespace tern::spec
