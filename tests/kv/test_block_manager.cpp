#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <numeric>
#include <random>
#include <set>
#include <vector>

#include "kv/block_manager.h"

namespace tern {
namespace {

std::vector<int> ids(std::span<const BlockId> table) {
  std::vector<int> out;
  for (BlockId b : table) out.push_back(b.value);
  return out;
}

std::vector<TokenId> iota_tokens(int n, TokenId first = 0) {
  std::vector<TokenId> t(n);
  std::iota(t.begin(), t.end(), first);
  return t;
}

#define EXPECT_INVARIANTS(bm) EXPECT_EQ((bm).check_invariants(), "")

TEST(BlockManager, TakesFreeBlocksInIdOrderAndReusesFreedOnesFirst) {
  BlockManager bm(8, 4, true);
  EXPECT_EQ(bm.n_blocks_total(), 8);
  EXPECT_EQ(bm.n_blocks_free(), 8);
  ASSERT_TRUE(bm.allocate(SeqId(0), 10));
  EXPECT_EQ(ids(bm.block_table(SeqId(0))), (std::vector<int>{0, 1, 2}));
  ASSERT_TRUE(bm.allocate(SeqId(1), 4));
  EXPECT_EQ(ids(bm.block_table(SeqId(1))), (std::vector<int>{3}));
  ASSERT_TRUE(bm.allocate(SeqId(0), 12));  // still 3 blocks: nothing new
  ASSERT_TRUE(bm.allocate(SeqId(0), 13));
  EXPECT_EQ(ids(bm.block_table(SeqId(0))), (std::vector<int>{0, 1, 2, 4}));
  EXPECT_EQ(bm.n_blocks_used(), 5);
  EXPECT_EQ(bm.n_blocks_free(), 3);
  bm.free(SeqId(0));  // released tail first: 4 2 1 0 pushed, so 0 is on top
  EXPECT_TRUE(bm.block_table(SeqId(0)).empty());
  ASSERT_TRUE(bm.allocate(SeqId(2), 9));
  EXPECT_EQ(ids(bm.block_table(SeqId(2))), (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(bm.refcount(BlockId(0)), 1);
  EXPECT_EQ(bm.refcount(BlockId(4)), 0);
  EXPECT_INVARIANTS(bm);
}

TEST(BlockManager, AllocateFailsWithoutChangingAnything) {
  BlockManager bm(3, 4, true);
  ASSERT_TRUE(bm.allocate(SeqId(0), 8));
  EXPECT_EQ(bm.n_blocks_needed(SeqId(0), 16), 2);
  EXPECT_FALSE(bm.allocate(SeqId(0), 16));
  EXPECT_EQ(ids(bm.block_table(SeqId(0))), (std::vector<int>{0, 1}));
  EXPECT_FALSE(bm.allocate(SeqId(1), 5));
  EXPECT_TRUE(bm.block_table(SeqId(1)).empty());
  EXPECT_EQ(bm.n_blocks_free(), 1);
  EXPECT_TRUE(bm.allocate(SeqId(1), 0));  // zero positions hold nothing
  EXPECT_TRUE(bm.block_table(SeqId(1)).empty());
  EXPECT_INVARIANTS(bm);
}

TEST(BlockManager, PrefixHitLengthsNeverIncludeTheLastToken) {
  BlockManager bm(8, 4, true);
  const auto tokens = iota_tokens(10, 100);
  ASSERT_TRUE(bm.allocate(SeqId(0), 10, tokens, 0));
  EXPECT_EQ(bm.find_cached_prefix(tokens), 0);
  bm.cache_blocks(SeqId(0), tokens, 10);  // two full blocks; the partial third is not cached
  EXPECT_EQ(bm.n_blocks_cached(), 2);
  EXPECT_EQ(bm.find_cached_prefix(tokens), 8);
  EXPECT_EQ(bm.find_cached_prefix(std::span(tokens).first(9)), 8);
  EXPECT_EQ(bm.find_cached_prefix(std::span(tokens).first(8)), 4);  // 8 would leave nothing to compute
  EXPECT_EQ(bm.find_cached_prefix(std::span(tokens).first(5)), 4);
  EXPECT_EQ(bm.find_cached_prefix(std::span(tokens).first(4)), 0);
  EXPECT_EQ(bm.find_cached_prefix({}), 0);
  auto other = tokens;
  other[5] = 7;
  EXPECT_EQ(bm.find_cached_prefix(other), 4);
  other[0] = 7;
  EXPECT_EQ(bm.find_cached_prefix(other), 0);

  // A hit attaches the cached blocks (shared) and allocates the rest.
  EXPECT_EQ(bm.n_blocks_needed(SeqId(1), 10, tokens, 8), 1);
  ASSERT_TRUE(bm.allocate(SeqId(1), 10, tokens, 8));
  EXPECT_EQ(ids(bm.block_table(SeqId(1))), (std::vector<int>{0, 1, 3}));
  EXPECT_EQ(bm.refcount(BlockId(0)), 2);
  EXPECT_EQ(bm.refcount(BlockId(1)), 2);
  EXPECT_EQ(bm.refcount(BlockId(3)), 1);
  EXPECT_EQ(bm.stats().n_lookup_tokens, 20);
  EXPECT_EQ(bm.stats().n_hit_tokens, 8);
  EXPECT_INVARIANTS(bm);
}

TEST(BlockManager, SaltSeparatesNamespaces) {
  BlockManager bm(8, 4, true);
  const auto tokens = iota_tokens(9);
  ASSERT_TRUE(bm.allocate(SeqId(0), 9, tokens, 0, 7));
  bm.cache_blocks(SeqId(0), tokens, 9, 7);
  EXPECT_EQ(bm.find_cached_prefix(tokens, 7), 8);
  EXPECT_EQ(bm.find_cached_prefix(tokens, 0), 0);
  EXPECT_EQ(bm.find_cached_prefix(tokens, 8), 0);
  // The same tokens under another salt register their own blocks.
  ASSERT_TRUE(bm.allocate(SeqId(1), 9, tokens, 0, 0));
  bm.cache_blocks(SeqId(1), tokens, 9, 0);
  EXPECT_EQ(bm.n_blocks_cached(), 4);
  EXPECT_EQ(bm.find_cached_prefix(tokens, 0), 8);
  EXPECT_INVARIANTS(bm);
}

TEST(BlockManager, EvictsLeastRecentlyUsedCachedBlocksAfterFreeOnes) {
  BlockManager bm(4, 2, true);
  const std::vector<TokenId> a = {1, 2, 3, 4, 5};
  ASSERT_TRUE(bm.allocate(SeqId(0), 5, a, 0));  // [0 1 2]
  bm.cache_blocks(SeqId(0), a, 5);              // 0 and 1 cached
  bm.free(SeqId(0));                            // 2 -> free; LRU gets 1 then 0 (tail first)
  EXPECT_EQ(bm.n_blocks_free(), 4);
  EXPECT_EQ(bm.n_blocks_cached(), 2);
  EXPECT_EQ(bm.n_blocks_used(), 0);
  EXPECT_NE(bm.dump().find("evictable LRU (oldest first): [b1:"), std::string::npos) << bm.dump();

  const std::vector<TokenId> b = {9, 9, 9, 9, 9, 9};
  ASSERT_TRUE(bm.allocate(SeqId(1), 6, b, 0));  // free 2, free 3, then evicts 1
  EXPECT_EQ(ids(bm.block_table(SeqId(1))), (std::vector<int>{2, 3, 1}));
  EXPECT_EQ(bm.stats().n_evictions, 1);
  EXPECT_EQ(bm.n_blocks_cached(), 1);
  EXPECT_EQ(bm.find_cached_prefix(a), 2);
  ASSERT_TRUE(bm.allocate(SeqId(2), 1));  // evicts 0
  EXPECT_EQ(ids(bm.block_table(SeqId(2))), (std::vector<int>{0}));
  EXPECT_EQ(bm.stats().n_evictions, 2);
  EXPECT_EQ(bm.find_cached_prefix(a), 0);
  EXPECT_EQ(bm.n_blocks_free(), 0);
  EXPECT_INVARIANTS(bm);
}

TEST(BlockManager, PrefixHitTakesBlocksOutOfTheLru) {
  BlockManager bm(4, 2, true);
  const std::vector<TokenId> a = {1, 2, 3, 4, 5};
  ASSERT_TRUE(bm.allocate(SeqId(0), 5, a, 0));
  bm.cache_blocks(SeqId(0), a, 5);
  bm.free(SeqId(0));
  ASSERT_EQ(bm.find_cached_prefix(a), 4);
  // Attaching the two evictable blocks uses up two of the four "free" blocks.
  EXPECT_EQ(bm.n_blocks_needed(SeqId(3), 6, a, 4), 3);
  ASSERT_TRUE(bm.allocate(SeqId(3), 6, a, 4));
  EXPECT_EQ(ids(bm.block_table(SeqId(3))), (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(bm.n_blocks_free(), 1);
  EXPECT_EQ(bm.refcount(BlockId(0)), 1);
  // The attached blocks can no longer be evicted: only block 3 is left.
  EXPECT_TRUE(bm.allocate(SeqId(4), 2));
  EXPECT_FALSE(bm.allocate(SeqId(5), 2));
  EXPECT_EQ(bm.stats().n_evictions, 0);
  EXPECT_INVARIANTS(bm);
}

TEST(BlockManager, AllocateRefusesAPrefixEvictedSinceTheLookup) {
  BlockManager bm(3, 2, true);
  const std::vector<TokenId> a = {1, 2, 3};
  ASSERT_TRUE(bm.allocate(SeqId(0), 3, a, 0));  // [0 1]
  bm.cache_blocks(SeqId(0), a, 3);
  bm.free(SeqId(0));
  const int32_t n_cached = bm.find_cached_prefix(a);
  ASSERT_EQ(n_cached, 2);
  ASSERT_TRUE(bm.allocate(SeqId(1), 6));  // evicts block 0
  EXPECT_FALSE(bm.allocate(SeqId(2), 3, a, n_cached));
  EXPECT_TRUE(bm.block_table(SeqId(2)).empty());
  EXPECT_INVARIANTS(bm);
}

TEST(BlockManager, ForkSharesBlocksAndCopyOnWriteSplitsThem) {
  BlockManager bm(8, 4, true);
  ASSERT_TRUE(bm.allocate(SeqId(0), 6));  // [0 1]
  bm.fork(SeqId(0), SeqId(1), 6);
  EXPECT_EQ(ids(bm.block_table(SeqId(1))), (std::vector<int>{0, 1}));
  EXPECT_EQ(bm.refcount(BlockId(0)), 2);
  EXPECT_EQ(bm.refcount(BlockId(1)), 2);
  EXPECT_EQ(bm.n_blocks_used(), 2);
  EXPECT_INVARIANTS(bm);

  auto copy = bm.prepare_write(SeqId(1), 6);
  ASSERT_TRUE(copy.has_value());
  EXPECT_EQ(copy->src.value, 1);
  EXPECT_EQ(copy->dst.value, 2);
  EXPECT_EQ(ids(bm.block_table(SeqId(1))), (std::vector<int>{0, 2}));
  EXPECT_EQ(bm.refcount(BlockId(0)), 2);
  EXPECT_EQ(bm.refcount(BlockId(1)), 1);
  EXPECT_EQ(bm.refcount(BlockId(2)), 1);
  EXPECT_FALSE(bm.prepare_write(SeqId(1), 7).has_value());  // private now
  EXPECT_FALSE(bm.prepare_write(SeqId(0), 6).has_value());  // the source's is private too
  copy = bm.prepare_write(SeqId(0), 1);
  ASSERT_TRUE(copy.has_value());
  EXPECT_EQ(copy->src.value, 0);
  EXPECT_EQ(copy->dst.value, 3);
  EXPECT_EQ(ids(bm.block_table(SeqId(0))), (std::vector<int>{3, 1}));
  EXPECT_EQ(bm.refcount(BlockId(0)), 1);
  EXPECT_EQ(bm.stats().n_cow_copies, 2);
  // A partial fork shares only the blocks covering the positions.
  bm.fork(SeqId(0), SeqId(2), 4);
  EXPECT_EQ(ids(bm.block_table(SeqId(2))), (std::vector<int>{3}));
  EXPECT_EQ(bm.refcount(BlockId(3)), 2);
  EXPECT_INVARIANTS(bm);
}

TEST(BlockManager, CopyOnWriteWithoutFreeBlocks) {
  BlockManager bm(2, 4, true);
  ASSERT_TRUE(bm.allocate(SeqId(0), 4));
  bm.fork(SeqId(0), SeqId(1), 4);
  ASSERT_TRUE(bm.allocate(SeqId(1), 8));  // [0 1]: pool now full
  bool out_of_blocks = false;
  EXPECT_FALSE(bm.prepare_write(SeqId(1), 3, &out_of_blocks).has_value());
  EXPECT_TRUE(out_of_blocks);
  EXPECT_EQ(bm.refcount(BlockId(0)), 2);
  EXPECT_FALSE(bm.prepare_write(SeqId(1), 4, &out_of_blocks).has_value());
  EXPECT_FALSE(out_of_blocks);
  EXPECT_INVARIANTS(bm);
}

TEST(BlockManager, WritingACachedBlockCopiesItOrDropsItFromTheIndex) {
  BlockManager bm(3, 2, true);
  const std::vector<TokenId> a = {1, 2, 3, 4, 5};
  ASSERT_TRUE(bm.allocate(SeqId(0), 5, a, 0));  // [0 1 2]
  bm.cache_blocks(SeqId(0), a, 5);
  bm.truncate(SeqId(0), 3);  // drops block 2; block 1 (cached) holds position 2 again
  EXPECT_EQ(ids(bm.block_table(SeqId(0))), (std::vector<int>{0, 1}));
  // Cached blocks are immutable: writing position 3 copies block 1 into 2, and
  // block 1 stays findable, now evictable.
  auto copy = bm.prepare_write(SeqId(0), 3);
  ASSERT_TRUE(copy.has_value());
  EXPECT_EQ(copy->src.value, 1);
  EXPECT_EQ(copy->dst.value, 2);
  EXPECT_EQ(bm.find_cached_prefix(a), 4);
  EXPECT_EQ(bm.n_blocks_free(), 1);
  // With no block to spare, the sole holder gives up block 0's cached copy.
  ASSERT_TRUE(bm.allocate(SeqId(1), 1));  // takes the evictable block 1
  EXPECT_EQ(bm.stats().n_evictions, 1);
  bool out_of_blocks = true;
  EXPECT_FALSE(bm.prepare_write(SeqId(0), 0, &out_of_blocks).has_value());
  EXPECT_FALSE(out_of_blocks);
  EXPECT_EQ(bm.n_blocks_cached(), 0);
  EXPECT_EQ(bm.find_cached_prefix(a), 0);
  EXPECT_INVARIANTS(bm);
}

TEST(BlockManager, TruncateReleasesTailBlocks) {
  BlockManager bm(8, 4, false);
  ASSERT_TRUE(bm.allocate(SeqId(0), 10));
  bm.truncate(SeqId(0), 5);
  EXPECT_EQ(ids(bm.block_table(SeqId(0))), (std::vector<int>{0, 1}));
  bm.truncate(SeqId(0), 8);
  EXPECT_EQ(ids(bm.block_table(SeqId(0))), (std::vector<int>{0, 1}));
  ASSERT_TRUE(bm.allocate(SeqId(1), 1));
  EXPECT_EQ(ids(bm.block_table(SeqId(1))), (std::vector<int>{2}));  // the block just released
  bm.truncate(SeqId(0), 0);
  EXPECT_TRUE(bm.block_table(SeqId(0)).empty());
  EXPECT_EQ(bm.n_blocks_used(), 1);
  bm.truncate(SeqId(9), 0);  // unknown sequence: nothing
  EXPECT_INVARIANTS(bm);
}

TEST(BlockManager, PrefixCachingOffNeverCaches) {
  BlockManager bm(4, 2, false);
  const std::vector<TokenId> a = {1, 2, 3, 4, 5};
  ASSERT_TRUE(bm.allocate(SeqId(0), 5, a, 0));
  bm.cache_blocks(SeqId(0), a, 5);
  EXPECT_EQ(bm.n_blocks_cached(), 0);
  EXPECT_EQ(bm.find_cached_prefix(a), 0);
  bm.free(SeqId(0));
  EXPECT_EQ(bm.stats().n_lookup_tokens, 0);
  EXPECT_INVARIANTS(bm);
}

TEST(BlockManager, DuplicateContentStaysPrivateAndTheChainContinues) {
  BlockManager bm(8, 2, true);
  const std::vector<TokenId> a = {1, 2, 3, 4, 9};
  const std::vector<TokenId> b = {1, 2, 5, 6, 9};
  ASSERT_TRUE(bm.allocate(SeqId(0), 5, a, 0));  // [0 1 2]
  bm.cache_blocks(SeqId(0), a, 4);
  ASSERT_TRUE(bm.allocate(SeqId(1), 5, b, 0));  // computed without a hit: [3 4 5]
  bm.cache_blocks(SeqId(1), b, 4);              // block 3 duplicates block 0; block 4 registers after block 0
  EXPECT_EQ(bm.n_blocks_cached(), 3);
  EXPECT_EQ(bm.find_cached_prefix(b), 4);
  ASSERT_TRUE(bm.allocate(SeqId(2), 5, b, 4));
  EXPECT_EQ(ids(bm.block_table(SeqId(2))), (std::vector<int>{0, 4, 6}));
  EXPECT_INVARIANTS(bm);
}

TEST(BlockManager, StatsAndDump) {
  BlockManager bm(6, 2, true);
  const std::vector<TokenId> a = {1, 2, 3, 4, 5};
  ASSERT_TRUE(bm.allocate(SeqId(0), 5, a, 0));
  bm.cache_blocks(SeqId(0), a, 5);
  bm.fork(SeqId(0), SeqId(1), 5);
  ASSERT_TRUE(bm.allocate(SeqId(2), 5, a, bm.find_cached_prefix(a)));
  ASSERT_TRUE(bm.allocate(SeqId(3), 5, a, 4));
  const BlockManagerStats& st = bm.stats();
  EXPECT_EQ(st.n_lookup_tokens, 15);
  EXPECT_EQ(st.n_hit_tokens, 8);
  EXPECT_EQ(st.n_cow_copies, 0);
  const std::string d = bm.dump();
  EXPECT_NE(d.find("seq 0: [b0*x4 b1*x4 b2x2]"), std::string::npos) << d;
  EXPECT_NE(d.find("seq 2: [b0*x4 b1*x4 b3]"), std::string::npos) << d;
  EXPECT_NE(d.find("free (next first): [b5]"), std::string::npos) << d;
  EXPECT_INVARIANTS(bm);
}

// ---- hash collisions --------------------------------------------------------

BlockHash constant_hash(BlockHash, uint64_t, std::span<const TokenId>) { return BlockHash(42); }
// Ignores the parent's identity beyond its hash and most of the tokens.
BlockHash first_token_hash(BlockHash parent, uint64_t, std::span<const TokenId> tokens) {
  return BlockHash(parent.value + static_cast<uint64_t>(tokens[0]));
}

TEST(BlockManager, CollidingHashesNeverReturnOtherContent) {
  BlockManager bm(8, 4, true, constant_hash);
  const std::vector<TokenId> a = {1, 2, 3, 4, 5, 6, 7, 8, 0};
  ASSERT_TRUE(bm.allocate(SeqId(0), 9, a, 0));
  bm.cache_blocks(SeqId(0), a, 9);  // block 1 collides with block 0: the chain stops there
  EXPECT_EQ(bm.n_blocks_cached(), 1);
  EXPECT_EQ(bm.find_cached_prefix(a), 4);
  EXPECT_EQ(bm.find_cached_prefix(std::vector<TokenId>{9, 9, 9, 9, 0}), 0);
  EXPECT_EQ(bm.find_cached_prefix(std::vector<TokenId>{1, 2, 3, 5, 0}), 0);
  EXPECT_INVARIANTS(bm);
}

BlockHash tokens_only_hash(BlockHash, uint64_t, std::span<const TokenId> tokens) {
  return BlockHash(static_cast<uint64_t>(tokens[0]));
}

TEST(BlockManager, ABlockFoundAfterOneParentNeverServesAsAnother) {
  BlockManager bm(8, 4, true, tokens_only_hash);
  const std::vector<TokenId> a = {1, 1, 1, 1, 2, 2, 2, 2, 0};
  ASSERT_TRUE(bm.allocate(SeqId(0), 9, a, 0));
  bm.cache_blocks(SeqId(0), a, 8);
  EXPECT_EQ(bm.n_blocks_cached(), 2);
  // Block 1 holds {2 2 2 2} computed after {1 1 1 1}: same hash and tokens as
  // a first block {2 2 2 2}, but not the same K/V.
  EXPECT_EQ(bm.find_cached_prefix(std::vector<TokenId>{2, 2, 2, 2, 0}), 0);
  EXPECT_EQ(bm.find_cached_prefix(std::vector<TokenId>{2, 2, 2, 2, 2, 2, 2, 2, 0}), 0);
  // Registering a first block {2 2 2 2} is a collision with a live block: not registered.
  const std::vector<TokenId> b = {2, 2, 2, 2, 0};
  ASSERT_TRUE(bm.allocate(SeqId(1), 5, b, 0));
  bm.cache_blocks(SeqId(1), b, 4);
  EXPECT_EQ(bm.n_blocks_cached(), 2);
  EXPECT_EQ(bm.find_cached_prefix(b), 0);
  EXPECT_EQ(bm.find_cached_prefix(a), 8);
  EXPECT_INVARIANTS(bm);
}

TEST(BlockManager, ParentEvictedAndIdReusedNeverMatchesByHash) {
  BlockManager bm(5, 4, true, first_token_hash);
  const std::vector<TokenId> a = {1, 2, 3, 4, 5, 6, 7, 8, 0};
  ASSERT_TRUE(bm.allocate(SeqId(0), 9, a, 0));  // [0 1 2]
  bm.cache_blocks(SeqId(0), a, 8);              // hashes 1 and 1 + 5
  ASSERT_TRUE(bm.allocate(SeqId(1), 9, a, bm.find_cached_prefix(a)));
  EXPECT_EQ(ids(bm.block_table(SeqId(1))), (std::vector<int>{0, 1, 3}));
  ASSERT_TRUE(bm.allocate(SeqId(9), 4));  // [4]: keeps the free list short
  bm.free(SeqId(0));
  // Seq 1 rewrites position 0: block 0 is copied into block 2 and becomes
  // evictable while its child, block 1, stays in use.
  auto copy = bm.prepare_write(SeqId(1), 0);
  ASSERT_TRUE(copy.has_value());
  EXPECT_EQ(copy->dst.value, 2);
  // Block 0 is evicted and reused for different tokens with the same hash (1).
  const std::vector<TokenId> c = {1, 9, 9, 9, 0};
  ASSERT_TRUE(bm.allocate(SeqId(2), 4, c, 0));
  EXPECT_EQ(ids(bm.block_table(SeqId(2))), (std::vector<int>{0}));
  EXPECT_EQ(bm.stats().n_evictions, 1);
  bm.cache_blocks(SeqId(2), c, 4);
  // Block 1 matches by tokens and by its parent's hash and id, but was computed
  // after {1 2 3 4}, not after {1 9 9 9}: the hit must stop at 4 tokens.
  const std::vector<TokenId> q = {1, 9, 9, 9, 5, 6, 7, 8, 0};
  EXPECT_EQ(bm.find_cached_prefix(q), 4);
  EXPECT_INVARIANTS(bm);
  // The orphan (still held by seq 1) gives its hash up to the right content.
  bm.free(SeqId(9));
  ASSERT_TRUE(bm.allocate(SeqId(2), 8));
  EXPECT_EQ(ids(bm.block_table(SeqId(2))), (std::vector<int>{0, 4}));
  bm.cache_blocks(SeqId(2), q, 8);
  EXPECT_EQ(bm.find_cached_prefix(q), 8);
  EXPECT_EQ(bm.n_blocks_cached(), 2);
  EXPECT_EQ(bm.refcount(BlockId(1)), 1);
  EXPECT_INVARIANTS(bm);
}

// ---- property test ---------------------------------------------------------

// Drives a manager with seeded random operations next to a model of the KV
// storage: content_[block][slot] is what was written there. Values depend on
// the token and the salt (as K/V depend on the adapter), so a hit across salts
// or onto other content shows up as a wrong value.
class Simulation {
 public:
  Simulation(uint64_t seed, BlockHashFn hash, int n_blocks = 24, int block_size = 4)
      : bm_(n_blocks, block_size, true, hash),
        bs_(block_size),
        content_(n_blocks, std::vector<int64_t>(block_size, -1)),
        rng_(seed) {
    for (int i = 0; i < 3; ++i) prefixes_.push_back(random_tokens(8 + static_cast<int>(rng_() % 14)));
  }

  void run(int n_steps) {
    for (step_ = 0; step_ < n_steps; ++step_) {
      const int r = static_cast<int>(rng_() % 100);
      if (r < 20 || seqs_.empty())
        op_new();
      else if (r < 55)
        op_grow(pick());
      else if (r < 70)
        op_cache(pick());
      else if (r < 78)
        op_fork(pick());
      else if (r < 86)
        op_truncate(pick());
      else
        op_free(pick());
      if (::testing::Test::HasFatalFailure()) return;
      ASSERT_EQ(bm_.check_invariants(), "") << "step " << step_ << "\n" << bm_.dump();
      check_all();
      if (::testing::Test::HasFatalFailure()) return;
    }
    while (!seqs_.empty()) op_free(SeqId(seqs_.begin()->first));
    ASSERT_EQ(bm_.check_invariants(), "");
    EXPECT_EQ(bm_.n_blocks_used(), 0);
    EXPECT_EQ(bm_.n_blocks_free(), bm_.n_blocks_total());  // nothing leaked: all free or evictable
  }

  const BlockManager& bm() const { return bm_; }
  int64_t n_hit_tokens = 0, n_refused = 0;

 private:
  struct Seq {
    std::vector<TokenId> tokens;
    int32_t n_written = 0;  // positions whose values are in the blocks
    uint64_t salt = 0;
  };

  static int64_t value(const Seq& s, int32_t pos) {
    return s.tokens[pos] + static_cast<int64_t>(s.salt) * 1000000;
  }

  std::vector<TokenId> random_tokens(int n) {
    std::vector<TokenId> t(n);
    for (TokenId& x : t)
      x = static_cast<TokenId>(rng_() % 6);  // small alphabet: equal blocks after unequal prefixes
    return t;
  }
  void append_random(Seq& s, int n_max) {
    const auto t = random_tokens(1 + static_cast<int>(rng_() % n_max));
    s.tokens.insert(s.tokens.end(), t.begin(), t.end());
  }
  SeqId pick() {
    auto it = seqs_.begin();
    std::advance(it, rng_() % seqs_.size());
    return SeqId(it->first);
  }

  void check_seq(int32_t id, const Seq& s) {
    const auto table = bm_.block_table(SeqId(id));
    ASSERT_GE(static_cast<int32_t>(table.size()) * bs_, s.n_written) << "seq " << id;
    for (int32_t p = 0; p < s.n_written; ++p)
      ASSERT_EQ(content_[table[p / bs_].value][p % bs_], value(s, p))
          << "step " << step_ << " seq " << id << " pos " << p << "\n"
          << bm_.dump();
  }
  void check_all() {
    std::set<int> used;
    for (const auto& [id, s] : seqs_) {
      check_seq(id, s);
      for (BlockId b : bm_.block_table(SeqId(id))) used.insert(b.value);
    }
    ASSERT_EQ(static_cast<int>(used.size()), bm_.n_blocks_used());
    ASSERT_EQ(bm_.n_blocks_free() + bm_.n_blocks_used(), bm_.n_blocks_total());
  }

  // Writes positions [n_written, n_target) as a forward pass would.
  void write(int32_t id, int32_t n_target) {
    Seq& s = seqs_[id];
    for (int32_t pos = s.n_written; pos < n_target; ++pos) {
      bool out_of_blocks = false;
      const auto copy = bm_.prepare_write(SeqId(id), pos, &out_of_blocks);
      if (out_of_blocks) return;
      if (copy) content_[copy->dst.value] = content_[copy->src.value];
      const BlockId b = bm_.block_table(SeqId(id))[pos / bs_];
      ASSERT_EQ(bm_.refcount(b), 1) << "write into a shared block";
      content_[b.value][pos % bs_] = value(s, pos);
      s.n_written = pos + 1;
    }
  }

  void op_new() {
    if (seqs_.size() >= 10) return op_free(pick());
    const int32_t id = next_id_++;
    Seq s;
    s.salt = rng_() % 4 == 0 ? 1 : 0;
    const auto& p = prefixes_[rng_() % prefixes_.size()];
    const size_t n_pre = rng_() % 3 == 0 ? rng_() % (p.size() + 1) : p.size();
    s.tokens.assign(p.begin(), p.begin() + static_cast<ptrdiff_t>(n_pre));
    append_random(s, 6);
    const int32_t n_cached = bm_.find_cached_prefix(s.tokens, s.salt);
    ASSERT_EQ(n_cached % bs_, 0);
    ASSERT_LT(n_cached, static_cast<int32_t>(s.tokens.size()));
    const int32_t n_target =
        std::min<int32_t>(static_cast<int32_t>(s.tokens.size()), n_cached + 1 + rng_() % 12);
    const int needed = bm_.n_blocks_needed(SeqId(id), n_target, s.tokens, n_cached, s.salt);
    const int n_free = bm_.n_blocks_free();
    const bool ok = bm_.allocate(SeqId(id), n_target, s.tokens, n_cached, s.salt);
    ASSERT_EQ(ok, needed <= n_free) << "step " << step_;
    if (!ok) {
      ASSERT_TRUE(bm_.block_table(SeqId(id)).empty());
      ++n_refused;
      return;
    }
    ASSERT_EQ(bm_.n_blocks_free(), n_free - needed);
    s.n_written = n_cached;
    check_seq(id, s);  // the attached blocks hold exactly this prefix
    n_hit_tokens += n_cached;
    seqs_[id] = s;
    write(id, n_target);
  }

  void op_grow(SeqId seq) {
    Seq& s = seqs_[seq.value];
    if (s.n_written == static_cast<int32_t>(s.tokens.size())) {
      if (s.tokens.size() >= 64) return op_free(seq);
      append_random(s, 4);
    }
    const int32_t n_target =
        std::min<int32_t>(static_cast<int32_t>(s.tokens.size()), s.n_written + 1 + rng_() % 8);
    const int needed = bm_.n_blocks_needed(seq, n_target);
    const int n_free = bm_.n_blocks_free();
    const bool ok = bm_.allocate(seq, n_target);
    ASSERT_EQ(ok, needed <= n_free) << "step " << step_;
    if (ok)
      write(seq.value, n_target);
    else
      ++n_refused;
  }

  void op_cache(SeqId seq) {
    const Seq& s = seqs_[seq.value];
    bm_.cache_blocks(seq, s.tokens, s.n_written, s.salt);
  }

  void op_fork(SeqId src) {
    if (seqs_.size() >= 10) return;
    const int32_t id = next_id_++;
    Seq d = seqs_[src.value];
    bm_.fork(src, SeqId(id), d.n_written);
    d.tokens.resize(d.n_written);  // the fork continues differently (parallel sampling)
    append_random(d, 4);
    seqs_[id] = d;
  }

  void op_truncate(SeqId seq) {
    Seq& s = seqs_[seq.value];
    const int32_t n = static_cast<int32_t>(rng_() % (s.n_written + 1));
    bm_.truncate(seq, n);
    s.n_written = n;
    s.tokens.resize(n);  // rejected draft tokens: what follows will differ
    append_random(s, 6);
  }

  void op_free(SeqId seq) {
    bm_.free(seq);
    seqs_.erase(seq.value);
  }

  BlockManager bm_;
  int bs_;
  std::vector<std::vector<int64_t>> content_;  // [n_blocks][block_size], -1 = never written
  std::mt19937_64 rng_;
  std::vector<std::vector<TokenId>> prefixes_;
  std::map<int32_t, Seq> seqs_;
  int32_t next_id_ = 0;
  int step_ = 0;
};

TEST(BlockManagerProperty, RandomOperationsKeepInvariantsAndServeExactPrefixes) {
  for (uint64_t seed : {1, 2, 3, 4}) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    Simulation sim(seed, hash_block_tokens);
    sim.run(4000);
    if (HasFatalFailure()) return;
    // The run must have exercised what it claims to test.
    EXPECT_GT(sim.n_hit_tokens, 100);
    EXPECT_GT(sim.n_refused, 0);
    EXPECT_GT(sim.bm().stats().n_evictions, 0);
    EXPECT_GT(sim.bm().stats().n_cow_copies, 0);
  }
}

// Few distinct hashes, ignoring parent and salt: collisions everywhere.
BlockHash weak_hash(BlockHash, uint64_t, std::span<const TokenId> tokens) {
  return BlockHash(static_cast<uint64_t>(tokens[0] + tokens[1]) % 5);
}
BlockHash weak_chained_hash(BlockHash parent, uint64_t, std::span<const TokenId> tokens) {
  return BlockHash((parent.value + static_cast<uint64_t>(tokens[0])) % 11);
}

TEST(BlockManagerProperty, CollidingHashesStillServeExactPrefixes) {
  for (BlockHashFn fn : {weak_hash, weak_chained_hash})
    for (uint64_t seed : {5, 6}) {
      SCOPED_TRACE("seed " + std::to_string(seed));
      Simulation sim(seed, fn);
      sim.run(3000);
      if (HasFatalFailure()) return;
    }
}

}  // namespace
}  // namespace tern
