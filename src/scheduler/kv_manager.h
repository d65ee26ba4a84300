// scheduler/kv_manager.h — the KV manager: the only writer of block tables
// and valid lengths. The scheduler reaches it through KvAllocator (find the
// cached prefix, allocate slots, free, swap, commit accepted positions, roll
// rejected ones back); the model runner reads block tables and pool views.
//
// One pool per KV group, as the model declares them (kv/cache_spec.h):
//   FullAttention  blocks for every position;
//   SlidingWindow  blocks wholly before the window of the next token to be
//                  computed are released while the sequence runs (their
//                  table entries become BlockManager::kNoBlock);
//   Recurrent      no blocks: one state slot per running sequence, in the
//                  group's state pool (kv/state_pool.h); the group's block
//                  table of a sequence is that one slot.
// A request that keeps only a window of its past (SchedRequest::window:
// StreamingLLM sinks + window, context shift) also has its full-attention
// blocks between its sink blocks and its window released as it advances, takes
// no prefix-cache hit and is never swapped (its table has holes); only its
// blocks (and snapshots) before SeqWindow::exact_until, computed from the whole
// past, are registered for others.
// Attention groups allocate in lockstep (same block size and count), so the
// scheduler sees one pool: free = the least free group, needed = the most.
//
// Prefix caching: full blocks are registered only in commit(), i.e. for
// positions update() accepted; a rolled-back tail never reaches the index.
// With a recurrent group a prompt's state is also snapshotted every
// snapshot_interval positions (reserve_snapshot(), written by the forward
// pass, usable once commit() accepts those positions), and a request whose
// prompt starts with a snapshot's tokens starts from a copy of it
// (n_tokens_cached(), allocate_slots()); a hybrid (attention and recurrent
// groups) starts from the longest snapshot its cached blocks also cover, the
// blocks attached up to there. Snapshots are evicted LRU.
// Swapping: full-attention groups and the recurrent groups' state slot
// (copied out whole, F32 and uncompressed: a state's mantissas do not
// compress, with a checksum per group), together for a hybrid; otherwise
// (sliding windows, windowed requests) swap_out() refuses and the scheduler
// recomputes. A copy that does not restore whole (its checksums,
// kv/paged_kv_cache.h) is dropped and the request recomputed: never wrong K/V.
// Threading: not thread-safe; the engine step loop owns it.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "kv/cache_spec.h"
#include "kv/paged_kv_cache.h"
#include "kv/state_pool.h"
#include "scheduler/scheduler.h"

namespace tern {

struct KvManagerConfig {
  int n_blocks = 0;        // per attention group
  int block_size = 16;
  bool prefix_caching = true;
  SwapCompression swap_compression = SwapCompression::None;
  int n_state_slots = 0;   // recurrent groups: sequences that can hold a state at once
  // Recurrent groups: prefix caching by snapshots of a prompt's state every
  // snapshot_interval positions (0 slots: off), kept in slots of their own.
  int n_snapshot_slots = 0;
  int snapshot_interval = 128;
};

class KvManager final : public KvAllocator {
 public:
  // IoError naming the size when a pool cannot be mapped.
  static Result<std::unique_ptr<KvManager>> create(std::vector<KvCacheSpec> specs, const KvManagerConfig& config);
  ~KvManager() override;

  // KvAllocator
  int n_blocks_total() const override;
  int n_blocks_free() const override;
  int n_blocks_needed(const SchedRequest& r, int32_t n_tokens_total) const override;
  int32_t n_tokens_cached(const SchedRequest& r) const override;
  bool allocate_slots(const SchedRequest& r, int32_t n_tokens_total) override;
  void free_slots(const SchedRequest& r) override;
  bool swap_out(const SchedRequest& r) override;
  SwapIn swap_in(const SchedRequest& r) override;
  void commit(const SchedRequest& r) override;
  void rollback(const SchedRequest& r, int32_t n_valid) override;

