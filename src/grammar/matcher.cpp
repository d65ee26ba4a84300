#include "grammar/matcher.h"

#include <algorithm>

namespace tern::grammar {

TokenTrie::TokenTrie(const std::vector<std::string>& pieces) : n_tokens_(pieces.size()) {
  // Built from the pieces in sorted order (bytes compare unsigned, as std::string does): the
  // tokens below a node are a contiguous range, a node's own tokens (pieces ending there) lead
  // it, and its children are the runs of equal next bytes, so each node's edges are laid out
  // together before its subtree — no per-node maps to allocate.
  std::vector<int32_t> order;
  order.reserve(pieces.size());
  for (size_t id = 0; id < pieces.size(); ++id)
    if (!pieces[id].empty()) order.push_back(static_cast<int32_t>(id));
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return pieces[a] < pieces[b]; });
  const auto byte_at = [&](size_t i, size_t depth) { return static_cast<uint8_t>(pieces[order[i]][depth]); };
  // Builds node `n` over order[lo, hi), whose pieces share their first `depth` bytes.
  const auto build = [&](auto&& self, uint32_t n, size_t lo, size_t hi, size_t depth) -> void {
    size_t i = lo;
    nodes_[n].first_token = static_cast<uint32_t>(tokens_.size());
    for (; i < hi && pieces[order[i]].size() == depth; ++i) tokens_.push_back(order[i]);
    if (i > lo) max_len_ = std::max(max_len_, depth);
    nodes_[n].n_tokens = static_cast<uint32_t>(tokens_.size() - nodes_[n].first_token);
    std::vector<std::pair<size_t, size_t>> runs;  // [begin, end) of each next byte
    for (size_t j = i; j < hi;) {
      size_t k = j + 1;
      while (k < hi && byte_at(k, depth) == byte_at(j, depth)) ++k;
      runs.emplace_back(j, k);
      j = k;
    }
    nodes_[n].first_edge = static_cast<uint32_t>(edges_.size());
    nodes_[n].n_edges = static_cast<uint32_t>(runs.size());
    for (const auto& [j, k] : runs) edges_.push_back({byte_at(j, depth), 0});
    for (size_t e = 0; e < runs.size(); ++e) {
      const uint32_t child = static_cast<uint32_t>(nodes_.size());
      nodes_.emplace_back();
      edges_[nodes_[n].first_edge + e].child = child;
      self(self, child, runs[e].first, runs[e].second, depth + 1);
    }
  };
  nodes_.emplace_back();
  build(build, 0, 0, order.size(), 0);
}

Matcher::Matcher(std::shared_ptr<const Grammar> grammar) : g_(std::move(grammar)) {
  Set start;
  for (uint32_t a : g_->rules[g_->root].alts) expand(cont(a, 0, kEnd), start);
  std::sort(start.begin(), start.end());
  start.erase(std::unique(start.begin(), start.end()), start.end());
  history_.push_back(std::move(start));
}

uint32_t Matcher::cont(uint32_t alt, uint32_t idx, uint32_t parent, uint32_t count) {
  if (idx >= g_->alts[alt].size()) return parent;
  const Node key{alt, idx, parent, count};
  if (2 * (nodes_.size() + 1) > ids_.size()) {
    // Grow and re-insert every node.
    ids_.assign(std::max<size_t>(64, 2 * ids_.size()), kEnd);
    const size_t m = ids_.size() - 1;
    for (uint32_t id = 0; id < nodes_.size(); ++id) {
      size_t i = hash(nodes_[id]) & m;
      while (ids_[i] != kEnd) i = (i + 1) & m;
      ids_[i] = id;
    }
  }
  const size_t m = ids_.size() - 1;
  size_t i = hash(key) & m;
  for (; ids_[i] != kEnd; i = (i + 1) & m) {
    const Node& n = nodes_[ids_[i]];
    if (n.alt == alt && n.idx == idx && n.parent == parent && n.count == count) return ids_[i];
  }
  const uint32_t id = static_cast<uint32_t>(nodes_.size());
  nodes_.push_back(key);
  ids_[i] = id;
  return id;
}

