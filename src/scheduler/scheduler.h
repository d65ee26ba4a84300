// scheduler/scheduler.h — iteration-level scheduling of requests onto engine steps.
//
// Each request has n_computed tokens (K/V in the cache) catching up with
// n_tokens (prompt + generated so far). Every step the scheduler hands out a
// token budget (max_batched_tokens): first one token to each running request
// that is decoding, then prefill chunks to running requests still in their
// prompt, then to admitted waiting/swapped requests. That one rule covers
// continuous batching, chunked prefill and prefix hits (a hit just starts
// n_computed above 0).
//
// Order between requests comes from the policy:
//   Fcfs             arrival time.
//   Priority         effective priority = priority - ageing_per_s * seconds since
//                    arrival (lower value first, as vLLM), ties by arrival: nothing
//                    starves, and the order of two requests never flips over time.
//   ShortestJobFirst predicted remaining work = (n_tokens - n_computed)
//                    + predicted output (min(max_tokens, mean output length of
//                    finished requests)), minus ageing, ties by arrival.
//   FairShare        tenant with the least tokens served / weight first (virtual
//                    time per tenant), FCFS inside a tenant.
// The same order, reversed, picks preemption victims.
//
// Progress: the scheduler is the only writer of a request's progress. After
// the step ran, update() takes what it did per chunk — how many scheduled
// tokens were accepted (fewer than scheduled: a rejected speculative tail,
// whose K/V the KV manager rolls back) and which tokens were sampled — appends
// the tokens, applies the stop conditions it knows (stop token ids,
// max_tokens, the sequence's position limit) and tells the KV manager to
// commit the accepted positions (prefix blocks are registered only for
// those).
//
// KV: the scheduler reaches the KV cache only through KvAllocator. When a
// running request cannot get the slots it needs, the lowest-ranked running
// request is preempted (recompute: its blocks are freed and it re-enters the
// waiting queue with n_computed = 0; swap: its blocks are copied to host memory
// and restored before it runs again). Admission of new requests keeps
// watermark * n_blocks_total blocks free so running requests can grow: a
// request is admitted only when blocks for all its tokens fit above that
// reserve (waived when nothing runs), strictly in policy order. Under Priority
// a waiting request with a strictly better effective priority may also
// preempt the worst running one. docs/scheduler.md gives the reasons.
//
// Threading: not thread-safe; the engine's step loop is the only caller.
#pragma once

#include <climits>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "core/ids.h"
#include "core/status.h"
#include "kv/seq_window.h"
#include "tern/config.h"

