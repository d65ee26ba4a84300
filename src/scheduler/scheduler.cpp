// scheduler/scheduler.cpp — one schedule() call is four passes over the queues:
//   1. decodes: one token to each running request that needs exactly one,
//   2. prefill chunks to running requests still catching up,
//   3. swapped requests restored (swap_in) and given a chunk,
//   4. waiting requests admitted under max_num_seqs, the budget and the
//      block watermark.
// Passes 1-2 preempt the lowest-ranked running request when blocks run out;
// when they did, passes 3-4 are skipped (blocks are short: admitting now would
// only cause more preemption). docs/scheduler.md explains the choices.
#include <algorithm>
#include <limits>

#include "core/assert.h"
#include "core/log.h"
#include "scheduler/scheduler.h"

namespace tern {

struct Scheduler::Step {
  KvAllocator& kv;
  double now_s = 0;
  SchedulerOutput out;
  int32_t budget = 0;                      // tokens still free this step
  TenantTimes vt;                          // tenant_served_ plus this step's chunks (FairShare)
  std::vector<RequestId> order;            // running at call start, best first; victims from the end
  std::unordered_set<RequestId> preempted;  // in this call: not re-admitted by it (no self-preemption loop)
  std::unordered_set<RequestId> admitted;   // in this call: not victims of admission preemption
};

namespace {

// Removes `id` from an unordered id list (order does not matter for waiting_,
// but running_ keeps admission order, so erase rather than swap-pop).
void erase_id(std::vector<RequestId>& ids, RequestId id) {
  auto it = std::find(ids.begin(), ids.end(), id);
  TERN_ASSERT(it != ids.end());
  ids.erase(it);
}

// Moves `id` from one queue to the other. Room is made first, so an allocation that fails
// leaves it where it was (never in neither queue: tests/engine/test_engine_alloc_faults.cpp).
void move_id(std::vector<RequestId>& from, std::vector<RequestId>& to, RequestId id) {
  to.reserve(to.size() + 1);
  erase_id(from, id);
  to.push_back(id);
}

}  // namespace

Scheduler::Scheduler(SchedulerConfig cfg) : config_(std::move(cfg)) {
  TERN_ASSERT(config_.max_num_seqs >= 1);
  TERN_ASSERT(config_.max_batched_tokens >= 1);
  TERN_ASSERT(config_.watermark >= 0 && config_.watermark < 1);
  TERN_ASSERT(config_.ageing_per_s >= 0);
  for (const auto& [tenant, w] : config_.tenant_weights) TERN_ASSERT_MSG(w > 0, "tenant weights must be > 0");
}

void Scheduler::add(SchedRequest r) {
  TERN_ASSERT_MSG(!requests_.contains(r.id), "request id added twice");
  TERN_ASSERT(r.n_tokens >= 1 && r.n_computed >= 0 && r.n_computed <= r.n_tokens);
  r.status = SeqStatus::Waiting;
  activate_tenant(r.tenant);
  waiting_.reserve(waiting_.size() + 1);  // the push below cannot fail once the request is in
  const RequestId id = r.id;
  requests_.emplace(id, std::move(r));
  waiting_.push_back(id);
}

void Scheduler::remove(RequestId id, KvAllocator& kv) {
  SchedRequest& r = at(id);
  // Whatever its status: a step that failed part-way (out of memory) may have given a waiting
  // request blocks, or moved one before its status changed. Freeing nothing is a no-op; for a
  // swapped request it drops the host copy.
  kv.free_slots(r);
  if (std::find(running_.begin(), running_.end(), id) != running_.end()) erase_id(running_, id);
  else erase_id(waiting_, id);
  --tenant_live_[r.tenant];
  warned_never_fits_.erase(id);
  requests_.erase(id);
}

SchedRequest* Scheduler::find(RequestId id) {
  auto it = requests_.find(id);
  return it == requests_.end() ? nullptr : &it->second;
}

const SchedRequest* Scheduler::find(RequestId id) const {
  auto it = requests_.find(id);
  return it == requests_.end() ? nullptr : &it->second;
}

SchedRequest& Scheduler::at(RequestId id) {
  auto it = requests_.find(id);
  TERN_ASSERT_MSG(it != requests_.end(), "unknown request id");
  return it->second;
}

SchedulerOutput Scheduler::schedule(KvAllocator& kv, double now_s) {
  Step st{kv, now_s, {}, config_.max_batched_tokens, tenant_served_, {}, {}, {}};
  st.order = ranked(running_, now_s, tenant_served_);
  schedule_decodes(st);
  schedule_prefills(st);
  if (st.out.preempted.empty() && !restore_swapped(st)) admit_waiting(st);
  // A swapped-in request may decode in pass 3: keep single decode tokens first.
  std::stable_partition(st.out.chunks.begin(), st.out.chunks.end(), [&](const ScheduledChunk& c) {
    const SchedRequest& r = at(c.id);
    return c.n_tokens == 1 && r.n_tokens - r.n_computed == 1;
  });
  return std::move(st.out);
}

void Scheduler::schedule_decodes(Step& st) {
  for (RequestId id : st.order) {
    if (st.budget == 0) break;
    SchedRequest& r = at(id);
    if (r.status != SeqStatus::Running || r.n_tokens - r.n_computed != 1) continue;
    // Proposed tokens ride along as far as the budget, the position limit and
    // the free blocks allow: a proposal never preempts anyone, and never takes
    // the watermark's reserve that other sequences grow into.
    const int32_t room = std::min<int32_t>(st.budget - 1, r.max_positions - r.n_tokens);
    int32_t n_spec = std::clamp(static_cast<int32_t>(r.spec_tokens.size()), 0, std::max(0, room));
    if (n_spec > 0) {
      const int reserve = static_cast<int>(config_.watermark * static_cast<double>(st.kv.n_blocks_total()));
      const int spare = st.kv.n_blocks_free() - reserve - st.kv.n_blocks_needed(r, r.n_computed + 1);
      while (n_spec > 0 && st.kv.n_blocks_needed(r, r.n_computed + 1 + n_spec) -
                                   st.kv.n_blocks_needed(r, r.n_computed + 1) > std::max(0, spare))
        --n_spec;
    }
    grow_running(st, r, 1 + n_spec);
  }
}

// FairShare re-picks after every chunk (the tenant least served so far,
// counting this step); other policies' keys do not depend on st.vt, so the
// pick is the static rank order.
void Scheduler::schedule_prefills(Step& st) {
  std::vector<RequestId> todo;
  for (RequestId id : st.order) {
    const SchedRequest& r = at(id);
    if (r.status == SeqStatus::Running && r.n_tokens - r.n_computed > 1) todo.push_back(id);
  }
  while (!todo.empty() && st.budget > 0) {
    auto best = std::min_element(todo.begin(), todo.end(), [&](RequestId a, RequestId b) {
      return rank_key(at(a), st.now_s, st.vt) < rank_key(at(b), st.now_s, st.vt);
    });
    SchedRequest& r = at(*best);
    todo.erase(best);
    if (r.status != SeqStatus::Running) continue;  // preempted as a victim meanwhile
    grow_running(st, r, std::min(r.n_tokens - r.n_computed, st.budget));
  }
}

// Swapped requests come back before any new admission, best ranked first.
// Returns true when one of them is held back by blocks (then new requests
// wait too, so that swapped ones are not starved by fresh arrivals).
bool Scheduler::restore_swapped(Step& st) {
  std::vector<RequestId> swapped;
  for (RequestId id : waiting_)
    if (at(id).status == SeqStatus::Swapped && !st.preempted.contains(id)) swapped.push_back(id);
  for (RequestId id : ranked(std::move(swapped), st.now_s, st.vt)) {
    if (static_cast<int>(running_.size()) >= config_.max_num_seqs || st.budget == 0) return true;
    SchedRequest& r = at(id);
    const int32_t remaining = r.n_tokens - r.n_computed;
    if (remaining == 0 || never_fits(st.kv, r)) continue;
    const int32_t n = std::min(remaining, st.budget);
    // An estimate: it counts a prefix hit that swap_in does not take; swap_in
    // and the chunk's own allocation have the final say.
    if (!fits_with_watermark(st.kv, st.kv.n_blocks_needed(r, r.n_computed + n))) return true;
    const KvAllocator::SwapIn restored = st.kv.swap_in(r);
    if (restored == KvAllocator::SwapIn::NoRoom) return true;
    if (restored == KvAllocator::SwapIn::Lost) {  // the copy was damaged: recompute, as if preempted so
      r.n_computed = 0;
      r.status = SeqStatus::Waiting;
      ++n_swaps_lost_;
      continue;
    }
    move_id(waiting_, running_, id);
    r.status = SeqStatus::Running;
    st.admitted.insert(id);
    try_chunk(st, r, n);  // it holds its blocks now; without a chunk it runs next step
  }
  return false;
}

// Strict order: the best waiting request that does not fit stops admission,
// so a large request is not overtaken forever by small ones.
void Scheduler::admit_waiting(Step& st) {
  if (static_cast<int>(running_.size()) >= config_.max_num_seqs || st.budget == 0) return;
  std::vector<RequestId> todo;
  for (RequestId id : waiting_)
    if (at(id).status == SeqStatus::Waiting && !st.preempted.contains(id)) todo.push_back(id);
  // Only FairShare's keys change as chunks are added (st.vt): the other
  // policies rank once, so a long queue costs O(W log W) a step, not O(W) per
  // admission.
  const bool repick = config_.policy == SchedulePolicy::FairShare;
  if (!repick) {
    todo = ranked(std::move(todo), st.now_s, st.vt);
    std::reverse(todo.begin(), todo.end());  // best last: taken from the back
  }
  while (!todo.empty()) {
    if (static_cast<int>(running_.size()) >= config_.max_num_seqs || st.budget == 0) return;
    auto best = repick ? std::min_element(todo.begin(), todo.end(),
                                          [&](RequestId a, RequestId b) {
                                            return rank_key(at(a), st.now_s, st.vt) < rank_key(at(b), st.now_s, st.vt);
                                          })
                       : todo.end() - 1;
    SchedRequest& r = at(*best);
    todo.erase(best);
    if (r.n_computed == r.n_tokens || never_fits(st.kv, r)) continue;
    if (!admit(st, r)) return;
  }
}

// Admission needs blocks for all of r's tokens (not only the first chunk)
// while leaving the watermark free: a request admitted is expected to finish
// its prefill without preempting anyone.
bool Scheduler::admit(Step& st, SchedRequest& r) {
  const int32_t n_computed_before = r.n_computed;
  r.n_computed = st.kv.n_tokens_cached(r);
  TERN_ASSERT(r.n_computed >= 0 && r.n_computed < r.n_tokens);
  while (!fits_with_watermark(st.kv, st.kv.n_blocks_needed(r, admission_tokens(r)))) {
    if (config_.policy != SchedulePolicy::Priority || !preempt_for(st, r)) {
      r.n_computed = n_computed_before;
      return false;
    }
  }
  const int32_t n = std::min(r.n_tokens - r.n_computed, st.budget);
  r.window.shift_to_fit(r.n_computed, r.n_computed + n);
  if (!st.kv.allocate_slots(r, r.n_computed + n)) {
    r.n_computed = n_computed_before;
    return false;
  }
  move_id(waiting_, running_, r.id);
  r.status = SeqStatus::Running;
  if (r.n_cached < 0) r.n_cached = r.n_computed;  // the prefix hit of its first admission (a figure)
  st.admitted.insert(r.id);
  add_chunk(st, r, n);
  return true;
}

// Gives running request r a chunk of up to n tokens, fewer when only fewer
// fit; when not even one token fits, preempts the lowest-ranked running
// request and retries. Returns false when r itself was that request.
bool Scheduler::grow_running(Step& st, SchedRequest& r, int32_t n) {
  for (;;) {
    if (try_chunk(st, r, n)) return true;
    SchedRequest* victim = nullptr;
    for (auto it = st.order.rbegin(); it != st.order.rend() && !victim; ++it)
      if (at(*it).status == SeqStatus::Running) victim = &at(*it);
    TERN_ASSERT(victim != nullptr);  // r itself is running
    if (victim != &r) {
      preempt(st, *victim, /*force_recompute=*/false);
      continue;
    }
    // r is the lowest ranked left. If it is also the only one, the pool cannot
    // hold it at all: swapping would just bring it back to fail again, so its
    // blocks are freed and never_fits() keeps it waiting.
    const bool alone = running_.size() == 1;
    if (alone && warned_never_fits_.insert(r.id).second)
      TERN_LOG_WARN("scheduler: grow_running: request %llu needs more KV blocks than the pool holds (%d tokens); "
                    "it stays queued",
                    static_cast<unsigned long long>(r.id.value), r.n_computed + n);
    preempt(st, r, /*force_recompute=*/alone);
    return false;
  }
}

bool Scheduler::try_chunk(Step& st, SchedRequest& r, int32_t n) {
  r.window.shift_to_fit(r.n_computed, r.n_computed + n);  // context shift: cut before sizing the chunk
  const int32_t m = fit_tokens(st.kv, r, n);
  if (m == 0 || !st.kv.allocate_slots(r, r.n_computed + m)) return false;
  add_chunk(st, r, m);
  return true;
}

// The most tokens, at most n, that r can add with the blocks free now.
int32_t Scheduler::fit_tokens(const KvAllocator& kv, const SchedRequest& r, int32_t n) const {
  const int n_free = kv.n_blocks_free();
  auto fits = [&](int32_t m) { return kv.n_blocks_needed(r, r.n_computed + m) <= n_free; };
  if (fits(n)) return n;
  int32_t lo = 0, hi = n;  // fits(lo), !fits(hi)
  while (hi - lo > 1) {
    const int32_t mid = lo + (hi - lo) / 2;
    (fits(mid) ? lo : hi) = mid;
  }
  return lo;
}

// The watermark is waived when nothing runs: then no request is there to grow
// into the reserve, and a request needing nearly the whole pool must still
// be able to start.
bool Scheduler::fits_with_watermark(const KvAllocator& kv, int n_blocks) const {
  const int reserve =
      running_.empty() ? 0 : static_cast<int>(config_.watermark * static_cast<double>(kv.n_blocks_total()));
  return kv.n_blocks_free() - n_blocks >= reserve;
}

// The tokens admission finds blocks for: all of r's, or for a request that
// keeps only a window of its past (which never holds them all at once), its
// first chunk's.
int32_t Scheduler::admission_tokens(const SchedRequest& r) const {
  if (!r.window.active()) return r.n_tokens;
  return std::min(r.n_tokens, r.n_computed + config_.max_batched_tokens);
}

// A request without blocks that needs more than the whole pool, or that ran
// out of blocks while running alone, stays where it is (waiting or swapped)
// instead of blocking the queue or being recomputed only to fail again. The
// engine is expected to keep requests within the pool; this is the backstop.
bool Scheduler::never_fits(const KvAllocator& kv, const SchedRequest& r) {
  if (warned_never_fits_.contains(r.id)) return true;
  if (kv.n_blocks_needed(r, admission_tokens(r)) <= kv.n_blocks_total()) return false;
  if (warned_never_fits_.insert(r.id).second)
    TERN_LOG_WARN("scheduler: never_fits: request %llu needs more KV blocks than the pool holds (%d tokens); "
                  "it stays queued",
                  static_cast<unsigned long long>(r.id.value), r.n_tokens);
  return true;
}

// Priority only: waiting request w may preempt the worst running request when
// w's effective priority is strictly better. Requests admitted in this call
// are not victims (that would undo this call's own work).
bool Scheduler::preempt_for(Step& st, const SchedRequest& w) {
  SchedRequest* victim = nullptr;
  for (auto it = st.order.rbegin(); it != st.order.rend() && !victim; ++it)
    if (at(*it).status == SeqStatus::Running) victim = &at(*it);
  if (!victim || !(rank_key(w, st.now_s, st.vt).primary < rank_key(*victim, st.now_s, st.vt).primary)) return false;
  preempt(st, *victim, /*force_recompute=*/false);
  return true;
}

void Scheduler::preempt(Step& st, SchedRequest& v, bool force_recompute) {
  // A victim already given a chunk this step gives it back.
  for (auto it = st.out.chunks.begin(); it != st.out.chunks.end(); ++it) {
    if (it->id != v.id) continue;
    st.budget += it->n_tokens;
    st.out.n_tokens -= it->n_tokens;
    st.vt[v.tenant] -= it->n_tokens / tenant_weight(v.tenant);
    st.out.chunks.erase(it);
    break;
  }
  move_id(running_, waiting_, v.id);
  ++v.n_preemptions;
  ++n_preemptions_;
  st.preempted.insert(v.id);
  st.out.preempted.push_back(v.id);
  if (!force_recompute && config_.preemption == PreemptionMode::Swap && st.kv.swap_out(v)) {
    v.status = SeqStatus::Swapped;  // keeps n_computed: its K/V come back with swap_in
    return;
  }
  st.kv.free_slots(v);
  v.n_computed = 0;  // keeps arrival_s, so it keeps its place in the order
  v.status = SeqStatus::Waiting;
}

void Scheduler::add_chunk(Step& st, SchedRequest& r, int32_t n) {
  const int32_t n_real = r.n_tokens - r.n_computed;
  TERN_ASSERT(n > 0 && n <= st.budget && n <= n_real + static_cast<int32_t>(r.spec_tokens.size()));
  st.out.chunks.push_back({r.id, n, std::max(0, n - n_real)});
  st.out.n_tokens += n;
  st.budget -= n;
  st.vt[r.tenant] += n / tenant_weight(r.tenant);
  r.last_scheduled_s = st.now_s;
}

void Scheduler::set_spec_tokens(RequestId id, std::vector<TokenId> tokens, std::vector<int32_t> parents) {
  SchedRequest& r = at(id);
  TERN_ASSERT(parents.empty() || parents.size() == tokens.size());
  for (size_t i = 0; i < parents.size(); ++i) TERN_ASSERT(parents[i] >= -1 && parents[i] < static_cast<int32_t>(i));
  r.spec_tokens = std::move(tokens);
  r.spec_parents = std::move(parents);
}

std::vector<RequestUpdate> Scheduler::update(const SchedulerOutput& out, std::span<const ChunkResult> results,
                                             KvAllocator& kv) {
  TERN_ASSERT(results.size() == out.chunks.size());
  std::vector<RequestUpdate> updates;
  for (size_t i = 0; i < out.chunks.size(); ++i) {
    const ScheduledChunk& c = out.chunks[i];
    const ChunkResult& res = results[i];
    SchedRequest& r = at(c.id);
    TERN_ASSERT(r.status == SeqStatus::Running);
    TERN_ASSERT(res.n_accepted >= 0 && res.n_accepted <= c.n_tokens);
    r.n_computed += res.n_accepted;
    if (res.n_accepted < c.n_tokens) {
      // Progress moves back: the rejected tail's K/V goes (whole blocks past it are freed).
      kv.rollback(r, r.n_computed);
      if (res.n_accepted < c.n_tokens - c.n_spec) {  // real tokens rejected too: they go as well
        r.n_tokens = std::max(r.n_computed, r.n_prompt);
        if (r.tokens.size() > static_cast<size_t>(r.n_tokens)) r.tokens.resize(static_cast<size_t>(r.n_tokens));
      }
    }
    r.spec_tokens.clear();  // accepted ones come back in new_tokens
    r.spec_parents.clear();
    TERN_ASSERT(r.n_computed <= r.n_tokens + c.n_spec);  // accepted proposals join tokens below
    tenant_served_[r.tenant] += res.n_accepted / tenant_weight(r.tenant);
    RequestUpdate u;
    u.id = c.id;
    for (TokenId t : res.new_tokens) {
      r.tokens.push_back(t);
      ++r.n_tokens;
      u.new_tokens.push_back(t);
      if (std::find(r.stop_token_ids.begin(), r.stop_token_ids.end(), t) != r.stop_token_ids.end())
        u.stop = StopReason::StopToken;
      else if (r.n_tokens - r.n_prompt >= r.max_tokens)
        u.stop = StopReason::Length;
      else if (r.n_tokens >= r.max_positions)
        u.stop = StopReason::Context;  // the next step would need one position more than it may hold
      if (u.stop != StopReason::None) break;
    }
    // A stop inside accepted proposals ends the sequence there: the K/V of the
    // tokens after it goes (the last token's own K/V is never computed).
    if (!u.new_tokens.empty() && r.n_computed >= r.n_tokens) {
      r.n_computed = r.n_tokens - 1;
      kv.rollback(r, r.n_computed);
    }
    TERN_ASSERT(r.n_computed <= r.n_tokens);
    kv.commit(r);
    if (!u.new_tokens.empty() || u.stop != StopReason::None) updates.push_back(std::move(u));
  }
  return updates;
}

SchedulerStats Scheduler::stats() const {
  SchedulerStats s;
  s.n_running = static_cast<int>(running_.size());
  for (RequestId id : waiting_) {
    if (requests_.at(id).status == SeqStatus::Swapped) ++s.n_swapped;
    else ++s.n_waiting;
  }
  s.n_preemptions = n_preemptions_;
  s.n_swaps_lost = n_swaps_lost_;
  return s;
}

}  // namespace tern
