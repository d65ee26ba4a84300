// Deterministic simulations of the scheduler against a counting KV allocator:
// no model, no clock (time advances a fixed dt per step).
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <set>

#include "scheduler/scheduler.h"

namespace tern {
namespace {

constexpr int kBlockSize = 16;
int blocks_for(int32_t n_tokens) { return (n_tokens + kBlockSize - 1) / kBlockSize; }

// Counts blocks per request. Prefix-hit blocks (prefix_hits) are shared with
// an imaginary earlier request and cost the pool nothing.
class CountingKv final : public KvAllocator {
 public:
  explicit CountingKv(int n_blocks) : n_total_(n_blocks) {}

  int n_blocks_total() const override { return n_total_; }
  int n_blocks_free() const override { return n_total_ - n_used(); }
  int n_blocks_needed(const SchedRequest& r, int32_t n_tokens_total) const override {
    int have = 0;
    if (auto it = seqs_.find(r.id.value); it != seqs_.end()) have = it->second.pool + it->second.attached;
    if (have == 0) have = n_tokens_cached(r) / kBlockSize;
    return std::max(0, blocks_for(n_tokens_total) - have);
  }
  int32_t n_tokens_cached(const SchedRequest& r) const override {
    auto it = prefix_hits.find(r.id.value);
    return it == prefix_hits.end() ? 0 : it->second;
  }
  bool allocate_slots(const SchedRequest& r, int32_t n_tokens_total) override {
    EXPECT_FALSE(swapped_.contains(r.id.value)) << "allocate for a swapped request";
    Seq s = seqs_.contains(r.id.value) ? seqs_.at(r.id.value) : Seq{};
    if (s.pool + s.attached == 0 && r.n_computed > 0) {
      EXPECT_EQ(r.n_computed, n_tokens_cached(r));
      s.attached = r.n_computed / kBlockSize;
    }
    const int need = std::max(0, blocks_for(n_tokens_total) - s.pool - s.attached);
    if (need > n_blocks_free()) return false;
    s.pool += need;
    s.slots = std::max(s.slots, n_tokens_total);
    seqs_[r.id.value] = s;
    return true;
  }
  void free_slots(const SchedRequest& r) override {
    seqs_.erase(r.id.value);
    swapped_.erase(r.id.value);
    ++n_frees;
  }
  bool swap_out(const SchedRequest& r) override {
    if (!swap_ok || (swap_fail_every > 0 && ++n_swap_tries % swap_fail_every == 0)) return false;
    auto it = seqs_.find(r.id.value);
    EXPECT_TRUE(it != seqs_.end());
    swapped_[r.id.value] = it->second.pool + it->second.attached;
    seqs_.erase(it);
    ++n_swap_out;
    return true;
  }
  SwapIn swap_in(const SchedRequest& r) override {
    auto it = swapped_.find(r.id.value);
    EXPECT_TRUE(it != swapped_.end());
    if (it->second > n_blocks_free()) return SwapIn::NoRoom;
    if (swap_lost_every > 0 && ++n_swap_in_tries % swap_lost_every == 0) {
      swapped_.erase(it);
      ++n_swap_lost;
      return SwapIn::Lost;
    }
    seqs_[r.id.value] = Seq{it->second, 0, r.n_computed};
    swapped_.erase(it);
    ++n_swap_in;
    return SwapIn::Restored;
  }

  int n_used() const {
    int n = 0;
    for (const auto& [id, s] : seqs_) n += s.pool;
    return n;
  }
  bool holds(RequestId id) const { return seqs_.contains(id.value); }
  bool is_swapped(RequestId id) const { return swapped_.contains(id.value); }
  int32_t slots(RequestId id) const { return holds(id) ? seqs_.at(id.value).slots : 0; }
  int attached(RequestId id) const { return holds(id) ? seqs_.at(id.value).attached : 0; }

  std::unordered_map<uint64_t, int32_t> prefix_hits;  // request id -> cached prompt tokens
  bool swap_ok = true;
  int swap_fail_every = 0;  // > 0: every n-th swap_out fails
  int swap_lost_every = 0;  // > 0: every n-th swap_in finds its copy damaged
  int n_swap_tries = 0, n_swap_out = 0, n_swap_in = 0, n_frees = 0, n_swap_in_tries = 0, n_swap_lost = 0;

 private:
  struct Seq {
    int pool = 0;      // blocks taken from the pool
    int attached = 0;  // prefix-hit blocks, shared
    int32_t slots = 0;
  };
  int n_total_;
  std::unordered_map<uint64_t, Seq> seqs_;
  std::unordered_map<uint64_t, int> swapped_;  // blocks held on the host
};

// Drives schedule -> check -> update (with a "sampled" token for every chunk
// that reaches the end of its request's tokens), as the engine does.
class Sim {
 public:
  Sim(SchedulerConfig cfg, int n_blocks, double dt_s = 1.0) : sched(std::move(cfg)), kv(n_blocks), dt_s_(dt_s) {}

  void add(uint64_t id, int32_t n_prompt, int32_t max_tokens, int priority = 0, std::string tenant = "",
           double arrival_s = -1) {
    SchedRequest r;
    r.id = RequestId(id);
    r.seq = SeqId(static_cast<int32_t>(id));
    r.priority = priority;
    r.tenant = tenant;
    r.arrival_s = arrival_s < 0 ? now_s : arrival_s;
    r.n_prompt = n_prompt;
    r.n_tokens = n_prompt;
    r.max_tokens = max_tokens;
    live[id] = max_tokens;
    tenant_of[id] = std::move(tenant);
    sched.add(std::move(r));
  }

