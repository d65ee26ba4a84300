// kv/block_manager.h — which KV blocks each sequence holds (no K/V data here).
//
// A pool of n_blocks fixed-size blocks (block_size token positions each).
// Every sequence has a block table: position p lives in table[p / block_size]
// at slot p % block_size. Blocks carry reference counts: forked sequences share
// blocks until one writes into a shared block, which then gets a private copy
// (copy-on-write; the storage copies the data as told by prepare_write).
//
// Automatic prefix caching: a full block is identified by a hash chained over
// its predecessor's hash and its tokens (plus a salt for namespacing). Blocks
// registered with cache_blocks() are findable by later sequences whose tokens
// start the same way; such blocks are immutable. A cached block whose
// reference count falls to 0 is not freed but kept, evictable, in LRU order;
// allocation takes plain free blocks first and evicts the least recently used
// cached block only when none is left. Lookups compare the stored tokens and
// the parent block's identity, so a hash collision can never return wrong
// content.
//
//   free list:  [b7 b3 b9 ...]                     refcount 0, no content
//   evictable:  LRU -> [b2 (hash h2) b5 (h5) ...]  refcount 0, cached content
//   in use:     b0 (ref 2, cached h0)  b1 (ref 1)  ...
//
// Invariants (check_invariants): every block is in exactly one of free /
// evictable / in use; refcount(b) = number of table entries naming b; the
// prefix index maps each hash to one block whose stored tokens match.
// Threading: not thread-safe; the engine step loop owns it.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/ids.h"

namespace tern {

using BlockHash = StrongId<struct BlockHashTag, uint64_t>;

// Hash of one full block chained over its parent's hash (BlockHash(0) for the
// first block), a salt and the block's tokens. Lookups verify content, so the
// hash only has to spread well; tests pass a degenerate one to force collisions.
using BlockHashFn = BlockHash (*)(BlockHash parent, uint64_t salt, std::span<const TokenId> tokens);
BlockHash hash_block_tokens(BlockHash parent, uint64_t salt, std::span<const TokenId> tokens);

// Copy block `src`'s data into block `dst` (all layers) before writing.
struct BlockCopy {
  BlockId src;
  BlockId dst;
};

struct BlockManagerStats {
  int64_t n_lookup_tokens = 0;  // prompt tokens looked up in the prefix cache
  int64_t n_hit_tokens = 0;     // of which found cached
  int64_t n_evictions = 0;      // cached blocks evicted to make room
  int64_t n_cow_copies = 0;
};

class BlockManager {
 public:
  BlockManager(int n_blocks, int block_size, bool prefix_caching, BlockHashFn hash_fn = hash_block_tokens);

  int block_size() const;
  int n_blocks_total() const;
  int n_blocks_free() const;    // free list + evictable cached blocks
  int n_blocks_cached() const;  // blocks in the prefix index (in use or evictable)
  int n_blocks_used() const;    // refcount > 0

  // Tokens at the start of `tokens` covered by cached full blocks: a multiple of
  // block_size, never all of `tokens` (the last token must be computed to get
  // logits). Does not change state (stats are counted by allocate()).
  int32_t find_cached_prefix(std::span<const TokenId> tokens, uint64_t salt = 0) const;

  // Blocks allocate() would take from the pool for `seq` to hold n_tokens
  // positions (for a sequence without blocks, after attaching n_cached tokens).
  // Attaching an evictable cached block takes it out of n_blocks_free(), so
  // those count too: allocate() succeeds iff this is <= n_blocks_free().
  int n_blocks_needed(SeqId seq, int32_t n_tokens, std::span<const TokenId> tokens = {}, int32_t n_cached = 0,
                      uint64_t salt = 0) const;

  // Makes `seq` hold blocks for positions [0, n_tokens). A sequence without
  // blocks first attaches the cached blocks covering tokens[0, n_cached)
  // (n_cached from find_cached_prefix; refcount +1, out of the LRU). Returns
  // false, changing nothing, when the pool cannot supply the blocks or when
  // tokens[0, n_cached) is no longer all cached (evicted since the lookup:
  // ask find_cached_prefix again).
  bool allocate(SeqId seq, int32_t n_tokens, std::span<const TokenId> tokens = {}, int32_t n_cached = 0,
                uint64_t salt = 0);

  // Registers seq's full blocks covering tokens[0, n_tokens) in the prefix
  // index (blocks already registered are skipped; when another block already
  // holds that hash, seq keeps its own block unregistered). Stops at a true
  // hash collision: what follows could never be found anyway; and at a
  // released entry (kNoBlock) whose content is no longer cached.
  void cache_blocks(SeqId seq, std::span<const TokenId> tokens, int32_t n_tokens, uint64_t salt = 0);