namespace tern {

// SchedulePolicy and PreemptionMode: tern/config.h.

// "fcfs", "priority", "sjf", "fair"; InvalidArgument names the valid values.
Result<SchedulePolicy> parse_schedule_policy(std::string_view name);
const char* schedule_policy_name(SchedulePolicy p);
Result<PreemptionMode> parse_preemption_mode(std::string_view name);  // "recompute", "swap"

struct SchedulerConfig {
  SchedulePolicy policy = SchedulePolicy::Fcfs;
  PreemptionMode preemption = PreemptionMode::Recompute;
  int max_num_seqs = 64;             // running + being-prefilled requests per step
  int32_t max_batched_tokens = 512;  // tokens per step (decode tokens + prefill chunks)
  double watermark = 0.01;           // fraction of blocks admission leaves free
  double ageing_per_s = 1.0;         // Priority / ShortestJobFirst ageing
  std::unordered_map<std::string, double> tenant_weights;  // FairShare; absent = 1.0
};

enum class SeqStatus { Waiting, Running, Swapped };

// Why update() ended a request.
enum class StopReason : uint8_t { None, Length, StopToken, Context };

// What the scheduler knows of one request. The engine creates it; from then
// on only the scheduler changes its progress (schedule(), update()).
struct SchedRequest {
  RequestId id;
  SeqId seq;                 // the KV sequence this request writes
  int priority = 0;          // lower = more urgent
  std::string tenant;
  double arrival_s = 0;      // engine clock
  int32_t n_prompt = 0;
  int32_t n_tokens = 0;      // prompt + generated so far; >= 1
  int32_t n_computed = 0;    // tokens whose K/V are cached; < n_tokens while it needs compute
  int32_t max_tokens = 0;    // generation budget (also SJF's prediction)
  int32_t max_positions = INT32_MAX;  // the sequence may hold at most this many tokens
  // What it keeps of its past (kv/seq_window.h: StreamingLLM sinks + window,
  // context shift); default everything. Such a request takes no prefix-cache
  // hit, is preempted by recompute only, and is admitted on its next chunk's
  // blocks rather than all its tokens' (it never holds them all at once).
  SeqWindow window;
  std::vector<TokenId> tokens;        // prompt + generated (the KV manager hashes them for prefix caching)
  std::vector<TokenId> stop_token_ids;  // sampling one of these ends the request (StopToken)
  // Proposed continuation (speculative decoding): scheduled after the real
  // tokens of a decoding request, budget and blocks permitting; verified by
  // the runner; cleared by update(), which keeps only what was accepted.
  std::vector<TokenId> spec_tokens;
  // A token tree in place of a chain: spec_parents[i] is the index in
  // spec_tokens of token i's parent (-1: the last real token); parents come
  // first, so any prefix the budget keeps is a tree. Empty: a chain.
  std::vector<int32_t> spec_parents;
  int32_t n_cached = -1;     // prompt tokens found in the prefix cache at first admission; -1 before it
  bool compute_prompt = false;  // no prefix-cache hit: every prompt token is run (prompt log-probabilities)
  SeqStatus status = SeqStatus::Waiting;
  int n_preemptions = 0;
  double last_scheduled_s = 0;  // engine clock of its latest chunk (set by schedule(); dump, metrics)
};

// The KV cache as the scheduler sees it. The engine adapts the paged KV cache;
// unit tests use a counting implementation.
class KvAllocator {
 public:
  virtual ~KvAllocator() = default;
  virtual int n_blocks_total() const = 0;
  // Blocks that allocation can use now (free plus evictable cached blocks).
  virtual int n_blocks_free() const = 0;
  // Extra blocks `r` needs to hold n_tokens_total tokens (counting, for a request
  // without blocks, the prefix-cache hit it would get).
  virtual int n_blocks_needed(const SchedRequest& r, int32_t n_tokens_total) const = 0;
  // For a request about to be admitted with no blocks: prompt tokens already in
  // the prefix cache (a multiple of the block size, < n_tokens). May be 0.
  virtual int32_t n_tokens_cached(const SchedRequest& r) const = 0;
  // Makes `r` hold slots for n_tokens_total tokens (attaching its cached prefix
  // if it had no blocks and r.n_computed > 0). False, changing nothing, when
  // the pool lacks blocks.
  virtual bool allocate_slots(const SchedRequest& r, int32_t n_tokens_total) = 0;
  // Releases every block of `r` (finish, cancel, recompute preemption).
  virtual void free_slots(const SchedRequest& r) = 0;
  // After a step: positions [0, r.n_computed) hold accepted K/V (prefix
  // caching registers the full blocks among them; a sliding window may free
  // blocks no token can see any more).
  virtual void commit(const SchedRequest& r) { (void)r; }
  // Positions >= n_valid of `r` were rejected: blocks wholly past them are freed.
  virtual void rollback(const SchedRequest& r, int32_t n_valid) { (void)r, (void)n_valid; }
  // Copies r's blocks to host memory and frees them; false when swapping is
  // impossible (the scheduler then recomputes instead).
  virtual bool swap_out(const SchedRequest& r) = 0;
  // Restores a swapped request's blocks: NoRoom, changing nothing, when the
  // pool lacks blocks; Lost when the copy is damaged (it is dropped and the
  // request holds no blocks: the scheduler recomputes it).
  enum class SwapIn { Restored, NoRoom, Lost };
  virtual SwapIn swap_in(const SchedRequest& r) = 0;
};

// Compute tokens [n_computed, n_computed + n_tokens) of request `id` this step.
struct ScheduledChunk {
  RequestId id;
  int32_t n_tokens = 0;
  int32_t n_spec = 0;  // of n_tokens, the trailing ones that are proposed (spec_tokens), not yet accepted
};

// What the step did for one chunk (the runner's result, parallel to SchedulerOutput::chunks).
struct ChunkResult {
  int32_t n_accepted = 0;           // scheduled tokens whose K/V stay; < n_tokens rolls the rest back
  std::vector<TokenId> new_tokens;  // sampled after the chunk, appended to the request
};

// One request's progress from update(): the tokens it kept (none past a stop
// token or the budget) and, when it ended, why.
struct RequestUpdate {
  RequestId id;
  std::vector<TokenId> new_tokens;
  StopReason stop = StopReason::None;
};

struct SchedulerOutput {
  std::vector<ScheduledChunk> chunks;  // the step's batch: decode tokens first, then prefill chunks
  std::vector<RequestId> preempted;    // preempted during this call (blocks already freed / swapped)
  int32_t n_tokens = 0;                // sum over chunks
};

struct SchedulerStats {
  int n_waiting = 0, n_running = 0, n_swapped = 0;
  int64_t n_preemptions = 0;  // total since start
  int64_t n_swaps_lost = 0;   // swapped copies found damaged (those requests were recomputed)
};

class Scheduler {
 public:
  explicit Scheduler(SchedulerConfig config);