  SchedulerOutput step() {
    SchedulerOutput out = sched.schedule(kv, now_s);
    check(out);
    for (const ScheduledChunk& c : out.chunks) {
      if (!first_step.contains(c.id.value)) {
        first_step[c.id.value] = i_step;
        first_order.push_back(c.id.value);
      }
      tokens_of[c.id.value] += c.n_tokens;
      tenant_tokens[tenant_of[c.id.value]] += c.n_tokens;
    }
    std::vector<ChunkResult> results;
    for (const ScheduledChunk& c : out.chunks) {
      const SchedRequest* r = sched.find(c.id);
      ChunkResult res;
      res.n_accepted = c.n_tokens;
      if (r->n_computed + c.n_tokens == r->n_tokens) res.new_tokens = {7};  // "sample" a token
      results.push_back(std::move(res));
    }
    for (const RequestUpdate& u : sched.update(out, results, kv)) {
      if (u.stop == StopReason::None) continue;
      EXPECT_EQ(u.stop, StopReason::Length);
      const SchedRequest* r = sched.find(u.id);
      const int32_t n_generated = r->n_tokens - r->n_prompt;
      EXPECT_EQ(n_generated, live.at(u.id.value));
      sched.remove(u.id, kv);
      sched.record_output_length(n_generated);
      live.erase(u.id.value);
      finish_order.push_back(u.id.value);
      finish_step[u.id.value] = i_step;
    }
    ++i_step;
    now_s += dt_s_;
    return out;
  }

  // A copy of request `id`'s scheduler state; a failure (and a blank) when it is gone.
  SchedRequest get(uint64_t id) {
    const SchedRequest* r = sched.find(RequestId(id));
    if (r == nullptr) ADD_FAILURE() << "request " << id << " is gone";
    return r ? *r : SchedRequest{};
  }

  // Steps until every request finished; false when max_steps ran out.
  bool run(int max_steps) {
    for (int i = 0; i < max_steps && !live.empty(); ++i) step();
    return live.empty();
  }

  Scheduler sched;
  CountingKv kv;
  double now_s = 0;
  int i_step = 0;
  std::map<uint64_t, int32_t> live;  // id -> max_tokens
  std::map<uint64_t, std::string> tenant_of;
  std::map<uint64_t, int> first_step, finish_step;
  std::map<uint64_t, int64_t> tokens_of;
  std::map<std::string, int64_t> tenant_tokens;
  std::vector<uint64_t> first_order, finish_order;

