#include "kv/block_manager.h"

#include <algorithm>
#include <cstdio>

#include "core/assert.h"

namespace tern {
namespace {

constexpr uint64_t kGolden = 0x9e3779b97f4a7c15ull;  // 2^64 / phi: an odd constant with no structure

// Bijective 64-bit mixer (xor-shift / multiply rounds, splitmix64's finaliser
// shape): every input bit flips about half of the output bits.
uint64_t mix64(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  x ^= x >> 31;
  return x;
}

std::string block_name(int32_t b) { return "b" + std::to_string(b); }

}  // namespace

BlockHash hash_block_tokens(BlockHash parent, uint64_t salt, std::span<const TokenId> tokens) {
  // Each step h = mix(h ^ word) is a bijection of h for a fixed word, so two
  // inputs that differ in one word cannot meet again in the same state.
  uint64_t h = mix64(parent.value ^ kGolden);
  h = mix64(h ^ mix64(salt + kGolden));
  size_t i = 0;
  for (; i + 1 < tokens.size(); i += 2) {
    const uint64_t w =
        static_cast<uint32_t>(tokens[i]) | static_cast<uint64_t>(static_cast<uint32_t>(tokens[i + 1])) << 32;
    h = mix64(h ^ w);
  }
  if (i < tokens.size()) h = mix64(h ^ static_cast<uint32_t>(tokens[i]) ^ (kGolden << 1));
  return BlockHash(mix64(h ^ tokens.size()));
}

BlockManager::BlockManager(int n_blocks, int block_size, bool prefix_caching, BlockHashFn hash_fn)
    : block_size_(block_size), prefix_caching_(prefix_caching), hash_fn_(hash_fn), blocks_(n_blocks) {
  TERN_ASSERT(n_blocks >= 0 && block_size >= 1 && hash_fn != nullptr);
  // Stack order: block 0 is taken first, then 1, 2, ... (deterministic ids for tests).
  free_.reserve(n_blocks);
  for (int32_t b = n_blocks - 1; b >= 0; --b) {
    free_.push_back(b);
    blocks_[b].in_free = true;
  }
}

int BlockManager::block_size() const { return block_size_; }
int BlockManager::n_blocks_total() const { return static_cast<int>(blocks_.size()); }
int BlockManager::n_blocks_free() const { return static_cast<int>(free_.size()) + n_lru_; }
int BlockManager::n_blocks_cached() const { return static_cast<int>(index_.size()); }
int BlockManager::n_blocks_used() const { return n_used_; }
const BlockManagerStats& BlockManager::stats() const { return stats_; }

std::span<const BlockId> BlockManager::block_table(SeqId seq) const {
  auto it = tables_.find(seq);
  if (it == tables_.end()) return {};
  return it->second;
}

int BlockManager::refcount(BlockId b) const {
  TERN_ASSERT(b.value >= 0 && b.value < n_blocks_total());
  return blocks_[b.value].refcount;
}

// ---- prefix index ----------------------------------------------------------

bool BlockManager::is_orphan(const Block& b) const {
  if (b.parent == kNone) return false;
  const Block& p = blocks_[b.parent];
  return !p.cached || p.gen != b.parent_gen;
}

int32_t BlockManager::match_block(BlockHash hash, uint64_t salt, std::span<const TokenId> tokens,
                                  int32_t parent) const {
  auto it = index_.find(hash.value);
  if (it == index_.end()) return kNone;
  const Block& b = blocks_[it->second];
  if (b.salt != salt || b.parent != parent ||
      !std::equal(tokens.begin(), tokens.end(), b.tokens.begin(), b.tokens.end()))
    return kNone;
  if (parent != kNone && blocks_[parent].gen != b.parent_gen) return kNone;  // parent evicted, id reused
  return it->second;
}

std::vector<int32_t> BlockManager::lookup_prefix(std::span<const TokenId> tokens, uint64_t salt,
                                                 int max_blocks) const {
  std::vector<int32_t> found;
  if (!prefix_caching_) return found;
  BlockHash h(0);
  int32_t parent = kNone;
  for (int i = 0; i < max_blocks; ++i) {
    const auto block_tokens = tokens.subspan(static_cast<size_t>(i) * block_size_, block_size_);
    h = hash_fn_(h, salt, block_tokens);
    const int32_t b = match_block(h, salt, block_tokens, parent);
    if (b == kNone) break;
    found.push_back(b);
    parent = b;
  }
  return found;
}

int32_t BlockManager::find_cached_prefix(std::span<const TokenId> tokens, uint64_t salt) const {
  if (tokens.empty()) return 0;
  // (size - 1) / bs full blocks leave at least the last token to compute.
  const int max_blocks = static_cast<int>((tokens.size() - 1) / block_size_);
  return static_cast<int32_t>(lookup_prefix(tokens, salt, max_blocks).size()) * block_size_;
}

void BlockManager::register_block(int32_t b, BlockHash hash, uint64_t salt, std::span<const TokenId> tokens,
                                  int32_t parent) {
  Block& blk = blocks_[b];
  TERN_ASSERT(!blk.cached && blk.refcount > 0);
  blk.cached = true;
  blk.hash = hash;
  blk.salt = salt;
  blk.gen = next_gen_++;
  blk.parent = parent;
  blk.parent_gen = parent == kNone ? 0 : blocks_[parent].gen;
  blk.tokens.assign(tokens.begin(), tokens.end());
  index_.emplace(hash.value, b);
}

void BlockManager::unregister_block(int32_t b) {
  Block& blk = blocks_[b];
  TERN_ASSERT(blk.cached);
  index_.erase(blk.hash.value);
  blk.cached = false;
  blk.gen = 0;
  blk.parent = kNone;
  blk.tokens.clear();
  blk.tokens.shrink_to_fit();
  if (blk.refcount == 0) {  // was evictable; now plain free
    lru_remove(b);
    free_.push_back(b);
    blk.in_free = true;
  }
}

void BlockManager::cache_blocks(SeqId seq, std::span<const TokenId> tokens, int32_t n_tokens, uint64_t salt) {
  if (!prefix_caching_) return;
  auto it = tables_.find(seq);
  if (it == tables_.end()) return;
  TERN_ASSERT(n_tokens >= 0 && static_cast<size_t>(n_tokens) <= tokens.size());
  const std::vector<BlockId>& table = it->second;
  const int n_full = std::min(static_cast<int>(n_tokens / block_size_), static_cast<int>(table.size()));
  BlockHash h(0);
  int32_t prev = kNone;  // the registered block standing for seq's content up to block i - 1
  for (int i = 0; i < n_full; ++i) {
    const auto block_tokens = tokens.subspan(static_cast<size_t>(i) * block_size_, block_size_);
    h = hash_fn_(h, salt, block_tokens);
    const int32_t b = table[i].value;
    if (b == kNoBlock.value) {
      // Released behind a window: the chain goes on through its cached copy, if any is left.
      prev = match_block(h, salt, block_tokens, prev);
      if (prev == kNone) return;
      continue;
    }
    Block& blk = blocks_[b];
    if (blk.cached) {
      // Already registered (computed by seq or attached from the cache).
      if (blk.hash != h || blk.salt != salt) return;  // registered under other tokens: caller inconsistency
      // Its content follows seq's content, and prev holds exactly that content:
      // relinking keeps it findable if its old parent was evicted meanwhile.
      blk.parent = prev;
      blk.parent_gen = prev == kNone ? 0 : blocks_[prev].gen;
      prev = b;
      continue;
    }
    if (const int32_t dup = match_block(h, salt, block_tokens, prev); dup != kNone) {
      prev = dup;  // same content already registered: seq's copy stays private
      continue;
    }
    if (auto hit = index_.find(h.value); hit != index_.end()) {
      // The hash is held by other content. An orphan (parent gone) can never be
      // matched again, so it yields its place; a live collision ends the chain.
      if (!is_orphan(blocks_[hit->second])) return;
      unregister_block(hit->second);
    }
    register_block(b, h, salt, block_tokens, prev);
    prev = b;
  }
}

// ---- allocation -----------------------------------------------------------

void BlockManager::lru_push_back(int32_t b) {
  Block& blk = blocks_[b];
  blk.lru_prev = lru_tail_;
  blk.lru_next = kNone;
  if (lru_tail_ != kNone)
    blocks_[lru_tail_].lru_next = b;
  else
    lru_head_ = b;
  lru_tail_ = b;
  ++n_lru_;
}

void BlockManager::lru_remove(int32_t b) {
  Block& blk = blocks_[b];
  if (blk.lru_prev != kNone)
    blocks_[blk.lru_prev].lru_next = blk.lru_next;
  else
    lru_head_ = blk.lru_next;
  if (blk.lru_next != kNone)
    blocks_[blk.lru_next].lru_prev = blk.lru_prev;
  else
    lru_tail_ = blk.lru_prev;
  blk.lru_prev = blk.lru_next = kNone;
  --n_lru_;
}

int32_t BlockManager::take_block() {
  int32_t b = kNone;
  if (!free_.empty()) {
    b = free_.back();
    free_.pop_back();
    blocks_[b].in_free = false;
  } else {
    TERN_ASSERT_MSG(lru_head_ != kNone, "take_block: no free or evictable block (caller must check)");
    b = lru_head_;
    unregister_block(b);  // moves it to free_
    free_.pop_back();
    blocks_[b].in_free = false;
    ++stats_.n_evictions;
  }
  blocks_[b].refcount = 1;
  ++n_used_;
  return b;
}

void BlockManager::release_block(int32_t b) {
  Block& blk = blocks_[b];
  TERN_ASSERT(blk.refcount > 0);
  if (--blk.refcount > 0) return;
  --n_used_;
  if (blk.cached && is_orphan(blk)) {
    // Its parent was evicted: no lookup can reach it again, so keeping it
    // would only push reachable blocks out of the LRU.
    lru_push_back(b);
    unregister_block(b);
  } else if (blk.cached) {
    lru_push_back(b);
  } else {
    free_.push_back(b);
    blk.in_free = true;
  }
}

int BlockManager::n_blocks_needed(SeqId seq, int32_t n_tokens, std::span<const TokenId> tokens,
                                  int32_t n_cached, uint64_t salt) const {
  const auto table = block_table(seq);
  int n_have = static_cast<int>(table.size());
  int n_evictable = 0;
  if (table.empty() && n_cached > 0) {
    const auto attached = lookup_prefix(tokens, salt, n_cached / block_size_);
    n_have = static_cast<int>(attached.size());
    for (int32_t b : attached) n_evictable += blocks_[b].refcount == 0 ? 1 : 0;
  }
  return std::max(0, n_blocks_for(n_tokens) - n_have) + n_evictable;
}

bool BlockManager::allocate(SeqId seq, int32_t n_tokens, std::span<const TokenId> tokens, int32_t n_cached,
                            uint64_t salt) {
  TERN_ASSERT(n_tokens >= 0 && n_cached >= 0);
  const bool fresh = block_table(seq).empty();
  std::vector<int32_t> attached;
  if (fresh && n_cached > 0) {
    TERN_ASSERT(n_cached % block_size_ == 0 && static_cast<size_t>(n_cached) <= tokens.size() &&
                n_cached <= n_tokens);
    attached = lookup_prefix(tokens, salt, n_cached / block_size_);
    if (static_cast<int32_t>(attached.size()) * block_size_ != n_cached)
      return false;  // evicted since the lookup
  }
  if (n_blocks_needed(seq, n_tokens, tokens, n_cached, salt) > n_blocks_free()) return false;

  if (fresh && !tokens.empty() && prefix_caching_) {
    stats_.n_lookup_tokens += static_cast<int64_t>(tokens.size());
    stats_.n_hit_tokens += n_cached;
  }
  const int n_target = n_blocks_for(n_tokens);
  if (n_target == 0 && attached.empty()) return true;
  std::vector<BlockId>& table = tables_[seq];
  // Room first: a push_back that failed after take_block() would lose the block (allocation
  // failure is tested, tests/engine/test_engine_alloc_faults.cpp).
  table.reserve(std::max<size_t>(static_cast<size_t>(n_target), table.size() + attached.size()));
  for (int32_t b : attached) {
    // Attach first: a block taken out of the LRU can no longer be evicted by the takes below.
    Block& blk = blocks_[b];
    if (blk.refcount == 0) {
      lru_remove(b);
      ++n_used_;
    }
    ++blk.refcount;
    table.push_back(BlockId(b));
  }
  while (static_cast<int>(table.size()) < n_target) table.push_back(BlockId(take_block()));
  return true;
}

void BlockManager::fork(SeqId src, SeqId dst, int32_t n_tokens) {
  TERN_ASSERT(src != dst && block_table(dst).empty());
  const auto src_table = block_table(src);
  const int n = n_blocks_for(n_tokens);
  TERN_ASSERT(n >= 0 && n <= static_cast<int>(src_table.size()));
  if (n == 0) return;
  std::vector<BlockId> table(src_table.begin(), src_table.begin() + n);
  std::vector<BlockId>& slot = tables_[dst];  // allocated before any refcount changes
  for (BlockId b : table) {
    TERN_ASSERT_MSG(b != kNoBlock, "fork of a sequence with released blocks");
    ++blocks_[b.value].refcount;  // shared blocks are in use: never in the LRU
  }
  slot = std::move(table);
}

std::optional<BlockCopy> BlockManager::prepare_write(SeqId seq, int32_t pos, bool* out_of_blocks) {
  if (out_of_blocks) *out_of_blocks = false;
  auto it = tables_.find(seq);
  TERN_ASSERT(it != tables_.end() && pos >= 0 && pos / block_size_ < static_cast<int32_t>(it->second.size()));
  BlockId& entry = it->second[pos / block_size_];
  TERN_ASSERT_MSG(entry != kNoBlock, "write into a released block");
  const int32_t src = entry.value;
  Block& blk = blocks_[src];
  if (blk.refcount == 1 && !blk.cached) return std::nullopt;  // private: write in place
  if (n_blocks_free() == 0) {
    if (blk.refcount == 1) {  // only seq reads it: give up the cached copy rather than fail
      unregister_block(src);
      return std::nullopt;
    }
    if (out_of_blocks) *out_of_blocks = true;
    return std::nullopt;
  }
  const int32_t dst = take_block();
  entry = BlockId(dst);
  release_block(src);  // a cached block only seq held goes to the LRU, content kept
  ++stats_.n_cow_copies;
  return BlockCopy{BlockId(src), BlockId(dst)};
}

void BlockManager::truncate(SeqId seq, int32_t n_tokens) {
  auto it = tables_.find(seq);
  if (it == tables_.end()) return;
  std::vector<BlockId>& table = it->second;
  const size_t keep = static_cast<size_t>(n_blocks_for(std::max(n_tokens, 0)));
  // Release the tail first: it goes to the LRU before the head, so the
  // (more widely shared) head of a prefix is evicted last.
  while (table.size() > keep) {
    if (table.back() != kNoBlock) release_block(table.back().value);
    table.pop_back();
  }
  if (table.empty()) tables_.erase(it);
}

void BlockManager::release_range(SeqId seq, int begin, int end) {
  auto it = tables_.find(seq);
  if (it == tables_.end()) return;
  std::vector<BlockId>& table = it->second;
  const int n = std::min(end, static_cast<int>(table.size()));
  // Release the newest first, so the oldest (least likely to be shared again) is evicted first.
  for (int i = n; i-- > std::max(0, begin);) {
    if (table[static_cast<size_t>(i)] == kNoBlock) continue;
    release_block(table[static_cast<size_t>(i)].value);
    table[static_cast<size_t>(i)] = kNoBlock;
  }
}

// ---- debugging ------------------------------------------------------------

std::string BlockManager::dump() const {
  std::string out = "block manager: " + std::to_string(n_blocks_total()) + " blocks x " +
                    std::to_string(block_size_) + " positions, prefix caching " +
                    (prefix_caching_ ? "on" : "off") + "\n  used=" + std::to_string(n_used_) +
                    " free=" + std::to_string(free_.size()) + " evictable=" + std::to_string(n_lru_) +
                    " cached=" + std::to_string(index_.size()) +
                    " evictions=" + std::to_string(stats_.n_evictions) +
                    " cow=" + std::to_string(stats_.n_cow_copies) + "\n";
  std::vector<SeqId> seqs;
  for (const auto& [s, t] : tables_) seqs.push_back(s);
  std::sort(seqs.begin(), seqs.end());
  out += "  block tables (* = cached, xN = refcount N > 1):\n";
  for (SeqId s : seqs) {
    out += "    seq " + std::to_string(s.value) + ": [";
    const auto& table = tables_.at(s);
    for (size_t i = 0; i < table.size(); ++i) {
      if (table[i] == kNoBlock) {
        out += i ? " -" : "-";
        continue;
      }
      const Block& blk = blocks_[table[i].value];
      out += (i ? " " : "") + block_name(table[i].value) + (blk.cached ? "*" : "");
      if (blk.refcount > 1) out += "x" + std::to_string(blk.refcount);
    }
    out += "]\n";
  }
  out += "  free (next first): [";
  for (size_t i = free_.size(); i-- > 0;) out += block_name(free_[i]) + (i ? " " : "");
  out += "]\n  evictable LRU (oldest first): [";
  char hash[24];
  for (int32_t b = lru_head_; b != kNone; b = blocks_[b].lru_next) {
    std::snprintf(hash, sizeof hash, "%08llx", static_cast<unsigned long long>(blocks_[b].hash.value >> 32));
    out += (b == lru_head_ ? "" : " ") + block_name(b) + ":" + hash;
  }
  return out + "]\n";
}

std::string BlockManager::check_invariants() const {
  const int n = n_blocks_total();
  std::vector<int> n_refs(n, 0);
  for (const auto& [s, table] : tables_) {
    if (table.empty()) return "seq " + std::to_string(s.value) + " has an empty table entry";
    for (BlockId b : table) {
      if (b == kNoBlock) continue;
      if (b.value < 0 || b.value >= n)
        return "seq " + std::to_string(s.value) + " names block " + std::to_string(b.value);
      ++n_refs[b.value];
    }
  }
  std::vector<int> n_free_seen(n, 0), n_lru_seen(n, 0);
  for (int32_t b : free_) ++n_free_seen[b];
  int n_lru_walk = 0;
  for (int32_t b = lru_head_, prev = kNone; b != kNone; prev = b, b = blocks_[b].lru_next) {
    if (blocks_[b].lru_prev != prev) return "LRU link broken at " + block_name(b);
    if (++n_lru_walk > n) return "LRU has a cycle";
    ++n_lru_seen[b];
    if (blocks_[b].lru_next == kNone && b != lru_tail_) return "LRU tail is not " + block_name(b);
  }
  if (n_lru_walk != n_lru_)
    return "LRU length " + std::to_string(n_lru_walk) + " != " + std::to_string(n_lru_);
  int n_used = 0;
  for (int32_t b = 0; b < n; ++b) {
    const Block& blk = blocks_[b];
    const std::string name = block_name(b);
    if (blk.refcount != n_refs[b])
      return name + " refcount " + std::to_string(blk.refcount) + " but " + std::to_string(n_refs[b]) +
             " table entries";
    const int n_places = n_free_seen[b] + n_lru_seen[b] + (blk.refcount > 0 ? 1 : 0);
    if (n_places != 1) return name + " is in " + std::to_string(n_places) + " of free / evictable / in use";
    if (blk.in_free != (n_free_seen[b] == 1)) return name + " in_free flag disagrees with the free list";
    if (n_free_seen[b] && blk.cached) return name + " is free but cached";
    if (n_lru_seen[b] && !blk.cached) return name + " is evictable but not cached";
    n_used += blk.refcount > 0 ? 1 : 0;
    if (blk.cached) {
      auto it = index_.find(blk.hash.value);
      if (it == index_.end() || it->second != b) return name + " is cached but the index does not name it";
      if (static_cast<int>(blk.tokens.size()) != block_size_) return name + " stores a partial block";
      const BlockHash parent_hash = blk.parent == kNone ? BlockHash(0) : blocks_[blk.parent].hash;
      if (!is_orphan(blk) && hash_fn_(parent_hash, blk.salt, blk.tokens) != blk.hash)
        return name + " stored tokens do not hash to its index entry";
    }
  }
  if (n_used != n_used_)
    return "n_used " + std::to_string(n_used_) + " but " + std::to_string(n_used) + " blocks in use";
  for (const auto& [h, b] : index_)
    if (b < 0 || b >= n || !blocks_[b].cached || blocks_[b].hash.value != h)
      return "index entry names a stale block";
  return {};
}

}  // namespace tern