void Matcher::expand(uint32_t c, Set& out) {
  if (auto it = expanded_.find(c); it != expanded_.end()) {
    out.insert(out.end(), it->second.begin(), it->second.end());
    return;
  }
  // Iterative (a chain of nullable completions can be as deep as the
  // nesting of the text), with a seen-list so shared continuations expand once.
  Set result;
  std::vector<uint32_t> seen;
  work_.assign(1, c);
  while (!work_.empty()) {
    const uint32_t x = work_.back();
    work_.pop_back();
    if (std::find(seen.begin(), seen.end(), x) != seen.end()) continue;
    seen.push_back(x);
    if (x == kEnd) {
      result.push_back(kEnd);
      continue;
    }
    const Node nd = nodes_[x];
    const Symbol& s = g_->alts[nd.alt][nd.idx];
    if (s.kind == Symbol::Kind::Bytes) {
      result.push_back(x);
      continue;
    }
    if (s.kind == Symbol::Kind::Repeat) {
      // Either stop here (min reached) or match one more copy and come back
      // with the count one higher. Past min with no max, every count behaves
      // the same, so it stays at min and the stack recurs.
      const Repeat& rep = g_->repeats[s.id];
      if (nd.count >= rep.min) work_.push_back(cont(nd.alt, nd.idx + 1, nd.parent));
      if (nd.count < rep.max) {
        const uint32_t next = rep.max == Repeat::kUnbounded && nd.count + 1 >= rep.min ? rep.min : nd.count + 1;
        const uint32_t back = cont(nd.alt, nd.idx, nd.parent, next);
        for (uint32_t a : g_->rules[rep.body].alts) work_.push_back(cont(a, 0, back));
      }
      continue;
    }
    const uint32_t after = cont(nd.alt, nd.idx + 1, nd.parent);
    for (uint32_t a : g_->rules[s.id].alts) work_.push_back(cont(a, 0, after));
  }
  std::sort(result.begin(), result.end());
  out.insert(out.end(), result.begin(), result.end());
  expanded_.emplace(c, std::move(result));
}

bool Matcher::step(const Set& from, uint8_t b, Set& next) {
  next.clear();
  for (uint32_t x : from) {
    if (x == kEnd) continue;
    const Node nd = nodes_[x];
    const Symbol& s = g_->alts[nd.alt][nd.idx];
    if (!g_->byte_sets[s.id].has(b)) continue;
    expand(cont(nd.alt, nd.idx + 1, nd.parent), next);
    if (next.size() > 4 * kMaxStacks) break;
  }
  std::sort(next.begin(), next.end());
  next.erase(std::unique(next.begin(), next.end()), next.end());
  if (next.size() > kMaxStacks) {
    overflowed_ = true;
    next.clear();
    return false;
  }
  return true;
}

bool Matcher::accept(std::string_view bytes) {
  Set cur = history_.back(), next;
  for (char c : bytes) {
    if (!step(cur, static_cast<uint8_t>(c), next) || next.empty()) return false;
    cur.swap(next);
  }
  history_.push_back(std::move(cur));
  return true;
}

void Matcher::rollback(size_t n) {
  n = std::min(n, n_accepted());
  history_.resize(history_.size() - n);
}

bool Matcher::can_end() const {
  const Set& s = history_.back();
  return !s.empty() && s.back() == kEnd;
}

bool Matcher::finished() const {
  const Set& s = history_.back();
  return s.size() == 1 && s[0] == kEnd;
}

bool Matcher::allows(std::string_view bytes) {
  Set cur = history_.back(), next;
  for (char c : bytes) {
    if (!step(cur, static_cast<uint8_t>(c), next) || next.empty()) return false;
    cur.swap(next);
  }
  return true;
}

void Matcher::walk_trie(const TokenTrie& trie, const Set& from, std::vector<uint64_t>& bits) {
  bits.assign((trie.n_tokens() + 63) / 64, 0);
  // Depth-first over the trie; sets[d] is the stack set after the first d
  // bytes of the current path.
  struct Frame {
    uint32_t node, next_edge;
  };
  std::vector<Set> sets{from};
  std::vector<Frame> path{{0, 0}};
  while (!path.empty()) {
    Frame& f = path.back();
    const TokenTrie::Node& nd = trie.node(f.node);
    if (f.next_edge == nd.n_edges) {
      path.pop_back();
      sets.pop_back();
      continue;
    }
    const TokenTrie::Edge& e = trie.edge(nd.first_edge + f.next_edge++);
    Set next;
    if (!step(sets.back(), e.byte, next) || next.empty()) continue;
    const TokenTrie::Node& child = trie.node(e.child);
    for (uint32_t t = 0; t < child.n_tokens; ++t) {
      const auto id = static_cast<size_t>(trie.token(child.first_token + t));
      bits[id >> 6] |= uint64_t{1} << (id & 63);
    }
    sets.push_back(std::move(next));
    path.push_back({e.child, 0});
  }
}