  // What the model runner reads.
  int n_groups() const { return static_cast<int>(specs_.size()); }
  const KvCacheSpec& spec(int g) const { return specs_[static_cast<size_t>(g)]; }
  KvPoolView pool(int g) const;                                 // a recurrent group's: its state pool
  std::span<const BlockId> block_table(int g, SeqId seq) const;  // a recurrent group's: {state slot} or empty
  int32_t state_slot(SeqId seq) const;                          // -1 when it holds none
  // A slot for the state of r's first `position` tokens, which r's next pass
  // computes; -1 when snapshots are off, the prefix has one, or every slot
  // holds one still being written.
  int32_t reserve_snapshot(const SchedRequest& r, int32_t position);
  // 0: no snapshots (off, or a model with attention layers: their blocks are the prefix cache).
  int snapshot_interval() const { return snapshots_on() ? config_.snapshot_interval : 0; }
  int64_t snapshot_lookup_tokens() const { return snapshot_lookup_tokens_; }
  int64_t snapshot_hit_tokens() const { return snapshot_hit_tokens_; }
  size_t state_bytes() const;       // every recurrent group's state pool
  size_t state_slot_bytes() const;  // one sequence's state in every recurrent group
  int block_size() const { return config_.block_size; }
  // Positions of seq whose K/V are accepted (commit) and still held.
  int32_t n_valid(SeqId seq) const;
  // A request that evicts by importance (SeqWindow::evict): where its next
  // pass, up to position n_positions, adds the attention mass its positions
  // receive; {nullptr} when it collects none now. commit() evicts from it.
  KvMass mass_for(const SchedRequest& r, int32_t n_positions);
  int64_t n_blocks_evicted() const { return n_blocks_evicted_; }

  // Figures (the first attention group's; the others move in lockstep).
  bool has_blocks() const { return !groups_.empty(); }  // false: state-space layers only
  const BlockManager& blocks() const;                   // needs has_blocks()
  int n_state_slots() const { return has_recurrent_ ? config_.n_state_slots : 0; }
  int n_state_slots_used() const { return static_cast<int>(state_of_.size()); }
  size_t block_bytes() const;
  std::string dump() const;

 private:
  explicit KvManager(std::vector<KvCacheSpec> specs, const KvManagerConfig& config);
  // Attention groups (every group but recurrent ones) with their storage.
  struct Group {
    int index;
    KvCacheSpec spec;
    std::unique_ptr<PagedKvCache> cache;
  };
  void release_behind_window(Group& g, SeqId seq, int32_t first_needed);
  // A windowed request's blocks no token from n_computed on reads: table entries [first, second).
  std::pair<int, int> outside_window(const SchedRequest& r) const;
  void release_outside_window(Group& g, const SchedRequest& r);
  int n_outside_window(const Group& g, const SchedRequest& r) const;  // of those, still held

  std::vector<KvCacheSpec> specs_;
  KvManagerConfig config_;
  std::vector<Group> groups_;
  struct States {
    int index;
    std::unique_ptr<StatePool> pool;
  };
  std::vector<States> states_;  // recurrent groups' state pools (running slots, then snapshot slots)
  struct Snapshot {
    std::vector<TokenId> tokens;  // the prefix whose state the slot holds
    int32_t slot = -1;
    bool ready = false;           // its positions were committed
    SeqId writer;                 // the sequence whose pass writes it
    uint64_t last_used = 0;
  };
  // The ready snapshot of the longest prefix of r's tokens shorter than n (so that a token is left to compute).
  const Snapshot* find_snapshot(const SchedRequest& r, int32_t n) const;
  bool snapshots_on() const { return has_recurrent_ && config_.n_snapshot_slots > 0 && (groups_.empty() || prefix_caching_); }
  std::vector<Snapshot> snapshots_;
  uint64_t snapshot_clock_ = 0;
  mutable int64_t snapshot_lookup_tokens_ = 0, snapshot_hit_tokens_ = 0;
  bool prefix_caching_ = true;
  bool has_recurrent_ = false;
  std::unordered_map<SeqId, std::vector<SwappedKv>> swapped_;  // per attention group
  struct SwappedState {
    std::vector<std::vector<std::byte>> groups;  // each recurrent group's slot, as it was
    std::vector<uint64_t> checksums;             // core/hash.h checksum64 of each, taken before it was stored
  };
  std::unordered_map<SeqId, SwappedState> swapped_states_;
  bool swap_out_state(const SchedRequest& r);
  bool state_copy_intact(const SwappedState& copy) const;
  void restore_state(SeqId seq, const SwappedState& copy);
  // KV eviction by importance: each evicting sequence's summed attention
  // mass per position, and where its first eviction came (positions from
  // there on were computed from a partial past). A SnapKV sequence's entry
  // goes once it has chosen.
  struct Evicting {
    std::vector<uint64_t> mass;
    int32_t evicted_at = INT32_MAX;
    bool chosen = false;  // SnapKV: done
  };
  std::unordered_map<SeqId, Evicting> evicting_;
  int64_t n_blocks_evicted_ = 0;
  void evict(const SchedRequest& r);
  std::vector<int32_t> free_states_;                           // recurrent state slots
  std::unordered_map<SeqId, BlockId> state_of_;  // the slot, as a one-entry block table
};

}  // namespace tern
