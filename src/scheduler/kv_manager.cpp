#include "scheduler/kv_manager.h"

#include <algorithm>
#include <cstring>
#include <new>

#include "core/assert.h"
#include "core/hash.h"
#include "core/log.h"

namespace tern {

KvManager::KvManager(std::vector<KvCacheSpec> specs, const KvManagerConfig& config)
    : specs_(std::move(specs)), config_(config) {}

KvManager::~KvManager() = default;

Result<std::unique_ptr<KvManager>> KvManager::create(std::vector<KvCacheSpec> specs, const KvManagerConfig& config) {
  if (config.n_blocks < 1 || config.block_size < 1)
    return error(ErrorKind::InvalidArgument, "KV manager: blocks and block size must be >= 1");
  std::unique_ptr<KvManager> m(new KvManager(std::move(specs), config));
  bool recurrent = false;
  for (size_t g = 0; g < m->specs_.size(); ++g) {
    const KvCacheSpec& s = m->specs_[g];
    if (s.kind == CacheKind::Recurrent) {
      recurrent = true;
      if (config.n_state_slots < 1)
        return error(ErrorKind::InvalidArgument, "KV manager: a recurrent group needs state slots");
      auto states = StatePool::create(s, config.n_state_slots + std::max(0, config.n_snapshot_slots));  // room for snapshots
      TERN_RETURN_IF_ERROR(states.status());
      m->states_.push_back({static_cast<int>(g), std::move(states).value()});
      continue;
    }
    const KvShape shape{s.n_layer, s.n_kv_head, s.head_dim, s.type};
    auto cache = PagedKvCache::create(shape, config.n_blocks, config.block_size, config.prefix_caching);
    TERN_RETURN_IF_ERROR(cache.status());
    m->groups_.push_back({static_cast<int>(g), s, std::move(cache).value()});
  }
  m->prefix_caching_ = config.prefix_caching;
  m->has_recurrent_ = recurrent;
  if (recurrent)
    for (int32_t i = config.n_state_slots; i-- > 0;) m->free_states_.push_back(i);
  return m;
}

// A model of state-space layers only has no blocks: the scheduler counts its
// state slots instead (a sequence needs one until it holds one), so admission
// waits for a slot and the priority policy preempts for one.
int KvManager::n_blocks_total() const {
  if (groups_.empty()) return has_recurrent_ ? config_.n_state_slots : config_.n_blocks;
  return blocks().n_blocks_total();
}

int KvManager::n_blocks_free() const {
  if (groups_.empty()) return has_recurrent_ ? static_cast<int>(free_states_.size()) : config_.n_blocks;
  int n = INT32_MAX;
  for (const Group& g : groups_) n = std::min(n, g.cache->blocks().n_blocks_free());
  return n;
}

int KvManager::n_blocks_needed(const SchedRequest& r, int32_t n_tokens_total) const {
  if (swapped_.contains(r.seq)) {  // swap_in restores into fresh blocks, no prefix hit
    return (n_tokens_total + config_.block_size - 1) / config_.block_size;
  }
  if (groups_.empty()) return has_recurrent_ && !state_of_.contains(r.seq) ? 1 : 0;
  int n = 0;
  for (const Group& g : groups_) {
    const BlockManager& bm = g.cache->blocks();
    const bool fresh = bm.block_table(r.seq).empty();
    int need = bm.n_blocks_needed(r.seq, n_tokens_total, r.tokens, fresh ? n_tokens_cached(r) : 0);
    if (g.spec.kind == CacheKind::FullAttention && r.window.active())
      need = std::max(0, need - n_outside_window(g, r));  // allocate_slots gives those back first
    n = std::max(n, need);
  }
  return n;
}

const KvManager::Snapshot* KvManager::find_snapshot(const SchedRequest& r, int32_t n) const {
  const Snapshot* best = nullptr;
  for (const Snapshot& sn : snapshots_) {
    const auto len = static_cast<int32_t>(sn.tokens.size());
    if (!sn.ready || len >= n || len > static_cast<int32_t>(r.tokens.size()) ||
        (best && len <= static_cast<int32_t>(best->tokens.size())))
      continue;
    if (std::equal(sn.tokens.begin(), sn.tokens.end(), r.tokens.begin())) best = &sn;
  }
  return best;
}

int32_t KvManager::reserve_snapshot(const SchedRequest& r, int32_t position) {
  if (!snapshots_on() || position <= 0 || position > static_cast<int32_t>(r.tokens.size())) return -1;
  if (position > r.window.exact_until) return -1;  // a state computed from a partial past serves no one
  Snapshot* victim = nullptr;
  for (Snapshot& sn : snapshots_) {
    if (static_cast<int32_t>(sn.tokens.size()) == position &&
        std::equal(sn.tokens.begin(), sn.tokens.end(), r.tokens.begin()))
      return -1;  // this prefix has one (or one is being written)
    if (sn.ready && (!victim || sn.last_used < victim->last_used)) victim = &sn;
  }
  if (static_cast<int>(snapshots_.size()) < config_.n_snapshot_slots) {
    snapshots_.push_back({});
    victim = &snapshots_.back();
    victim->slot = config_.n_state_slots + static_cast<int32_t>(snapshots_.size()) - 1;
  }
  if (!victim) return -1;
  victim->tokens.assign(r.tokens.begin(), r.tokens.begin() + position);
  victim->ready = false;
  victim->writer = r.seq;
  victim->last_used = ++snapshot_clock_;
  return victim->slot;
}

int32_t KvManager::n_tokens_cached(const SchedRequest& r) const {
  if (has_recurrent_) {  // a snapshot of a prefix of the prompt (a hybrid's: one its cached blocks cover)
    if (!snapshots_on() || r.compute_prompt || r.window.active() || r.window.evicting()) return 0;
    int32_t limit = r.n_tokens;
    for (const Group& g : groups_) limit = std::min(limit, g.cache->blocks().find_cached_prefix(r.tokens) + 1);
    const Snapshot* sn = find_snapshot(r, limit);
    snapshot_lookup_tokens_ += r.n_tokens;
    const int32_t n = sn ? static_cast<int32_t>(sn->tokens.size()) : 0;
    snapshot_hit_tokens_ += n;
    return n;
  }
  // A windowed sequence computes its prompt (a hit past its window would
  // attach blocks only to release them); its full blocks still serve others.
  // So does an evicting one: its choice needs every prompt query's attention.
  if (!prefix_caching_ || groups_.empty() || r.compute_prompt || r.window.active() || r.window.evicting()) return 0;
  int32_t n = INT32_MAX;
  for (const Group& g : groups_) n = std::min(n, g.cache->blocks().find_cached_prefix(r.tokens));
  return n;
}

bool KvManager::allocate_slots(const SchedRequest& r, int32_t n_tokens_total) {
  // Blocks no token from n_computed on reads go back first (the tail may need
  // them), whatever happens next: no token will read them again.
  if (r.window.active())
    for (Group& g : groups_)
      if (g.spec.kind == CacheKind::FullAttention) release_outside_window(g, r);
  // All or nothing: check every group before changing any.
  if (n_blocks_needed(r, n_tokens_total) > n_blocks_free()) return false;
  const bool needs_state = has_recurrent_ && !state_of_.contains(r.seq);
  if (needs_state && free_states_.empty()) return false;
  for (Group& g : groups_) {
    BlockManager& bm = g.cache->blocks();
    const bool fresh = bm.block_table(r.seq).empty();
    const int32_t n_cached = fresh ? r.n_computed : 0;
    if (!bm.allocate(r.seq, n_tokens_total, r.tokens, n_cached)) {
      TERN_ASSERT_MSG(&g == &groups_.front(), "KV groups went out of lockstep");
      return false;  // the cached prefix was evicted since the lookup
    }
    if (fresh) g.cache->set_n_positions(r.seq, n_cached);
    // Copy-on-write for positions about to be written into shared blocks
    // (never needed by the engine's own sequences, which share only full,
    // immutable prefix blocks; kept for forks).
    const Status cow = g.cache->reserve(r.seq, n_tokens_total);
    TERN_ASSERT_MSG(cow.is_ok(), cow.message().c_str());
    if (g.spec.frees_old_blocks()) release_behind_window(g, r.seq, r.n_computed - g.spec.window + 1);
  }
  if (needs_state) {
    state_of_[r.seq] = BlockId(free_states_.back());
    free_states_.pop_back();
    if (r.n_computed > 0) {  // admitted on a snapshot of its prefix: start from a copy of it
      const Snapshot* sn = find_snapshot(r, r.n_computed + 1);
      TERN_ASSERT_MSG(sn && static_cast<int32_t>(sn->tokens.size()) == r.n_computed,
                      "a recurrent state starts from 0 or from its prefix's snapshot");
      for (const States& st : states_) {
        const KvPoolView v = st.pool->view();
        std::memcpy(v.state(state_of_[r.seq].value, 0), v.state(sn->slot, 0), v.block_bytes);
      }
      snapshots_[static_cast<size_t>(sn - snapshots_.data())].last_used = ++snapshot_clock_;
    }
  }
  return true;
}

// A windowed sequence's blocks wholly between its sink blocks and the first
// position a token from n_computed on reads (never past n_computed: those
// tokens write their own positions) are read by no token from here on.
std::pair<int, int> KvManager::outside_window(const SchedRequest& r) const {
  const int bs = config_.block_size;
  const int32_t first_needed = std::min(r.n_computed, r.window.lo(r.n_computed));
  return {(r.window.n_sink + bs - 1) / bs, first_needed / bs};
}

void KvManager::release_outside_window(Group& g, const SchedRequest& r) {
  const auto [begin, end] = outside_window(r);
  g.cache->blocks().release_range(r.seq, begin, end);
}

int KvManager::n_outside_window(const Group& g, const SchedRequest& r) const {
  const auto [begin, end] = outside_window(r);
  const auto table = g.cache->blocks().block_table(r.seq);
  int n = 0;
  for (int i = begin; i < std::min(end, static_cast<int>(table.size())); ++i)
    n += table[static_cast<size_t>(i)] != BlockManager::kNoBlock ? 1 : 0;
  return n;
}

// Blocks wholly before first_needed are read by no token from here on.
void KvManager::release_behind_window(Group& g, SeqId seq, int32_t first_needed) {
  if (first_needed <= 0) return;
  g.cache->blocks().release_front(seq, first_needed / config_.block_size);
}

void KvManager::free_slots(const SchedRequest& r) {
  // Snapshots r's passes were writing and never committed hold nothing usable.
  // An entry with no tokens is a free slot: matched by no prompt, the first to be reused.
  for (Snapshot& sn : snapshots_)
    if (!sn.ready && sn.writer == r.seq) {
      sn.tokens.clear();
      sn.last_used = 0;
      sn.ready = true;
    }
  for (Group& g : groups_) g.cache->truncate(r.seq, 0);
  evicting_.erase(r.seq);
  swapped_.erase(r.seq);
  swapped_states_.erase(r.seq);
  if (auto it = state_of_.find(r.seq); it != state_of_.end()) {
    free_states_.push_back(it->second.value);
    state_of_.erase(it);
  }
}

// Every recurrent group's slot of r copied to host memory, then r's slots
// (and any snapshot its passes were writing) freed. A hybrid's blocks were
// swapped out before (swap_out).
bool KvManager::swap_out_state(const SchedRequest& r) {
  auto it = state_of_.find(r.seq);
  if (it == state_of_.end()) return false;
  SwappedState copy;
  try {
    for (const States& st : states_) {
      const KvPoolView v = st.pool->view();
      const auto* src = reinterpret_cast<const std::byte*>(v.state(it->second.value, 0));
      std::vector<std::byte> bytes(src, src + v.block_bytes);
      copy.checksums.push_back(checksum64(bytes.data(), bytes.size()));
      if (swaps_corrupted_for_testing() && !bytes.empty()) bytes[bytes.size() / 2] ^= std::byte{0x10};
      copy.groups.push_back(std::move(bytes));
    }
  } catch (const std::bad_alloc&) {
    TERN_LOG_WARN("kv: swap_out: no host memory for a %zu-byte state (recomputing instead)", state_slot_bytes());
    return false;  // the slot is untouched: the scheduler frees it and recomputes
  }
  free_slots(r);
  swapped_states_[r.seq] = std::move(copy);
  return true;
}

bool KvManager::state_copy_intact(const SwappedState& copy) const {
  for (size_t i = 0; i < copy.groups.size(); ++i)
    if (checksum64(copy.groups[i].data(), copy.groups[i].size()) != copy.checksums[i]) {
      TERN_LOG_WARN("kv: swap_in: swapped state of group %zu is corrupt (recomputing instead)", i);
      return false;
    }
  return true;
}

void KvManager::restore_state(SeqId seq, const SwappedState& copy) {
  const int32_t slot = free_states_.back();
  free_states_.pop_back();
  state_of_[seq] = BlockId(slot);
  for (size_t i = 0; i < states_.size(); ++i) {
    const KvPoolView v = states_[i].pool->view();
    std::memcpy(v.state(slot, 0), copy.groups[i].data(), v.block_bytes);
  }
}

bool KvManager::swap_out(const SchedRequest& r) {
  if (r.window.active() || r.window.evicting()) return false;  // its released blocks cannot be restored
  for (const Group& g : groups_)
    if (g.spec.kind != CacheKind::FullAttention) return false;  // released blocks cannot be restored
  if (has_recurrent_ && !state_of_.contains(r.seq)) return false;
  std::vector<SwappedKv> copies;
  for (Group& g : groups_) {
    auto swapped = g.cache->swap_out(r.seq, config_.swap_compression);
    if (!swapped.is_ok()) {
      TERN_LOG_WARN("kv: swap_out: %s (recomputing instead)", swapped.status().message().c_str());
      // The groups already swapped lost their blocks too: recompute is all that is left.
      for (Group& h : groups_) h.cache->truncate(r.seq, 0);
      return false;
    }
    copies.push_back(std::move(swapped).value());
  }
  // Blocks first: swap_out_state frees every slot of r, its blocks included.
  if (has_recurrent_ && !swap_out_state(r)) return false;
  if (!groups_.empty()) swapped_[r.seq] = std::move(copies);
  return true;
}

KvAllocator::SwapIn KvManager::swap_in(const SchedRequest& r) {
  auto st = swapped_states_.find(r.seq);
  if (st != swapped_states_.end()) {  // checked before any block is taken
    if (free_states_.empty()) return SwapIn::NoRoom;
    if (!state_copy_intact(st->second)) {
      swapped_states_.erase(st);
      swapped_.erase(r.seq);
      return SwapIn::Lost;
    }
  }
  if (auto it = swapped_.find(r.seq); it != swapped_.end()) {
    if (n_blocks_needed(r, it->second.empty() ? 0 : it->second.front().n_positions) > n_blocks_free())
      return SwapIn::NoRoom;
    for (size_t i = 0; i < groups_.size(); ++i) {
      const Status s = groups_[i].cache->swap_in(r.seq, it->second[i]);
      if (!s.is_ok()) {
        for (size_t j = 0; j < i; ++j) groups_[j].cache->truncate(r.seq, 0);
        if (s.kind() == ErrorKind::OutOfRange) return SwapIn::NoRoom;
        TERN_LOG_WARN("kv: swap_in: %s (recomputing instead)", s.message().c_str());
        swapped_.erase(it);
        swapped_states_.erase(r.seq);
        return SwapIn::Lost;
      }
    }
    swapped_.erase(it);
  }
  if (st != swapped_states_.end()) {
    restore_state(r.seq, st->second);
    swapped_states_.erase(st);
  }
  return SwapIn::Restored;
}

void KvManager::commit(const SchedRequest& r) {
  for (Snapshot& sn : snapshots_)
    if (!sn.ready && sn.writer == r.seq && static_cast<int32_t>(sn.tokens.size()) <= r.n_computed) sn.ready = true;
  int32_t exact = r.window.exact_until;
  if (auto it = evicting_.find(r.seq); it != evicting_.end()) exact = std::min(exact, it->second.evicted_at);
  for (Group& g : groups_) {
    if (g.cache->blocks().block_table(r.seq).empty()) continue;
    g.cache->set_n_positions(r.seq, r.n_computed);
    if (prefix_caching_) g.cache->cache_blocks(r.seq, r.tokens, 0, exact);
  }
  if (r.window.evicting() && (r.n_computed >= r.n_prompt || r.window.evict_in_prompt)) evict(r);
}

KvMass KvManager::mass_for(const SchedRequest& r, int32_t n_positions) {
  if (!r.window.evicting() || groups_.empty()) return {};
  Evicting& e = evicting_[r.seq];
  if (e.chosen) return {};
  if (e.mass.size() < static_cast<size_t>(n_positions)) e.mass.resize(static_cast<size_t>(n_positions), 0);
  const bool snap = r.window.evict == SeqWindow::Evict::SnapKv;
  return {e.mass.data(), snap ? std::max(0, r.n_prompt - r.window.evict_recent) : 0};
}

// While r holds more than its budget of blocks, the one with the least
// attention mass goes (the older on a tie), never one holding any of the last
// evict_recent positions; in every full-attention group alike (a sliding-
// window group frees its own). SnapKV chooses once.
void KvManager::evict(const SchedRequest& r) {
  auto it = evicting_.find(r.seq);
  if (it == evicting_.end() || it->second.chosen) return;
  Evicting& e = it->second;
  const int bs = config_.block_size;
  const int32_t n = r.n_computed;
  const int first_recent = std::max(0, n - r.window.evict_recent) / bs;
  Group* full = nullptr;
  for (Group& g : groups_)
    if (g.spec.kind == CacheKind::FullAttention) full = full ? full : &g;
  if (full) {
    const auto table = full->cache->blocks().block_table(r.seq);
    const int n_entries = std::min(static_cast<int>(table.size()), (n + bs - 1) / bs);
    int held = 0;
    std::vector<std::pair<uint64_t, int>> candidates;  // (mass, entry)
    for (int i = 0; i < n_entries; ++i) {
      if (table[static_cast<size_t>(i)] == BlockManager::kNoBlock) continue;
      ++held;
      if (i >= first_recent) continue;
      uint64_t m = 0;
      for (int32_t p = i * bs; p < (i + 1) * bs && p < static_cast<int32_t>(e.mass.size()); ++p) m += e.mass[static_cast<size_t>(p)];
      candidates.emplace_back(m, i);
    }
    const int over = held - r.window.evict_blocks;
    if (over > 0) {
      std::sort(candidates.begin(), candidates.end());
      const int n_out = std::min(over, static_cast<int>(candidates.size()));
      for (int k = 0; k < n_out; ++k) {
        const int i = candidates[static_cast<size_t>(k)].second;
        for (Group& g : groups_)
          if (g.spec.kind == CacheKind::FullAttention) g.cache->blocks().release_range(r.seq, i, i + 1);
      }
      if (n_out > 0) e.evicted_at = std::min(e.evicted_at, n);
      n_blocks_evicted_ += n_out;
    }
  }
  if (r.window.evict == SeqWindow::Evict::SnapKv) {
    e.chosen = true;
    std::vector<uint64_t>().swap(e.mass);
  }
}

void KvManager::rollback(const SchedRequest& r, int32_t n_valid) {
  TERN_ASSERT_MSG(!has_recurrent_, "a recurrent state cannot be rolled back");
  for (Group& g : groups_) g.cache->truncate(r.seq, n_valid);
}

KvPoolView KvManager::pool(int g) const {
  for (const Group& grp : groups_)
    if (grp.index == g) return grp.cache->view();
  for (const States& st : states_)
    if (st.index == g) return st.pool->view();
  return {};
}

std::span<const BlockId> KvManager::block_table(int g, SeqId seq) const {
  for (const Group& grp : groups_)
    if (grp.index == g) return grp.cache->blocks().block_table(seq);
  auto it = state_of_.find(seq);
  if (it == state_of_.end()) return {};
  return {&it->second, 1};
}

int32_t KvManager::state_slot(SeqId seq) const {
  auto it = state_of_.find(seq);
  return it == state_of_.end() ? -1 : it->second.value;
}

size_t KvManager::state_bytes() const {
  size_t n = 0;
  for (const States& st : states_) n += st.pool->bytes();
  return n;
}

size_t KvManager::state_slot_bytes() const {
  size_t n = 0;
  for (const States& st : states_) n += st.pool->slot_bytes();
  return n;
}

int32_t KvManager::n_valid(SeqId seq) const { return groups_.empty() ? 0 : groups_.front().cache->n_positions(seq); }

const BlockManager& KvManager::blocks() const {
  TERN_ASSERT(!groups_.empty());
  return groups_.front().cache->blocks();
}

size_t KvManager::block_bytes() const {
  size_t n = 0;
  for (const Group& g : groups_) n += paged_kv_block_bytes(g.cache->shape(), config_.block_size);
  return n;
}

std::string KvManager::dump() const {
  std::string out = "kv manager: " + std::to_string(specs_.size()) + " group(s)";
  for (size_t g = 0; g < specs_.size(); ++g)
    out += std::string(g ? ", " : ": ") + cache_kind_name(specs_[g].kind) + " x" + std::to_string(specs_[g].n_layer);
  out += "\n";
  for (const Group& g : groups_) out += g.cache->dump();
  if (has_recurrent_)
    out += "  state slots: " + std::to_string(state_of_.size()) + " held, " + std::to_string(free_states_.size()) +
           " free\n";
  return out;
}

}  // namespace tern