 private:
  void check(const SchedulerOutput& out) {
    const SchedulerConfig& cfg = sched.config();
    int32_t sum = 0;
    bool seen_prefill = false;
    std::set<uint64_t> ids;
    for (const ScheduledChunk& c : out.chunks) {
      SchedRequest* r = sched.find(c.id);
      ASSERT_NE(r, nullptr);
      ASSERT_TRUE(ids.insert(c.id.value).second) << "two chunks for one request";
      EXPECT_EQ(r->status, SeqStatus::Running);
      EXPECT_GT(c.n_tokens, 0);
      EXPECT_LE(r->n_computed + c.n_tokens, r->n_tokens);
      EXPECT_GE(kv.slots(c.id), r->n_computed + c.n_tokens) << "chunk not allocated";
      const bool decode = c.n_tokens == 1 && r->n_tokens - r->n_computed == 1;
      EXPECT_FALSE(decode && seen_prefill) << "decode after a prefill chunk";
      seen_prefill = seen_prefill || !decode;
      sum += c.n_tokens;
    }
    EXPECT_EQ(out.n_tokens, sum);
    EXPECT_LE(sum, cfg.max_batched_tokens);
    const SchedulerStats st = sched.stats();
    EXPECT_LE(st.n_running, cfg.max_num_seqs);
    EXPECT_EQ(st.n_running + st.n_waiting + st.n_swapped, static_cast<int>(live.size()));
    EXPECT_LE(kv.n_used(), kv.n_blocks_total());
    for (const auto& [id, max_tokens] : live) {
      const SchedRequest* r = sched.find(RequestId(id));
      ASSERT_NE(r, nullptr);
      switch (r->status) {
        case SeqStatus::Running: EXPECT_TRUE(kv.holds(r->id) && !kv.is_swapped(r->id)); break;
        case SeqStatus::Waiting:
          EXPECT_FALSE(kv.holds(r->id) || kv.is_swapped(r->id));
          EXPECT_EQ(r->n_computed, 0);
          break;
        case SeqStatus::Swapped: EXPECT_TRUE(kv.is_swapped(r->id) && !kv.holds(r->id)); break;
      }
    }
    for (RequestId id : out.preempted) EXPECT_NE(sched.find(id)->status, SeqStatus::Running);
  }
  double dt_s_;
};

SchedulerConfig make_config(SchedulePolicy policy, int max_num_seqs = 64, int32_t max_batched_tokens = 512) {
  SchedulerConfig c;
  c.policy = policy;
  c.max_num_seqs = max_num_seqs;
  c.max_batched_tokens = max_batched_tokens;
  c.watermark = 0;
  c.ageing_per_s = 0;
  return c;
}

std::vector<uint64_t> chunk_ids(const SchedulerOutput& out) {
  std::vector<uint64_t> ids;
  for (const ScheduledChunk& c : out.chunks) ids.push_back(c.id.value);
  return ids;
}

TEST(SchedulerNames, ParsesPoliciesAndModes) {
  for (SchedulePolicy p : {SchedulePolicy::Fcfs, SchedulePolicy::Priority, SchedulePolicy::ShortestJobFirst,
                           SchedulePolicy::FairShare}) {
    auto parsed = parse_schedule_policy(schedule_policy_name(p));
    ASSERT_TRUE(parsed.is_ok());
    EXPECT_EQ(parsed.value(), p);
  }
  EXPECT_EQ(parse_schedule_policy("sjf").value(), SchedulePolicy::ShortestJobFirst);
  EXPECT_EQ(parse_schedule_policy("fair").value(), SchedulePolicy::FairShare);
  auto bad = parse_schedule_policy("lifo");
  ASSERT_FALSE(bad.is_ok());
  EXPECT_EQ(bad.status().kind(), ErrorKind::InvalidArgument);
  EXPECT_NE(bad.status().message().find("'lifo'"), std::string::npos);
  EXPECT_NE(bad.status().message().find("fcfs, priority, sjf, fair"), std::string::npos);
  EXPECT_FALSE(parse_schedule_policy("").is_ok());
  EXPECT_FALSE(parse_schedule_policy("FCFS").is_ok());

  EXPECT_EQ(parse_preemption_mode("recompute").value(), PreemptionMode::Recompute);
  EXPECT_EQ(parse_preemption_mode("swap").value(), PreemptionMode::Swap);
  auto bad_mode = parse_preemption_mode("spill");
  ASSERT_FALSE(bad_mode.is_ok());
  EXPECT_EQ(bad_mode.status().kind(), ErrorKind::InvalidArgument);
  EXPECT_NE(bad_mode.status().message().find("recompute, swap"), std::string::npos);
}

TEST(SchedulerPolicy, FcfsServesInArrivalOrder) {
  Sim sim(make_config(SchedulePolicy::Fcfs, /*max_num_seqs=*/1), 100);
  sim.add(3, 20, 3, 0, "", 2.0);
  sim.add(1, 40, 3, 0, "", 0.0);
  sim.add(2, 10, 3, 0, "", 1.0);
  ASSERT_TRUE(sim.run(100));
  EXPECT_EQ(sim.first_order, (std::vector<uint64_t>{1, 2, 3}));
  EXPECT_EQ(sim.finish_order, (std::vector<uint64_t>{1, 2, 3}));
}

TEST(SchedulerPolicy, PriorityServesMostUrgentFirst) {
  Sim sim(make_config(SchedulePolicy::Priority, 1), 100);
  sim.add(1, 8, 2, 5, "", 0.0);
  sim.add(2, 8, 2, 1, "", 1.0);
  sim.add(3, 8, 2, 3, "", 2.0);
  sim.add(4, 8, 2, 1, "", 3.0);
  ASSERT_TRUE(sim.run(100));
  EXPECT_EQ(sim.first_order, (std::vector<uint64_t>{2, 4, 3, 1}));
}

// One old priority-10 request against a stream of new priority-0 requests
// arriving faster than they are served. Effective priority is
// 10 - (now - 0) for the old one and 0 - (now - a) for one arriving at a:
// everything that arrived before t = 10 s (20 requests, 2 steps each) goes
// first, then the old request wins.
int first_step_of_old_low_priority(double ageing_per_s, int n_steps) {
  SchedulerConfig cfg = make_config(SchedulePolicy::Priority, 1);
  cfg.ageing_per_s = ageing_per_s;
  Sim sim(cfg, 1000, /*dt_s=*/0.5);
  sim.add(1000, 8, 2, /*priority=*/10);
  for (int i = 0; i < n_steps; ++i) {
    sim.add(static_cast<uint64_t>(i), 8, 2, /*priority=*/0);
    sim.step();
  }
  return sim.first_step.contains(1000) ? sim.first_step.at(1000) : -1;
}

TEST(SchedulerPolicy, PriorityAgeingPreventsStarvation) {
  EXPECT_EQ(first_step_of_old_low_priority(1.0, 200), 40);
  EXPECT_EQ(first_step_of_old_low_priority(0.0, 200), -1);  // without ageing it starves
}

TEST(SchedulerPolicy, SjfServesShortJobsFirst) {
  Sim sim(make_config(SchedulePolicy::ShortestJobFirst, 1), 100);
  sim.add(1, 100, 4, 0, "", 0.0);
  sim.add(2, 10, 4, 0, "", 1.0);
  sim.add(3, 50, 4, 0, "", 2.0);
  ASSERT_TRUE(sim.run(100));
  EXPECT_EQ(sim.first_order, (std::vector<uint64_t>{2, 3, 1}));
}

// Request 4 has a short prompt but a huge max_tokens; the predictor (mean of
// finished outputs) decides whether that budget counts.
TEST(SchedulerPolicy, SjfPredictsOutputFromFinishedRequests) {
  for (bool with_history : {false, true}) {
    Sim sim(make_config(SchedulePolicy::ShortestJobFirst, 1), 100);
    if (with_history) {
      sim.sched.record_output_length(6);
      sim.sched.record_output_length(10);  // mean 8
    }
    sim.add(4, 10, 100, 0, "", 0.0);  // work 10 + min(100, 8) = 18, or 110 without history
    sim.add(5, 20, 2, 0, "", 1.0);    // work 20 + 2 = 22
    sim.step();
    EXPECT_EQ(sim.first_order, (std::vector<uint64_t>{with_history ? 4u : 5u})) << "history " << with_history;
  }
}

int first_step_of_long_job(double ageing_per_s, int n_steps) {
  SchedulerConfig cfg = make_config(SchedulePolicy::ShortestJobFirst, 1);
  cfg.ageing_per_s = ageing_per_s;
  Sim sim(cfg, 1000);
  sim.sched.record_output_length(2);
  sim.add(1000, 60, 2);
  for (int i = 0; i < n_steps; ++i) {
    sim.add(static_cast<uint64_t>(i), 8, 2);
    sim.step();
  }
  return sim.first_step.contains(1000) ? sim.first_step.at(1000) : -1;
}

// Work 62 - t for the long job against 10 - (t - a) for short ones: those that
// arrived at a < 52 s go first (52 jobs, 2 steps each); at a = 52 the tie goes
// to the earlier arrival.
TEST(SchedulerPolicy, SjfAgeingPreventsStarvation) {
  EXPECT_EQ(first_step_of_long_job(1.0, 300), 104);
  EXPECT_EQ(first_step_of_long_job(0.0, 300), -1);
}

// Tokens served per tenant while every tenant has a backlog.
std::map<std::string, int64_t> fair_share_tokens(const std::map<std::string, double>& weights, int n_steps) {
  SchedulerConfig cfg = make_config(SchedulePolicy::FairShare, 8, 64);
  for (const auto& [tenant, w] : weights)
    if (w != 1.0) cfg.tenant_weights[tenant] = w;
  Sim sim(cfg, 10000);
  uint64_t id = 0;
  for (int i = 0; i < 300; ++i)
    for (const auto& [tenant, w] : weights) sim.add(id++, 32, 16, 0, tenant, 0.0);
  for (int i = 0; i < n_steps; ++i) sim.step();
  for (const auto& [tenant, w] : weights) {
    int n_left = 0;
    for (const auto& [live_id, max_tokens] : sim.live) n_left += sim.tenant_of[live_id] == tenant;
    EXPECT_GT(n_left, 8) << "tenant " << tenant << "'s backlog ran dry";
  }
  return sim.tenant_tokens;
}

TEST(SchedulerPolicy, FairShareFollowsTenantWeights) {
  {
    auto tokens = fair_share_tokens({{"a", 1.0}, {"b", 3.0}}, 400);
    const double ratio = static_cast<double>(tokens["b"]) / static_cast<double>(tokens["a"]);
    EXPECT_NEAR(ratio, 3.0, 0.3) << "a=" << tokens["a"] << " b=" << tokens["b"];
  }
  {
    auto tokens = fair_share_tokens({{"x", 1.0}, {"y", 2.0}, {"z", 3.0}}, 400);
    const double total = static_cast<double>(tokens["x"] + tokens["y"] + tokens["z"]);
    EXPECT_NEAR(tokens["x"] / total, 1.0 / 6, 0.02);
    EXPECT_NEAR(tokens["y"] / total, 2.0 / 6, 0.02);
    EXPECT_NEAR(tokens["z"] / total, 3.0 / 6, 0.02);
  }
}

// FCFS would serve all of tenant a's earlier backlog first; fair share
// alternates from the first step.
TEST(SchedulerPolicy, FairShareDoesNotLetEarlyTenantMonopolise) {
  Sim sim(make_config(SchedulePolicy::FairShare, 2, 64), 1000);
  for (uint64_t i = 0; i < 10; ++i) sim.add(i, 16, 4, 0, "a", 0.0);
  sim.add(100, 16, 4, 0, "b", 1.0);
  sim.step();
  EXPECT_EQ(sim.first_order, (std::vector<uint64_t>{0, 100}));
}

// A tenant arriving after another has been served for a while starts at the
// active tenants' virtual time: it gets an equal share, not everything until
// it has "caught up".
TEST(SchedulerPolicy, FairShareLateTenantGetsEqualShareNotCatchUp) {
  Sim sim(make_config(SchedulePolicy::FairShare, 8, 64), 10000);
  for (uint64_t i = 0; i < 300; ++i) sim.add(i, 32, 16, 0, "a");
  for (int s = 0; s < 100; ++s) sim.step();
  for (uint64_t i = 1000; i < 1300; ++i) sim.add(i, 32, 16, 0, "b");
  const auto before = sim.tenant_tokens;
  for (int s = 0; s < 100; ++s) sim.step();
  const double a = static_cast<double>(sim.tenant_tokens["a"] - before.at("a"));
  const double b = static_cast<double>(sim.tenant_tokens["b"]);
  EXPECT_NEAR(b / a, 1.0, 0.25) << "a=" << a << " b=" << b;
}

TEST(SchedulerAdmission, WatermarkHoldsBackAdmission) {
  for (double watermark : {0.1, 0.0}) {
    SchedulerConfig cfg = make_config(SchedulePolicy::Fcfs, 8, 1024);
    cfg.watermark = watermark;
    Sim sim(cfg, 100);
    sim.add(1, 959, 100);  // 60 blocks, also after its first sampled token
    sim.step();
    ASSERT_EQ(sim.kv.n_used(), 60);
    sim.add(2, 496, 4);  // 31 blocks: 40 free - 31 = 9 < the 10 the watermark keeps
    const SchedulerOutput out = sim.step();
    if (watermark > 0) {
      EXPECT_EQ(chunk_ids(out), (std::vector<uint64_t>{1}));
      EXPECT_EQ(sim.get(2).status, SeqStatus::Waiting);
    } else {
      EXPECT_EQ(chunk_ids(out), (std::vector<uint64_t>{1, 2}));
    }
  }
  // 30 blocks leave exactly the watermark free: admitted.
  SchedulerConfig cfg = make_config(SchedulePolicy::Fcfs, 8, 1024);
  cfg.watermark = 0.1;
  Sim sim(cfg, 100);
  sim.add(1, 959, 100);
  sim.step();
  sim.add(2, 480, 4);
  EXPECT_EQ(chunk_ids(sim.step()), (std::vector<uint64_t>{1, 2}));
}

// Admission wants blocks for the whole prompt, not only its first chunk, and
// the best waiting request that does not fit holds back those behind it.
TEST(SchedulerAdmission, HeadOfLineWaitsForBlocksForItsWholePrompt) {
  Sim sim(make_config(SchedulePolicy::Fcfs, 8, 32), 10);
  sim.add(1, 95, 50);  // 6 blocks once its prefill is done
  for (int s = 0; s < 3; ++s) sim.step();
  ASSERT_EQ(sim.kv.n_used(), 6);
  sim.add(2, 70, 2);  // 5 blocks > 4 free, although a 31-token first chunk would fit
  sim.add(3, 8, 2);   // 1 block: fits, but must not overtake request 2
  for (int s = 0; s < 3; ++s) EXPECT_EQ(chunk_ids(sim.step()), (std::vector<uint64_t>{1}));
  EXPECT_EQ(sim.sched.stats().n_waiting, 2);
}

TEST(SchedulerAdmission, WatermarkIsWaivedWhenNothingRuns) {
  SchedulerConfig cfg = make_config(SchedulePolicy::Fcfs, 8, 2048);
  cfg.watermark = 0.1;
  Sim sim(cfg, 100);
  sim.add(1, 95 * kBlockSize, 1);
  EXPECT_EQ(chunk_ids(sim.step()), (std::vector<uint64_t>{1}));
}

TEST(SchedulerAdmission, MaxNumSeqsCapsRunningRequests) {
  Sim sim(make_config(SchedulePolicy::Fcfs, 3, 512), 1000);
  for (uint64_t i = 0; i < 5; ++i) sim.add(i, 8, 10);
  EXPECT_EQ(chunk_ids(sim.step()), (std::vector<uint64_t>{0, 1, 2}));
  EXPECT_EQ(sim.sched.stats().n_running, 3);
  EXPECT_EQ(sim.sched.stats().n_waiting, 2);
}

TEST(SchedulerAdmission, PrefixHitStartsComputedAtCachedTokens) {
  Sim sim(make_config(SchedulePolicy::Fcfs), 100);
  sim.kv.prefix_hits[1] = 32;
  sim.add(1, 50, 2);
  const SchedulerOutput out = sim.sched.schedule(sim.kv, 0);
  ASSERT_EQ(out.chunks.size(), 1u);
  EXPECT_EQ(out.chunks[0].n_tokens, 18);
  EXPECT_EQ(sim.get(1).n_computed, 32);
  EXPECT_EQ(sim.kv.attached(RequestId(1)), 2);
  EXPECT_EQ(sim.kv.n_used(), 2);  // tokens 32..49: two blocks of its own
}

TEST(SchedulerAdmission, SkipsRequestsWithNothingToCompute) {
  Sim sim(make_config(SchedulePolicy::Fcfs), 100);
  sim.add(1, 10, 5);
  sim.add(2, 10, 5);
  const SchedulerOutput out = sim.sched.schedule(sim.kv, 0);
  ASSERT_EQ(out.chunks.size(), 2u);
  std::vector<ChunkResult> results(2);
  for (size_t i = 0; i < 2; ++i) {
    results[i].n_accepted = out.chunks[i].n_tokens;
    if (out.chunks[i].id.value == 2) results[i].new_tokens = {7};  // only request 2 samples
  }
  sim.sched.update(out, results, sim.kv);
  const SchedulerOutput next = sim.sched.schedule(sim.kv, 1);
  EXPECT_EQ(chunk_ids(next), (std::vector<uint64_t>{2}));
}

// Three decoders keep getting one token every step while a 300-token prompt
// is cut into 61-token chunks (budget 64 minus the 3 decode tokens).
TEST(SchedulerChunking, LongPromptIsChunkedWhileOthersDecode) {
  Sim sim(make_config(SchedulePolicy::Fcfs, 8, 64), 1000);
  for (uint64_t i = 1; i <= 3; ++i) sim.add(i, 8, 50);
  sim.step();
  sim.add(9, 300, 2);
  std::vector<int32_t> long_chunks;
  for (int s = 0; s < 5; ++s) {
    const SchedulerOutput out = sim.step();
    ASSERT_EQ(out.chunks.size(), 4u);
    for (int i = 0; i < 3; ++i) {
      EXPECT_EQ(out.chunks[i].id.value, static_cast<uint64_t>(i + 1));
      EXPECT_EQ(out.chunks[i].n_tokens, 1);
    }
    EXPECT_EQ(out.chunks[3].id.value, 9u);
    long_chunks.push_back(out.chunks[3].n_tokens);
  }
  EXPECT_EQ(long_chunks, (std::vector<int32_t>{61, 61, 61, 61, 56}));
  EXPECT_EQ(sim.get(9).n_tokens, 301);  // prefill done, first token sampled
}

// Pool of 6 blocks, three 31-token prompts (2 blocks each). When they cross
// 32 tokens each needs a third block: the lowest-ranked one is preempted.
struct PreemptionRun {
  std::vector<uint64_t> first_preempted;
  SchedRequest victim_after;  // the first victim right after its preemption
  Sim* sim = nullptr;
};

PreemptionRun run_preemption(Sim& sim, const std::vector<int>& priorities) {
  PreemptionRun run;
  run.sim = &sim;
  for (uint64_t i = 0; i < priorities.size(); ++i) sim.add(i + 1, 31, 20, priorities[i], "", static_cast<double>(i));
  for (int s = 0; s < 50 && run.first_preempted.empty(); ++s) {
    const SchedulerOutput out = sim.step();
    for (RequestId id : out.preempted) run.first_preempted.push_back(id.value);
  }
  if (!run.first_preempted.empty()) run.victim_after = *sim.sched.find(RequestId(run.first_preempted[0]));
  return run;
}

TEST(SchedulerPreemption, RecomputePicksLowestRankedAndItCompletes) {
  Sim sim(make_config(SchedulePolicy::Fcfs, 8, 512), 6);
  PreemptionRun run = run_preemption(sim, {0, 0, 0});
  ASSERT_EQ(run.first_preempted, (std::vector<uint64_t>{3}));  // latest arrival
  EXPECT_EQ(run.victim_after.status, SeqStatus::Waiting);
  EXPECT_EQ(run.victim_after.n_computed, 0);
  EXPECT_EQ(run.victim_after.n_tokens, 33);  // keeps its generated tokens, recomputes them
  EXPECT_EQ(run.victim_after.arrival_s, 2.0);
  EXPECT_EQ(run.victim_after.n_preemptions, 1);
  ASSERT_TRUE(sim.run(500));
  EXPECT_GT(sim.tokens_of[3], 31 + 20 - 1);  // computed some tokens twice
  EXPECT_GE(sim.sched.stats().n_preemptions, 1);
}

TEST(SchedulerPreemption, PriorityPicksLeastUrgentVictim) {
  Sim sim(make_config(SchedulePolicy::Priority, 8, 512), 6);
  PreemptionRun run = run_preemption(sim, {5, 0, 3});
  ASSERT_EQ(run.first_preempted, (std::vector<uint64_t>{1}));  // priority 5, although it arrived first
  ASSERT_TRUE(sim.run(500));
}

TEST(SchedulerPreemption, SwapKeepsComputedTokensAndSwapsBackIn) {
  SchedulerConfig cfg = make_config(SchedulePolicy::Fcfs, 8, 512);
  cfg.preemption = PreemptionMode::Swap;
  Sim sim(cfg, 6);
  PreemptionRun run = run_preemption(sim, {0, 0, 0});
  ASSERT_EQ(run.first_preempted, (std::vector<uint64_t>{3}));
  EXPECT_EQ(run.victim_after.status, SeqStatus::Swapped);
  EXPECT_EQ(run.victim_after.n_computed, 32);
  EXPECT_EQ(sim.kv.n_swap_out, 1);
  EXPECT_EQ(sim.sched.stats().n_swapped, 1);
  // A new request arriving now must not overtake the swapped one.
  sim.add(4, 8, 2, 0, "", sim.now_s);
  const int preempt_step = sim.i_step;
  int resumed = -1;
  for (int s = 0; s < 500 && !sim.live.empty(); ++s) {
    const SchedulerOutput out = sim.step();
    for (const ScheduledChunk& c : out.chunks)
      if (c.id.value == 3 && resumed < 0) resumed = sim.i_step - 1;
  }
  ASSERT_TRUE(sim.live.empty());
  ASSERT_GT(resumed, preempt_step);
  EXPECT_LE(resumed, sim.first_step.at(4));
  EXPECT_GE(sim.kv.n_swap_in, 1);
  // Request 2 is swapped out later too; both come back and no token of theirs
  // is computed twice: n_tokens - 1 in total (the last sampled token is never fed back).
  EXPECT_EQ(sim.kv.n_swap_out, 2);
  EXPECT_EQ(sim.kv.n_swap_in, 2);
  EXPECT_EQ(sim.tokens_of[2], 31 + 20 - 1);
  EXPECT_EQ(sim.tokens_of[3], 31 + 20 - 1);
}

TEST(SchedulerPreemption, SwapFallsBackToRecompute) {
  SchedulerConfig cfg = make_config(SchedulePolicy::Fcfs, 8, 512);
  cfg.preemption = PreemptionMode::Swap;
  Sim sim(cfg, 6);
  sim.kv.swap_ok = false;
  PreemptionRun run = run_preemption(sim, {0, 0, 0});
  ASSERT_EQ(run.first_preempted, (std::vector<uint64_t>{3}));
  EXPECT_EQ(run.victim_after.status, SeqStatus::Waiting);
  EXPECT_EQ(run.victim_after.n_computed, 0);
  EXPECT_EQ(sim.kv.n_swap_out, 0);
  ASSERT_TRUE(sim.run(500));
}

// A swapped copy found damaged on the way back in (KvManager's checksums) is
// dropped: the request is recomputed from its tokens, and everything finishes.
TEST(SchedulerPreemption, ALostSwapIsRecomputed) {
  SchedulerConfig cfg = make_config(SchedulePolicy::Fcfs, 8, 512);
  cfg.preemption = PreemptionMode::Swap;
  Sim sim(cfg, 6);
  sim.kv.swap_lost_every = 1;
  PreemptionRun run = run_preemption(sim, {0, 0, 0});
  ASSERT_EQ(run.first_preempted, (std::vector<uint64_t>{3}));
  EXPECT_EQ(run.victim_after.status, SeqStatus::Swapped);
  ASSERT_TRUE(sim.run(500));
  EXPECT_GE(sim.kv.n_swap_lost, 1);
  EXPECT_EQ(sim.kv.n_swap_in, 0);
  EXPECT_EQ(sim.sched.stats().n_swaps_lost, sim.kv.n_swap_lost);
  // Recomputed: more tokens than its own, since the lost ones ran again.
  EXPECT_GT(sim.tokens_of[3], 31 + 20 - 1);
}

// A running prefill short of blocks takes the tokens that fit in its last
// block before anything is preempted; when none fit, the lowest-ranked running
// request (here itself) is preempted.
TEST(SchedulerPreemption, PrefillChunkShrinksToFreeBlocksBeforePreempting) {
  Sim sim(make_config(SchedulePolicy::Fcfs, 8, 21), 4);
  sim.add(1, 15, 10);                   // decoder: 1 block, a 2nd from 17 tokens
  sim.add(2, 40, 1, 0, "", sim.now_s + 0.5);  // 3 blocks
  auto chunk_of = [](const SchedulerOutput& out, uint64_t id) {
    for (const ScheduledChunk& c : out.chunks)
      if (c.id.value == id) return c.n_tokens;
    return 0;
  };
  EXPECT_EQ(chunk_of(sim.step(), 2), 6);   // budget left after request 1's prefill
  EXPECT_EQ(chunk_of(sim.step(), 2), 20);  // tokens 6..26: 2 blocks, 1 left free
  SchedulerOutput out = sim.step();        // request 1 takes the last block for token 17
  EXPECT_EQ(chunk_of(out, 2), 6);          // 26..32 fills its 2nd block; 14 were asked for
  EXPECT_TRUE(out.preempted.empty());
  out = sim.step();
  EXPECT_EQ(chunk_ids(out), (std::vector<uint64_t>{1}));
  ASSERT_EQ(out.preempted.size(), 1u);
  EXPECT_EQ(out.preempted[0].value, 2u);
  EXPECT_EQ(sim.get(2).status, SeqStatus::Waiting);
  ASSERT_TRUE(sim.run(100));
}

// A victim that already had a chunk this step gives its tokens back to the budget.
TEST(SchedulerPreemption, VictimGivesBackItsTokens) {
  Sim sim(make_config(SchedulePolicy::Priority, 8, 47), 8);
  sim.add(1, 95, 20, /*priority=*/5);  // 6 blocks
  for (int s = 0; s < 3; ++s) sim.step();  // prefill 95 in chunks of 47, 47, 1
  ASSERT_EQ(sim.get(1).n_tokens, 96);
  sim.add(2, 47, 5, /*priority=*/0);  // 3 blocks, 2 free
  const SchedulerOutput out = sim.step();
  ASSERT_EQ(out.preempted.size(), 1u);
  ASSERT_EQ(out.chunks.size(), 1u);
  EXPECT_EQ(out.chunks[0].id.value, 2u);
  EXPECT_EQ(out.chunks[0].n_tokens, 47);  // the whole budget, request 1's decode token included
}

// A waiting request may preempt a running one only when strictly more urgent.
TEST(SchedulerPreemption, UrgentWaitingRequestPreemptsUnderPriority) {
  for (int waiting_priority : {0, 5, 6}) {
    Sim sim(make_config(SchedulePolicy::Priority, 8, 512), 8);
    sim.add(1, 95, 20, /*priority=*/5);  // 6 blocks, 8 when done
    sim.step();
    sim.add(2, 47, 5, waiting_priority);  // 3 blocks, 2 free
    const SchedulerOutput out = sim.step();
    if (waiting_priority < 5) {
      EXPECT_EQ(chunk_ids(out), (std::vector<uint64_t>{2}));
      ASSERT_EQ(out.preempted.size(), 1u);
      EXPECT_EQ(out.preempted[0].value, 1u);
      EXPECT_EQ(sim.get(1).status, SeqStatus::Waiting);
    } else {
      EXPECT_EQ(chunk_ids(out), (std::vector<uint64_t>{1}));
      EXPECT_TRUE(out.preempted.empty());
    }
    ASSERT_TRUE(sim.run(500));
  }
}

// FCFS never lets a waiting request preempt, however short the pool.
TEST(SchedulerPreemption, WaitingRequestDoesNotPreemptUnderFcfs) {
  Sim sim(make_config(SchedulePolicy::Fcfs, 8, 512), 8);
  sim.add(1, 95, 50);
  sim.step();
  sim.add(2, 47, 5, /*priority=*/-100);
  const SchedulerOutput out = sim.step();
  EXPECT_EQ(chunk_ids(out), (std::vector<uint64_t>{1}));
  EXPECT_TRUE(out.preempted.empty());
}

// A request that outgrows the whole pool while running alone is preempted
// once, then stays queued; it neither loops nor blocks later requests.
// (Swap mode too: swapping it out would only bring it back to fail again.)
TEST(SchedulerPreemption, RequestLargerThanPoolStaysQueuedWithoutLooping) {
  for (PreemptionMode mode : {PreemptionMode::Recompute, PreemptionMode::Swap}) {
    SchedulerConfig cfg = make_config(SchedulePolicy::Fcfs, 8, 512);
    cfg.preemption = mode;
    Sim sim(cfg, 4);  // 64 tokens
    sim.add(1, 60, 10);
    for (int s = 0; s < 10; ++s) sim.step();
    const SchedRequest* r = sim.sched.find(RequestId(1));
    ASSERT_NE(r, nullptr);
    EXPECT_EQ(r->status, SeqStatus::Waiting);
    EXPECT_EQ(r->n_preemptions, 1);
    EXPECT_EQ(sim.kv.n_swap_out, 0);
    sim.add(2, 8, 2);
    sim.step();
    sim.step();
    EXPECT_FALSE(sim.live.contains(2));
    EXPECT_EQ(sim.get(1).n_preemptions, 1);
    sim.sched.remove(RequestId(1), sim.kv);
    EXPECT_EQ(sim.kv.n_used(), 0);
  }
}

TEST(SchedulerLifecycle, RemoveFreesBlocksAndSwapCopies) {
  SchedulerConfig cfg = make_config(SchedulePolicy::Fcfs, 8, 512);
  cfg.preemption = PreemptionMode::Swap;
  Sim sim(cfg, 6);
  run_preemption(sim, {0, 0, 0});
  ASSERT_TRUE(sim.kv.is_swapped(RequestId(3)));
  sim.sched.remove(RequestId(3), sim.kv);
  EXPECT_FALSE(sim.kv.is_swapped(RequestId(3)));
  sim.sched.remove(RequestId(1), sim.kv);
  sim.sched.remove(RequestId(2), sim.kv);
  EXPECT_EQ(sim.kv.n_used(), 0);
  const SchedulerStats st = sim.sched.stats();
  EXPECT_EQ(st.n_running + st.n_waiting + st.n_swapped, 0);
  EXPECT_EQ(sim.sched.find(RequestId(1)), nullptr);
  EXPECT_NE(sim.sched.dump().find("preemptions=1"), std::string::npos);
}

// Random arrivals into a pool small enough to force preemption; every request
// must finish under every policy and preemption mode.
TEST(SchedulerStress, EveryRequestFinishes) {
  for (SchedulePolicy policy : {SchedulePolicy::Fcfs, SchedulePolicy::Priority, SchedulePolicy::ShortestJobFirst,
                                SchedulePolicy::FairShare}) {
    for (PreemptionMode mode : {PreemptionMode::Recompute, PreemptionMode::Swap}) {
      for (uint32_t seed : {1u, 2u, 3u}) {
        SchedulerConfig cfg = make_config(policy, 6, 96);
        cfg.preemption = mode;
        cfg.watermark = 0.05;
        cfg.ageing_per_s = 0.5;
        cfg.tenant_weights = {{"a", 1.0}, {"b", 2.0}};
        Sim sim(cfg, 40);
        sim.kv.swap_fail_every = 3;
        std::mt19937 rng(seed);
        const char* tenants[] = {"a", "b", "c"};
        uint64_t next_id = 0;
        int s = 0;
        for (; s < 20000 && (next_id < 60 || !sim.live.empty()); ++s) {
          if (next_id < 60 && rng() % 3 != 0) {
            const auto prompt = static_cast<int32_t>(1 + rng() % 160);
            const auto max_tokens = static_cast<int32_t>(1 + rng() % 200);
            if (rng() % 5 == 0) sim.kv.prefix_hits[next_id] = ((prompt - 1) / kBlockSize) * kBlockSize;
            sim.add(next_id++, prompt, max_tokens, static_cast<int>(rng() % 6), tenants[rng() % 3]);
          }
          sim.step();
          if (::testing::Test::HasFatalFailure()) return;
        }
        EXPECT_TRUE(sim.live.empty()) << schedule_policy_name(policy) << " mode " << static_cast<int>(mode)
                                      << " seed " << seed << "\n"
                                      << sim.sched.dump();
        EXPECT_EQ(sim.finish_order.size(), 60u);
        EXPECT_EQ(sim.kv.n_used(), 0);
        EXPECT_GT(sim.sched.stats().n_preemptions, 0);
        if (mode == PreemptionMode::Swap) {
          EXPECT_GT(sim.kv.n_swap_out, 0);
          EXPECT_EQ(sim.kv.n_swap_in, sim.kv.n_swap_out);     // every swapped request came back
          EXPECT_GT(sim.kv.n_swap_tries, sim.kv.n_swap_out);  // and some fell back to recompute
        }
      }
    }
  }
}

}  // namespace
}  // namespace tern