uint32_t Matcher::canonical(uint32_t x, uint32_t max_len) {
  if (g_->repeats.empty()) return x;
  // The chain from x up to the first stack already known (or the bottom).
  std::vector<uint32_t> chain;
  uint32_t base = kEnd;
  for (uint32_t y = x; y != kEnd; y = nodes_[y].parent) {
    if (auto it = canonical_.find(y); it != canonical_.end()) {
      base = it->second;
      break;
    }
    chain.push_back(y);
  }
  // Rebuilt bottom-up over the canonical parent.
  for (size_t i = chain.size(); i-- > 0;) {
    const Node nd = nodes_[chain[i]];
    const Symbol& s = g_->alts[nd.alt][nd.idx];
    uint32_t count = nd.count;
    if (s.kind == Symbol::Kind::Repeat) {
      const Repeat& rep = g_->repeats[s.id];
      const uint64_t far = uint64_t{max_len} + 1;  // a token cannot reach a bound this far off
      if (count + far <= rep.min) count = static_cast<uint32_t>(rep.min - far);
      else if (count >= rep.min && (rep.max == Repeat::kUnbounded || rep.max - count >= far)) count = rep.min;
    }
    base = cont(nd.alt, nd.idx, base, count);
    canonical_.emplace(chain[i], base);
  }
  return base;
}

std::string Matcher::stack_key(uint32_t x) const {
  std::string key;
  for (uint32_t y = x; y != kEnd; y = nodes_[y].parent) {
    const Node& nd = nodes_[y];
    const uint32_t parts[3] = {nd.alt, nd.idx, nd.count};
    key.append(reinterpret_cast<const char*>(parts), sizeof(parts));
  }
  return key;
}

const std::vector<uint64_t>& Matcher::stack_mask(const TokenTrie& trie, uint32_t x) {
  x = canonical(x, static_cast<uint32_t>(trie.max_len()));
  auto it = mask_cache_.find(x);
  if (it != mask_cache_.end()) {
    mask_order_.erase(std::find(mask_order_.begin(), mask_order_.end(), x));
    mask_order_.push_back(x);
    return *it->second;
  }
  if (mask_order_.size() >= kMaskCacheEntries) {
    mask_cache_.erase(mask_order_.front());
    mask_order_.erase(mask_order_.begin());
  }
  MaskCache::Bits bits;
  std::string key;
  if (shared_) {
    key = stack_key(x);
    bits = shared_->find(key);
  }
  if (!bits) {
    auto walked = std::make_shared<std::vector<uint64_t>>();
    walk_trie(trie, Set{x}, *walked);
    bits = std::move(walked);
    if (shared_) shared_->insert(key, bits);
  }
  mask_order_.push_back(x);
  return *mask_cache_.emplace(x, std::move(bits)).first->second;
}

const std::vector<uint64_t>& Matcher::mask_bits(const TokenTrie& trie) {
  if (cached_trie_ != &trie) {
    mask_cache_.clear();
    mask_order_.clear();
    canonical_.clear();
    cached_trie_ = &trie;
  }
  const Set& cur = history_.back();
  const size_t n_stacks = cur.size() - (can_end() ? 1 : 0);
  std::vector<uint64_t>& bits = bits_;
  if (n_stacks == 1) return stack_mask(trie, cur[0]);  // the common case: no OR, no copy
  bits.assign((trie.n_tokens() + 63) / 64, 0);
  if (n_stacks <= kMaxCachedStacks) {
    for (uint32_t x : cur) {
      if (x == kEnd) continue;
      const std::vector<uint64_t>& m = stack_mask(trie, x);
      for (size_t w = 0; w < bits.size(); ++w) bits[w] |= m[w];
    }
  } else {
    walk_trie(trie, cur, bits);
  }
  return bits;
}

void Matcher::mask(const TokenTrie& trie, std::vector<uint8_t>& allowed) {
  const std::vector<uint64_t>& bits = mask_bits(trie);
  allowed.resize(trie.n_tokens());
  for (size_t t = 0; t < allowed.size(); ++t) allowed[t] = static_cast<uint8_t>((bits[t >> 6] >> (t & 63)) & 1);
}

}  // namespace tern::grammar
