// The KV manager without a model: lockstep allocation over groups, rollback
// of a rejected tail (blocks freed, the prefix index untouched by rejected
// tokens), commit registering only accepted blocks, sliding windows releasing
// blocks behind them while prefix chains survive, recurrent state slots.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <numeric>
#include <vector>

#include "scheduler/kv_manager.h"

namespace tern {
namespace {

constexpr int kBs = 4;

KvCacheSpec full_spec(int n_layer = 2) {
  KvCacheSpec s;
  s.kind = CacheKind::FullAttention;
  s.n_layer = n_layer;
  s.n_kv_head = 1;
  s.head_dim = 4;
  s.type = KvType::F32;
  return s;
}

KvCacheSpec window_spec(int32_t window) {
  KvCacheSpec s = full_spec();
  s.kind = CacheKind::SlidingWindow;
  s.window = window;
  return s;
}

std::unique_ptr<KvManager> make(std::vector<KvCacheSpec> specs, int n_blocks = 16, bool prefix = true) {
  KvManagerConfig c;
  c.n_blocks = n_blocks;
  c.block_size = kBs;
  c.prefix_caching = prefix;
  c.n_state_slots = 2;
  auto m = KvManager::create(std::move(specs), c);
  EXPECT_TRUE(m.is_ok()) << m.status().message();
  return m.is_ok() ? std::move(m).value() : nullptr;
}

SchedRequest request(uint64_t id, int n_tokens, int first_token = 100) {
  SchedRequest r;
  r.id = RequestId(id);
  r.seq = SeqId(static_cast<int32_t>(id));
  r.tokens.resize(static_cast<size_t>(n_tokens));
  std::iota(r.tokens.begin(), r.tokens.end(), first_token);
  r.n_prompt = r.n_tokens = n_tokens;
  return r;
}

// Computes tokens [n_computed, n) of r as a step would: allocate, then commit.
void compute(KvManager& kv, SchedRequest& r, int32_t n) {
  ASSERT_TRUE(kv.allocate_slots(r, n));
  r.n_computed = n;
  kv.commit(r);
}

TEST(KvManager, RollbackFreesBlocksAndRejectedTokensNeverReachThePrefixIndex) {
  auto kv = make({full_spec()});
  ASSERT_TRUE(kv);
  SchedRequest r = request(1, 10);
  compute(*kv, r, 10);  // blocks 0, 1 full and registered; block 2 holds 2 positions
  EXPECT_EQ(kv->blocks().n_blocks_used(), 3);
  EXPECT_EQ(kv->blocks().n_blocks_cached(), 2);
  // A speculative step: 6 draft tokens scheduled (positions 10..15), only 1 accepted.
  for (int t = 0; t < 6; ++t) r.tokens.push_back(900 + t);
  r.n_tokens = 16;
  ASSERT_TRUE(kv->allocate_slots(r, 16));  // blocks 2 and 3
  EXPECT_EQ(kv->blocks().n_blocks_used(), 4);
  r.n_computed = 11;
  kv->rollback(r, 11);
  r.tokens.resize(11);
  r.n_tokens = 11;
  kv->commit(r);
  EXPECT_EQ(kv->blocks().n_blocks_used(), 3) << "block 3 held only rejected positions";
  EXPECT_EQ(kv->n_valid(r.seq), 11);
  EXPECT_EQ(kv->blocks().n_blocks_cached(), 2) << "the block the drafts would have filled was not registered";
  // The rejected tokens are not findable; the accepted prefix is.
  SchedRequest drafts = request(2, 14);
  std::copy(r.tokens.begin(), r.tokens.begin() + 10, drafts.tokens.begin());
  for (int t = 10; t < 14; ++t) drafts.tokens[static_cast<size_t>(t)] = 900 + (t - 10);
  EXPECT_EQ(kv->n_tokens_cached(drafts), 8);
  EXPECT_EQ(kv->blocks().check_invariants(), "");
  kv->free_slots(r);
  EXPECT_EQ(kv->blocks().n_blocks_used(), 0);
}

TEST(KvManager, AttentionGroupsAllocateInLockstepAllOrNothing) {
  auto kv = make({full_spec(2), full_spec(3)}, 4);
  ASSERT_TRUE(kv);
  SchedRequest a = request(1, 12);
  compute(*kv, a, 12);  // 3 blocks in each group
  EXPECT_EQ(kv->n_blocks_free(), 1);
  EXPECT_EQ(kv->block_table(0, a.seq).size(), 3u);
  EXPECT_EQ(kv->block_table(1, a.seq).size(), 3u);
  SchedRequest b = request(2, 8, 500);
  EXPECT_EQ(kv->n_blocks_needed(b, 8), 2);
  EXPECT_FALSE(kv->allocate_slots(b, 8));
  EXPECT_TRUE(kv->block_table(0, b.seq).empty()) << "a refused allocation changes nothing";
  EXPECT_TRUE(kv->block_table(1, b.seq).empty());
  EXPECT_EQ(kv->pool(1).n_layer, 3);
}

TEST(KvManager, SlidingWindowReleasesBlocksBehindItAndKeepsTheChainFindable) {
  auto kv = make({window_spec(5)});
  ASSERT_TRUE(kv);
  SchedRequest r = request(1, 1);
  // Decode one position at a time up to 20: at most the window's blocks (plus
  // the one being written) stay in use.
  for (int32_t n = 1; n <= 20; ++n) {
    if (n > 1) {
      r.tokens.push_back(100 + n - 1);
      r.n_tokens = n;
    }
    compute(*kv, r, n);
    // The next token (position n) reads positions n-4 .. n.
    const int32_t first_needed = std::max(0, n - 5 + 1);
    const auto table = kv->block_table(0, r.seq);
    for (size_t i = 0; i < table.size(); ++i) {
      const bool released = table[i] == BlockManager::kNoBlock;
      if (static_cast<int32_t>(i + 1) * kBs <= first_needed - kBs) {
        EXPECT_TRUE(released) << "block " << i << " at n=" << n;
      }
      if (static_cast<int32_t>(i + 1) * kBs > first_needed) {
        EXPECT_FALSE(released) << "block " << i << " at n=" << n;
      }
    }
    EXPECT_LE(kv->blocks().n_blocks_used(), 3) << "n=" << n;
  }
  EXPECT_EQ(kv->blocks().check_invariants(), "");
  // Released blocks were registered before they went: a new request with the
  // same tokens finds the whole chain (they wait in the LRU).
  SchedRequest again = request(2, 20);
  std::copy(r.tokens.begin(), r.tokens.end(), again.tokens.begin());
  EXPECT_EQ(kv->n_tokens_cached(again), 16);
  kv->free_slots(r);
  EXPECT_EQ(kv->blocks().n_blocks_used(), 0);
  EXPECT_EQ(kv->blocks().check_invariants(), "");
}

// A streaming sequence (SchedRequest::window: 2 sinks + a window of 6, blocks
// of 4) keeps exactly its sinks' block and the blocks its window touches,
// releases the rest before it allocates (a pool with no block to spare still
// decodes), takes no prefix hit and is not swapped.
TEST(KvManager, StreamingSequenceKeepsItsSinkBlockAndItsWindow) {
  auto kv = make({full_spec()}, /*n_blocks=*/4);
  ASSERT_TRUE(kv);
  SchedRequest r = request(1, 1);
  r.window = SeqWindow{2, 6, 0};
  for (int32_t n = 1; n <= 40; ++n) {
    if (n > 1) {
      r.tokens.push_back(100 + n - 1);
      r.n_tokens = n;
    }
    ASSERT_LE(kv->n_blocks_needed(r, n), kv->n_blocks_free()) << "n=" << n;
    compute(*kv, r, n);
    // Token n-1 read positions 0, 1 and [n-6, n-1]: entries 0 and those blocks are held, no other.
    const auto table = kv->block_table(0, r.seq);
    const int32_t lo = r.window.lo(n - 1);
    for (size_t i = 0; i < table.size(); ++i) {
      const int32_t b0 = static_cast<int32_t>(i) * kBs;
      const bool needed = i == 0 || b0 + kBs > std::min(lo, n - 1);
      EXPECT_EQ(table[i] != BlockManager::kNoBlock, needed) << "entry " << i << " at n=" << n;
    }
    EXPECT_LE(kv->blocks().n_blocks_used(), 4) << "n=" << n;
  }
  EXPECT_EQ(kv->blocks().check_invariants(), "");
  EXPECT_FALSE(kv->swap_out(r)) << "a table with holes cannot be swapped";
  SchedRequest again = request(2, 20);
  again.window = r.window;
  EXPECT_EQ(kv->n_tokens_cached(again), 0) << "a streaming sequence computes its prompt";
  kv->free_slots(r);
  EXPECT_EQ(kv->blocks().n_blocks_used(), 0);
}

// Context shift: kv_lo jumps by half of what follows the sinks, to a block
// boundary, when the blocks kept would pass the context; never past n_computed.
TEST(SeqWindow, ContextShiftCutsTheOlderHalfOnBlockBoundaries) {
  SeqWindow w;
  w.n_sink = 4;
  w.shift_ctx = 64;
  w.block_size = 16;
  w.shift_to_fit(63, 64);  // 4 blocks: fits
  EXPECT_EQ(w.kv_lo, 0);
  w.shift_to_fit(64, 65);  // a 5th block: cut (64 - 4) / 2 = 30 after the sinks -> 34 -> 48
  EXPECT_EQ(w.kv_lo, 48);
  EXPECT_EQ(w.lo(64), 48);
  EXPECT_EQ(w.sink_position(64), 64 - 44);  // the sinks' distance is the kept cache's
  w.shift_to_fit(80, 81);  // blocks 0, 3, 4, 5: fits
  EXPECT_EQ(w.kv_lo, 48);
  w.shift_to_fit(96, 97);  // blocks 0, 3..6: cut again
  EXPECT_EQ(w.kv_lo, 80);
  SeqWindow recompute = w;
  recompute.shift_to_fit(0, 97);  // from scratch: a token reads itself, so nothing is cut past 0
  EXPECT_EQ(recompute.kv_lo, 80);
  SeqWindow stream{4, 10, 0};
  EXPECT_EQ(stream.lo(5), 4);
  EXPECT_EQ(stream.sink_position(5), 5);  // the window still covers the sinks
  EXPECT_EQ(stream.lo(100), 91);
  EXPECT_EQ(stream.sink_position(100), 13);  // sinks 0..3, then the window at 4..13
}

TEST(KvManager, RecurrentGroupsHoldOneStateSlotPerSequence) {
  KvCacheSpec state;
  state.kind = CacheKind::Recurrent;
  state.n_layer = 2;
  state.state_floats = 100;
  auto kv = make({full_spec(), state});
  ASSERT_TRUE(kv);
  SchedRequest a = request(1, 6), b = request(2, 6, 300), c = request(3, 6, 600);
  ASSERT_TRUE(kv->allocate_slots(a, 6));
  ASSERT_TRUE(kv->allocate_slots(b, 6));
  EXPECT_NE(kv->state_slot(a.seq), kv->state_slot(b.seq));
  EXPECT_GE(kv->state_slot(a.seq), 0);
  EXPECT_FALSE(kv->allocate_slots(c, 6)) << "two state slots";
  EXPECT_EQ(kv->state_slot(c.seq), -1);
  EXPECT_EQ(kv->n_tokens_cached(a), 0) << "no state snapshots configured: no prefix hit";
  // A hybrid's swap moves the blocks and the state together, and brings both back.
  float* sa = kv->pool(1).state(kv->state_slot(a.seq), 0);
  for (int i = 0; i < 200; ++i) sa[i] = static_cast<float>(i) - 0.25f;
  const std::vector<float> want(sa, sa + 200);
  a.n_computed = 6;
  kv->commit(a);
  const size_t n_table = kv->block_table(0, a.seq).size();
  const int used = kv->blocks().n_blocks_used();
  ASSERT_TRUE(kv->swap_out(a));
  EXPECT_EQ(kv->state_slot(a.seq), -1);
  EXPECT_TRUE(kv->block_table(0, a.seq).empty());
  EXPECT_EQ(kv->blocks().n_blocks_used(), used - static_cast<int>(n_table));
  ASSERT_TRUE(kv->allocate_slots(c, 6)) << "a's slot is free";
  EXPECT_EQ(kv->swap_in(a), KvAllocator::SwapIn::NoRoom) << "both state slots are held";
  EXPECT_TRUE(kv->block_table(0, a.seq).empty()) << "NoRoom takes no block";
  kv->free_slots(c);
  ASSERT_EQ(kv->swap_in(a), KvAllocator::SwapIn::Restored);
  EXPECT_EQ(kv->block_table(0, a.seq).size(), n_table);
  const float* back = kv->pool(1).state(kv->state_slot(a.seq), 0);
  EXPECT_EQ(std::vector<float>(back, back + 200), want);
  kv->free_slots(a);
  EXPECT_TRUE(kv->block_table(1, a.seq).empty()) << "a freed sequence names no slot";
  EXPECT_TRUE(kv->allocate_slots(c, 6));
  // The recurrent group's table is the slot; its pool is the state pool (2 slots of 2 layers x 100 floats).
  ASSERT_EQ(kv->block_table(1, c.seq).size(), 1u);
  EXPECT_EQ(kv->block_table(1, c.seq)[0].value, kv->state_slot(c.seq));
  const KvPoolView states = kv->pool(1);
  ASSERT_NE(states.base, nullptr);
  EXPECT_EQ(states.n_blocks, 2);
  EXPECT_EQ(states.row_bytes, 400u);
  EXPECT_EQ(states.state(1, 1), reinterpret_cast<float*>(states.base + 800 + 400));
  EXPECT_EQ(kv->state_bytes(), 1600u);
  EXPECT_EQ(kv->state_slot_bytes(), 800u);
  EXPECT_EQ(kv->n_state_slots(), 2);
  EXPECT_EQ(kv->n_state_slots_used(), 2);
}

// A model of state-space layers only: the scheduler counts state slots (a
// sequence needs one until it holds one), and a swapped state comes back
// byte for byte into whichever slot is free, or is reported lost when its
// copy was damaged.
TEST(KvManager, AStateOnlyModelCountsSlotsAndSwapsTheState) {
  KvCacheSpec state;
  state.kind = CacheKind::Recurrent;
  state.n_layer = 2;
  state.state_floats = 100;
  auto kv = make({state});
  ASSERT_TRUE(kv);
  EXPECT_FALSE(kv->has_blocks());
  SchedRequest a = request(1, 6), b = request(2, 6, 300);
  EXPECT_EQ(kv->n_blocks_total(), 2);
  EXPECT_EQ(kv->n_blocks_needed(a, 6), 1);
  ASSERT_TRUE(kv->allocate_slots(a, 6));
  EXPECT_EQ(kv->n_blocks_needed(a, 600), 0) << "a sequence holding a slot needs nothing more";
  EXPECT_EQ(kv->n_blocks_free(), 1);
  const KvPoolView v = kv->pool(0);
  float* sa = v.state(kv->state_slot(a.seq), 0);
  for (int i = 0; i < 200; ++i) sa[i] = static_cast<float>(i) + 0.5f;
  const std::vector<float> want(sa, sa + 200);
  ASSERT_TRUE(kv->swap_out(a));
  EXPECT_EQ(kv->state_slot(a.seq), -1);
  EXPECT_EQ(kv->n_blocks_free(), 2);
  ASSERT_TRUE(kv->allocate_slots(b, 6));  // b takes a slot (perhaps a's)
  float* sb = v.state(kv->state_slot(b.seq), 0);
  std::fill(sb, sb + 200, -1.0f);
  ASSERT_EQ(kv->swap_in(a), KvAllocator::SwapIn::Restored);
  ASSERT_GE(kv->state_slot(a.seq), 0);
  EXPECT_NE(kv->state_slot(a.seq), kv->state_slot(b.seq));
  const float* back = v.state(kv->state_slot(a.seq), 0);
  EXPECT_EQ(std::vector<float>(back, back + 200), want);
  // No slot free: NoRoom, nothing changes; a damaged copy: Lost.
  ASSERT_TRUE(kv->swap_out(a));
  SchedRequest c = request(3, 6, 600);
  ASSERT_TRUE(kv->allocate_slots(c, 6));
  EXPECT_EQ(kv->swap_in(a), KvAllocator::SwapIn::NoRoom);
  kv->free_slots(c);
  corrupt_swaps_for_testing(true);
  ASSERT_TRUE(kv->swap_out(b));
  corrupt_swaps_for_testing(false);
  EXPECT_EQ(kv->swap_in(b), KvAllocator::SwapIn::Lost);
  EXPECT_EQ(kv->swap_in(a), KvAllocator::SwapIn::Restored);
  kv->free_slots(a);
  EXPECT_EQ(kv->n_state_slots_used(), 0);
}

TEST(KvManager, SwapRoundTripRestoresTheTable) {
  auto kv = make({full_spec(), full_spec(1)}, 8, /*prefix=*/false);
  ASSERT_TRUE(kv);
  SchedRequest r = request(1, 9);
  compute(*kv, r, 9);
  ASSERT_TRUE(kv->swap_out(r));
  EXPECT_EQ(kv->blocks().n_blocks_used(), 0);
  EXPECT_EQ(kv->n_blocks_needed(r, 9), 3);
  ASSERT_EQ(kv->swap_in(r), KvAllocator::SwapIn::Restored);
  EXPECT_EQ(kv->block_table(0, r.seq).size(), 3u);
  EXPECT_EQ(kv->block_table(1, r.seq).size(), 3u);
  EXPECT_EQ(kv->n_valid(r.seq), 9);
}

}  // namespace
}  // namespace tern