  // dst (without blocks) shares src's blocks for positions [0, n_tokens).
  void fork(SeqId src, SeqId dst, int32_t n_tokens);

  // Call before writing position pos of seq (pos must be allocated): when its
  // block is shared or cached, replaces it in seq's table by a fresh block and
  // returns the copy to perform; nullopt when the block is private. A fresh
  // block may be unavailable: then returns nullopt and sets *out_of_blocks
  // (except for a cached block only seq holds: it is then dropped from the
  // prefix index and written in place).
  std::optional<BlockCopy> prepare_write(SeqId seq, int32_t pos, bool* out_of_blocks = nullptr);

  // Drops seq's blocks beyond position n_tokens (0 frees the sequence).
  void truncate(SeqId seq, int32_t n_tokens);

  // A table entry whose block was given back early (kNoBlock): positions no
  // token of the sequence reads any more, behind a sliding window.
  static constexpr BlockId kNoBlock{-1};
  // Releases seq's blocks [0, n_blocks) that it still holds; their entries
  // become kNoBlock (the table keeps its length: position p stays in entry
  // p / block_size). A released cached block stays findable (LRU) as usual.
  void release_front(SeqId seq, int n_blocks) { release_range(seq, 0, n_blocks); }
  // The same for entries [begin, end) (a streaming sequence keeps its sink blocks in front).
  void release_range(SeqId seq, int begin, int end);
  void free(SeqId seq) { truncate(seq, 0); }

  std::span<const BlockId> block_table(SeqId seq) const;  // empty for an unknown sequence
  int refcount(BlockId b) const;
  const BlockManagerStats& stats() const;

  std::string dump() const;
  // Empty when all invariants hold, else a description of the first violation.
  std::string check_invariants() const;

 private:
  static constexpr int32_t kNone = -1;

  // One pool block. A registered block (cached) is immutable and owns its
  // hash's entry in index_; it names its parent by block id and registration
  // generation, so a lookup accepts it only under the very block it was
  // computed after: a chain whose earlier hash collided, or whose parent was
  // evicted and its id reused, can never match (hash equality alone could).
  struct Block {
    int32_t refcount = 0;
    bool in_free = false;  // in free_ (else in the LRU or in use)
    bool cached = false;   // registered in index_
    BlockHash hash{};
    uint64_t salt = 0;
    uint64_t gen = 0;        // registration generation (unique while cached)
    int32_t parent = kNone;  // registered block this one follows; kNone for the first
    uint64_t parent_gen = 0;
    std::vector<TokenId> tokens;                 // [block_size] when cached, else empty
    int32_t lru_prev = kNone, lru_next = kNone;  // evictable list links
  };

  // The registered block holding tokens[i*bs, (i+1)*bs) after `parent`, or kNone.
  int32_t match_block(BlockHash hash, uint64_t salt, std::span<const TokenId> tokens, int32_t parent) const;
  // Up to max_blocks verified cached blocks for the start of tokens.
  std::vector<int32_t> lookup_prefix(std::span<const TokenId> tokens, uint64_t salt, int max_blocks) const;
  bool is_orphan(const Block& b) const;
  int n_blocks_for(int32_t n_tokens) const { return (n_tokens + block_size_ - 1) / block_size_; }

  int32_t take_block();           // free list first, else evicts the LRU head
  void release_block(int32_t b);  // refcount -1; at 0 to the LRU tail or the free list
  void register_block(int32_t b, BlockHash hash, uint64_t salt, std::span<const TokenId> tokens,
                      int32_t parent);
  void unregister_block(int32_t b);  // out of index_; an unreferenced block goes to free_
  void lru_push_back(int32_t b);
  void lru_remove(int32_t b);

  int block_size_;
  bool prefix_caching_;
  BlockHashFn hash_fn_;
  std::vector<Block> blocks_;  // [n_blocks]
  // A stack: back() is taken next, so recently freed (already touched) memory is reused first.
  std::vector<int32_t> free_;
  int32_t lru_head_ = kNone, lru_tail_ = kNone;  // head = least recently used
  int n_lru_ = 0;
  int n_used_ = 0;  // blocks with refcount > 0
  uint64_t next_gen_ = 1;
  std::unordered_map<uint64_t, int32_t> index_;               // hash -> registered block
  std::unordered_map<SeqId, std::vector<BlockId>> tables_;  // block tables (never empty)
  BlockManagerStats stats_;
};

}  // namespace tern