  // Queues a new request (status Waiting). Its id must be new.
  void add(SchedRequest r);
  // Forgets a request (finished or cancelled) and frees its blocks or swap copy.
  void remove(RequestId id, KvAllocator& kv);
  SchedRequest* find(RequestId id);
  const SchedRequest* find(RequestId id) const;

  // Plans one step. Requests with nothing to compute are skipped.
  SchedulerOutput schedule(KvAllocator& kv, double now_s);
  // The step ran: applies each chunk's result (results[i] for out.chunks[i]),
  // fair-share accounting; returns the progress of every request that
  // accepted a token or ended. Ended requests stay until remove().
  std::vector<RequestUpdate> update(const SchedulerOutput& out, std::span<const ChunkResult> results, KvAllocator& kv);
  // Proposes a continuation for a running request (see SchedRequest::spec_tokens).
  void set_spec_tokens(RequestId id, std::vector<TokenId> tokens, std::vector<int32_t> parents = {});
  // A finished request's output length feeds the SJF predictor.
  void record_output_length(int32_t n_generated);

  SchedulerStats stats() const;
  const SchedulerConfig& config() const { return config_; }
  // Queues and budgets as text (debugging).
  std::string dump() const;

 private:
  using TenantTimes = std::unordered_map<std::string, double>;  // tenant -> tokens served / weight
  // Order key, smaller first: (policy value, arrival, id). See policy.cpp.
  struct RankKey {
    double primary = 0;
    double arrival_s = 0;
    uint64_t id = 0;
    auto operator<=>(const RankKey&) const = default;
  };
  struct Step;  // one schedule() call's working state (scheduler.cpp)

  // policy.cpp
  RankKey rank_key(const SchedRequest& r, double now_s, const TenantTimes& vt) const;
  std::vector<RequestId> ranked(std::vector<RequestId> ids, double now_s, const TenantTimes& vt) const;
  double predicted_output(const SchedRequest& r) const;
  double tenant_weight(const std::string& tenant) const;
  void activate_tenant(const std::string& tenant);

  // scheduler.cpp
  SchedRequest& at(RequestId id);
  void schedule_decodes(Step& st);
  void schedule_prefills(Step& st);
  bool restore_swapped(Step& st);
  void admit_waiting(Step& st);
  bool admit(Step& st, SchedRequest& r);
  bool grow_running(Step& st, SchedRequest& r, int32_t n);
  bool try_chunk(Step& st, SchedRequest& r, int32_t n);
  int32_t fit_tokens(const KvAllocator& kv, const SchedRequest& r, int32_t n) const;
  bool fits_with_watermark(const KvAllocator& kv, int n_blocks) const;
  bool never_fits(const KvAllocator& kv, const SchedRequest& r);
  int32_t admission_tokens(const SchedRequest& r) const;
  bool preempt_for(Step& st, const SchedRequest& w);
  void preempt(Step& st, SchedRequest& victim, bool force_recompute);
  void add_chunk(Step& st, SchedRequest& r, int32_t n);

  SchedulerConfig config_;
  std::unordered_map<RequestId, SchedRequest> requests_;  // every live request
  std::vector<RequestId> waiting_;   // waiting and swapped, unordered; the policy orders them
  std::vector<RequestId> running_;   // admission order
  TenantTimes tenant_served_;        // virtual time; only grows, lifted when a tenant turns active
  std::unordered_map<std::string, int> tenant_live_;  // live requests per tenant
  std::unordered_set<RequestId> warned_never_fits_;    // requests the pool cannot hold (logged once)
  double mean_output_ = 0;  // SJF predictor: mean generated length of finished requests
  int64_t n_outputs_ = 0;
  int64_t n_preemptions_ = 0;
  int64_t n_swaps_lost_ = 0;
};

}  // namespace tern