namespace tern {
namespace {

// update() accepting fewer tokens than were scheduled: progress moves back,
// the KV manager rolls the tail back, and the next step schedules it again.
TEST(SchedulerUpdate, FewerAcceptedTokensMoveProgressBack) {
  auto kv = make({full_spec()});
  ASSERT_TRUE(kv);
  SchedulerConfig cfg;
  cfg.max_batched_tokens = 64;
  Scheduler sched(cfg);
  SchedRequest r = request(1, 10);
  r.max_tokens = 4;
  sched.add(r);
  const SchedulerOutput out = sched.schedule(*kv, 0);
  ASSERT_EQ(out.chunks.size(), 1u);
  ASSERT_EQ(out.chunks[0].n_tokens, 10);
  EXPECT_EQ(kv->block_table(0, r.seq).size(), 3u);
  std::vector<ChunkResult> res(1);
  res[0].n_accepted = 6;  // positions 6..9 rejected: no token is sampled from them
  EXPECT_TRUE(sched.update(out, res, *kv).empty());
  const SchedRequest* after = sched.find(r.id);
  EXPECT_EQ(after->n_computed, 6);
  EXPECT_EQ(after->n_tokens, 10) << "prompt tokens are never dropped";
  EXPECT_EQ(kv->n_valid(r.seq), 6);
  EXPECT_EQ(kv->block_table(0, r.seq).size(), 2u) << "block 2 held only rejected positions";
  EXPECT_EQ(kv->blocks().n_blocks_cached(), 1) << "only the fully accepted block is registered";
  const SchedulerOutput again = sched.schedule(*kv, 1);
  ASSERT_EQ(again.chunks.size(), 1u);
  EXPECT_EQ(again.chunks[0].n_tokens, 4);
  res[0].n_accepted = 4;
  res[0].new_tokens = {7, 8};  // more than one token from one step (a speculative step's accepted drafts)
  const std::vector<RequestUpdate> up = sched.update(again, res, *kv);
  ASSERT_EQ(up.size(), 1u);
  EXPECT_EQ(up[0].new_tokens, (std::vector<TokenId>{7, 8}));
  EXPECT_EQ(sched.find(r.id)->n_tokens, 12);
  EXPECT_EQ(sched.find(r.id)->tokens.back(), 8);
}

TEST(SchedulerUpdate, StopTokenLengthAndPositionLimitEndRequests) {
  auto kv = make({full_spec()});
  ASSERT_TRUE(kv);
  Scheduler sched(SchedulerConfig{});
  SchedRequest a = request(1, 4), b = request(2, 4, 200), c = request(3, 4, 300);
  a.max_tokens = b.max_tokens = c.max_tokens = 10;
  a.stop_token_ids = {2};
  b.max_tokens = 2;
  c.max_positions = 6;
  for (auto* r : {&a, &b, &c}) sched.add(*r);
  const SchedulerOutput out = sched.schedule(*kv, 0);
  ASSERT_EQ(out.chunks.size(), 3u);
  std::vector<ChunkResult> res(3);
  for (size_t i = 0; i < 3; ++i) {
    res[i].n_accepted = out.chunks[i].n_tokens;
    res[i].new_tokens = {5, 2, 6};  // three tokens at once: the stop conditions cut the list
  }
  std::map<uint64_t, RequestUpdate> by_id;
  for (const RequestUpdate& u : sched.update(out, res, *kv)) by_id[u.id.value] = u;
  EXPECT_EQ(by_id[1].stop, StopReason::StopToken);
  EXPECT_EQ(by_id[1].new_tokens, (std::vector<TokenId>{5, 2}));
  EXPECT_EQ(by_id[2].stop, StopReason::Length);
  EXPECT_EQ(by_id[2].new_tokens, (std::vector<TokenId>{5, 2}));
  EXPECT_EQ(by_id[3].stop, StopReason::Context);
  EXPECT_EQ(by_id[3].new_tokens, (std::vector<TokenId>{5, 2}));
}

}  // namespace
}  // namespace tern
