// kv/paged_kv_cache.h — KV storage in fixed-size blocks (PagedAttention).
//
// Owns one pool allocation of n_blocks blocks and a BlockManager saying which
// blocks each sequence holds. A block holds block_size positions of every
// layer, keys and values, so copy-on-write and swap move one contiguous span:
//
//   pool: [block][layer][K|V][block_size][n_kv_head][head_dim]  (KvType elements)
//
// Implements KvCache, so Model::forward runs on it unchanged: reserve()
// allocates missing blocks (OutOfRange "KV cache full" when the pool is short)
// and performs copy-on-write for the positions about to be written; rows()
// returns one KvRows per block.
// Prefix caching, forks and swapping are reached through the methods below.
// The pool is mapped up front as address space and only touched as blocks
// are used; create() reports a mapping failure, the constructor asserts.
// Threading: as KvCache (the engine step loop owns it; rows are read by the
// attention threads during forward()).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "kv/block_manager.h"
#include "kv/kv_cache.h"
#include "tern/config.h"

namespace tern {

// SwapCompression: tern/config.h.
Result<SwapCompression> parse_swap_compression(std::string_view name);  // "none", "lz4", "zstd"

// Bytes of pool memory per block.
size_t paged_kv_block_bytes(const KvShape& shape, int block_size);
// Blocks that fit in `bytes` (at least 1 when bytes >= one block, else 0).
int paged_kv_blocks_for_bytes(const KvShape& shape, int block_size, int64_t bytes);

// A sequence's KV data while swapped out to host memory.
struct SwappedKv {
  int32_t n_positions = 0;
  SwapCompression compression = SwapCompression::None;
  size_t raw_bytes = 0;               // before compression
  std::vector<std::byte> data;        // per block, one after another (compressed per block)
  std::vector<uint32_t> block_sizes;  // stored bytes of each block in data
  std::vector<uint64_t> checksums;    // core/hash.h checksum64 of each block's raw bytes
};

// Tests only: while on, swap_out damages one byte of every block it stores
// (after its checksum is taken), as memory or a bug might.
void corrupt_swaps_for_testing(bool on);
bool swaps_corrupted_for_testing();  // whether that is on (the KV manager's state copies follow it too)

class PagedKvCache final : public KvCache {
 public:
  // For a pool sized by the user: a pool that cannot be mapped (RLIMIT_AS,
  // strict overcommit) is an IoError naming its size.
  static Result<std::unique_ptr<PagedKvCache>> create(KvShape shape, int n_blocks, int block_size,
                                                     bool prefix_caching);
  // For small fixed pools (tests): asserts that the pool maps.
  PagedKvCache(KvShape shape, int n_blocks, int block_size, bool prefix_caching);
  ~PagedKvCache() override;

  // The pool as the forward pass reads it (block layout in kv/kv_pool.h).
  KvPoolView view() const;
  BlockManager& blocks();
  const BlockManager& blocks() const;
  int block_size() const;

  // KvCache
  Status reserve(SeqId seq, int32_t n_positions) override;
  int32_t n_positions(SeqId seq) const override;
  void set_n_positions(SeqId seq, int32_t n) override;
  void truncate(SeqId seq, int32_t n) override;
  void* key_row(int layer, SeqId seq, int32_t pos) override;
  void* value_row(int layer, SeqId seq, int32_t pos) override;
  void rows(int layer, SeqId seq, int32_t begin, int32_t end, std::vector<KvRows>& out) override;
  std::string dump() const override;

  // For a sequence without blocks: attaches the cached blocks of the longest
  // cached prefix of `tokens` and marks those positions valid. Returns the
  // number of positions attached (a multiple of block_size, < tokens.size()).
  int32_t attach_cached_prefix(SeqId seq, std::span<const TokenId> tokens, uint64_t salt = 0);
  // Registers seq's full, computed blocks (positions < n_positions(seq) and <
  // limit) in the prefix index; tokens are the sequence's tokens from position 0.
  void cache_blocks(SeqId seq, std::span<const TokenId> tokens, uint64_t salt = 0, int32_t limit = INT32_MAX);
  // dst (empty) shares all of src's valid positions.
  void fork(SeqId src, SeqId dst);

  // Copies seq's valid positions to host memory (compressed as asked) and
  // frees its blocks.
  Result<SwappedKv> swap_out(SeqId seq, SwapCompression compression);
  // Restores a swapped sequence into fresh blocks (seq must hold none).
  // OutOfRange, changing nothing, when the pool lacks blocks; Internal,
  // holding no blocks, when a block does not restore or fails its checksum.
  Status swap_in(SeqId seq, const SwappedKv& swapped);

 private:
  struct Impl;
  PagedKvCache(KvShape shape, int n_blocks, int block_size, bool prefix_caching, std::byte* pool);  // owns pool
  std::unique_ptr<Impl> impl_;
};

}  // namespace tern
