// Memory running out inside an engine step (issue 19): EngineCore::step() on stories260K with
// its n-th allocation failing (operator new throws std::bad_alloc, as when memory runs out), for
// every n the step makes, in prefill, decode and preempting steps — and with every allocation
// from the n-th on failing (memory that stays short, so ending the requests fails too). Each
// time: the step returns Unavailable (never a crash, a hang or, under ASan, a leak), every request
// ends exactly once, every KV block comes back, and the same core then serves the golden request
// exactly. Queueing a request that runs out of memory queues nothing, and it runs when retried.
// Its own binary: it replaces operator new (counting only the armed thread's allocations).
#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <map>
#include <mutex>
#include <new>

#include "../model/model_fixture.h"
#include "failing_new.h"
#include "engine/engine_core.h"
#include "tern/engine.h"
#include "engine_run_util.h"

namespace tern {
namespace {

namespace fn = test::failing_new;

// Three requests: a greedy one with a long prompt (chunked prefill), a sampled one with
// log-probabilities and a stop string, and one with a grammar.
std::vector<GenerationRequest> requests() {
  std::vector<GenerationRequest> reqs(3);
  reqs[0].prompt = "Once upon a time, there was a little girl named Lily. She loved to play outside";
  reqs[0].max_tokens = 12;
  reqs[0].sampling.temperature = 0.0f;
  reqs[1].prompt = "The cat";
  reqs[1].max_tokens = 12;
  reqs[1].sampling.temperature = 0.9f;
  reqs[1].sampling.seed = 5;
  reqs[1].n_logprobs = 2;
  reqs[1].stop = {"zzz"};
  reqs[2].prompt = "One day";
  reqs[2].max_tokens = 8;
  reqs[2].constraint = {ConstraintKind::Regex, " [a-z]+( [a-z]+)*"};
  return reqs;
}

struct Running {
  std::unique_ptr<EngineCore> core;
  std::map<RequestId, int> finals;  // final outputs seen per request
  std::vector<CoreOutput> outs;
};

struct Case {
  const char* name;
  int steps;       // run before the step that fails
  int n_blocks;    // KV pool in blocks (0: plenty)
  const char* preemption;
  bool stays_short = false;  // every allocation from the n-th on fails, not only the n-th
};

// A core with the requests added and `steps` steps run.
Running start(const Case& k, int steps) {
  Running s;
  EngineConfig c = test::base_config();
  c.max_batched_tokens = 16;  // the long prompt takes several steps
  c.preemption = *parse_preemption_mode(k.preemption);
  if (k.n_blocks > 0) {
    auto probe = EngineCore::create(c);
    EXPECT_TRUE(probe.is_ok());
    if (!probe.is_ok()) return s;
    c.kv_memory_bytes = (*probe)->stats().kv_block_bytes * k.n_blocks;
  }
  auto core = EngineCore::create(c);
  EXPECT_TRUE(core.is_ok()) << core.status().message();
  if (!core.is_ok()) return s;
  s.core = std::move(core).value();
  const auto reqs = requests();
  for (size_t i = 0; i < reqs.size(); ++i) {
    auto p = s.core->prepare(reqs[i]);
    EXPECT_TRUE(p.is_ok()) << p.status().message();
    if (p.is_ok()) {
      EXPECT_TRUE(s.core->add(RequestId(i + 1), *p));
    }
  }
  for (int i = 0; i < steps; ++i) {
    s.outs.clear();
    EXPECT_TRUE(s.core->step(s.outs).is_ok());
    for (const CoreOutput& o : s.outs)
      if (o.finish) ++s.finals[o.id];
  }
  return s;
}

std::vector<TokenId> run_golden(EngineCore& core, int n_tokens) {
  GenerationRequest r = test::golden_request();
  r.max_tokens = n_tokens;
  auto p = core.prepare(r);
  EXPECT_TRUE(p.is_ok());
  EXPECT_TRUE(core.add(RequestId(100), *p));
  std::vector<TokenId> tokens;
  std::vector<CoreOutput> outs;
  for (int guard = 0; core.has_work() && guard < 1000; ++guard) {
    outs.clear();
    EXPECT_TRUE(core.step(outs).is_ok());
    for (const CoreOutput& o : outs)
      if (o.id == RequestId(100)) tokens.insert(tokens.end(), o.tokens.begin(), o.tokens.end());
  }
  return tokens;
}

class EngineStepAllocFaults : public ::testing::TestWithParam<Case> {};

TEST_P(EngineStepAllocFaults, EveryFailurePointEndsTheRequestsAndTheCoreServesOn) {
  TERN_REQUIRE_STORIES();
  const Case& k = GetParam();
  const int before = k.steps;
  // How many allocations the step makes when nothing fails.
  long total = 0;
  {
    Running s = start(k, before);
    ASSERT_TRUE(s.core);
    s.outs.clear();
    const int64_t preempted = s.core->stats().n_preemptions;
    fn::count_only();
    const Status st = s.core->step(s.outs);
    total = fn::allocations();
    fn::disarm();
    ASSERT_TRUE(st.is_ok()) << st.message();
    if (k.n_blocks > 0) {
      EXPECT_GT(s.core->stats().n_preemptions, preempted) << "the step preempts nothing";
    }
  }
  ASSERT_GT(total, 0);
  const std::vector<TokenId> golden = run_golden(*start(k, 0).core, 20);
  const std::vector<TokenId> continuation = test::golden_continuation();
  ASSERT_EQ(golden, std::vector<TokenId>(continuation.begin(), continuation.begin() + 20));

  const long stride = total <= 300 ? 1 : total / 300;
  int failed_steps = 0;
  for (long n = 0; n < total; n += stride) {
    Running s = start(k, before);
    ASSERT_TRUE(s.core);
    s.outs.clear();
    fn::arm(n, k.stays_short ? fn::kEveryOneAfter : 1);
    Status st;
    try {
      st = s.core->step(s.outs);
    } catch (const std::bad_alloc&) {
      fn::disarm();
      FAIL() << "bad_alloc escaped the step at allocation " << n << " of " << total;
    }
    fn::disarm();
    if (!st.is_ok()) {
      ++failed_steps;
      EXPECT_EQ(st.kind(), ErrorKind::Unavailable) << st.message();
      // With one failure the step ends them all; when memory stays short, the next steps do.
      if (!k.stays_short) {
        EXPECT_FALSE(s.core->has_work()) << "at allocation " << n;
      }
    }
    for (const CoreOutput& o : s.outs)
      if (o.finish) ++s.finals[o.id];
    // Whatever happened, the requests end (once each) and their KV comes back; after a failed
    // step, those it had not ended end with Error (never decoded on from a half-updated state).
    for (int guard = 0; s.core->has_work() && guard < 1000; ++guard) {
      s.outs.clear();
      EXPECT_TRUE(s.core->step(s.outs).is_ok());
      for (const CoreOutput& o : s.outs) {
        if (!o.finish) continue;
        ++s.finals[o.id];
        if (!st.is_ok()) {
          EXPECT_EQ(*o.finish, FinishReason::Error) << "request " << o.id.value << " at allocation " << n;
        }
      }
    }
    ASSERT_EQ(s.finals.size(), 3u) << "at allocation " << n;
    for (const auto& [id, count] : s.finals) EXPECT_EQ(count, 1) << "request " << id.value << " at allocation " << n;
    const EngineStats stats = s.core->stats();
    EXPECT_EQ(stats.kv_blocks_used, 0) << "at allocation " << n;
    // The same core serves on, exactly.
    EXPECT_EQ(run_golden(*s.core, 20), golden) << "at allocation " << n;
    if (HasFailure()) return;
  }
  EXPECT_GT(failed_steps, 0);
  std::printf("%s: %ld allocations, %d failure points tried, %d ended the step's requests\n", k.name, total,
              static_cast<int>((total + stride - 1) / stride), failed_steps);
}

// Queueing a request (EngineCore::add) with its n-th allocation failing — or every one from the
// n-th on — while three run: add() says so and queues nothing; tried again, it runs as usual, the
// others are untouched, and nothing of the failed try stays behind.
class EngineAddAllocFaults : public ::testing::TestWithParam<bool> {};

TEST_P(EngineAddAllocFaults, QueueingFailsCleanlyAndCanBeRetried) {
  TERN_REQUIRE_STORIES();
  const bool stays_short = GetParam();
  const Case k{"add", 2, 0, "recompute"};
  GenerationRequest extra;
  extra.prompt = "Tom had a big red ball";
  extra.max_tokens = 6;
  extra.n_logprobs = 1;
  extra.constraint = {ConstraintKind::Regex, "[ a-z]+"};
  long total = 0;
  {
    Running s = start(k, k.steps);
    ASSERT_TRUE(s.core);
    auto p = s.core->prepare(extra);
    ASSERT_TRUE(p.is_ok()) << p.status().message();
    fn::count_only();
    const bool added = s.core->add(RequestId(4), *p);
    total = fn::allocations();
    fn::disarm();
    ASSERT_TRUE(added);
  }
  ASSERT_GT(total, 0);
  const std::vector<TokenId> golden = run_golden(*start(k, 0).core, 20);
  for (long n = 0; n < total; ++n) {
    Running s = start(k, k.steps);
    ASSERT_TRUE(s.core);
    auto p = s.core->prepare(extra);
    ASSERT_TRUE(p.is_ok());
    const EngineStats before = s.core->stats();
    fn::arm(n, stays_short ? fn::kEveryOneAfter : 1);
    bool added = true;
    try {
      added = s.core->add(RequestId(4), *p);
    } catch (const std::bad_alloc&) {
      fn::disarm();
      FAIL() << "bad_alloc escaped add() at allocation " << n << " of " << total;
    }
    fn::disarm();
    EXPECT_FALSE(added) << "at allocation " << n;
    // Nothing of it is queued: the core looks as it did before.
    const EngineStats after = s.core->stats();
    EXPECT_EQ(after.n_waiting + after.n_running, before.n_waiting + before.n_running) << "at allocation " << n;
    EXPECT_EQ(after.kv_blocks_used, before.kv_blocks_used) << "at allocation " << n;
    EXPECT_TRUE(s.core->add(RequestId(4), *p)) << "at allocation " << n;  // the retry
    std::map<RequestId, FinishReason> how;
    for (int guard = 0; s.core->has_work() && guard < 1000; ++guard) {
      s.outs.clear();
      EXPECT_TRUE(s.core->step(s.outs).is_ok());
      for (const CoreOutput& o : s.outs)
        if (o.finish) ++s.finals[o.id], how[o.id] = *o.finish;
    }
    ASSERT_EQ(s.finals.size(), 4u) << "at allocation " << n;
    for (const auto& [id, count] : s.finals) EXPECT_EQ(count, 1) << "request " << id.value << " at allocation " << n;
    for (int id = 1; id <= 4; ++id) EXPECT_NE(how[RequestId(id)], FinishReason::Error) << "at allocation " << n;
    EXPECT_EQ(s.core->stats().kv_blocks_used, 0) << "at allocation " << n;
    EXPECT_EQ(run_golden(*s.core, 20), golden) << "at allocation " << n;
    if (HasFailure()) return;
  }
  std::printf("add%s: %ld allocations, each failing in turn\n", stays_short ? " (stays short)" : "", total);
}

INSTANTIATE_TEST_SUITE_P(Memory, EngineAddAllocFaults, ::testing::Values(false, true),
                         [](const auto& param_info) { return std::string(param_info.param ? "stays_short" : "once"); });

// The step thread of the threaded Engine (tern/engine.h) with its n-th allocation failing — or
// a run of 300 from the n-th on — while three requests run: whatever fails there (queueing,
// cancellations, the step, the counters, handing outputs to the output thread), every request
// still gets exactly one final output, tokens in order before it, the engine shuts down cleanly,
// and a new request on the same engine is served exactly.
struct ThreadRun {
  std::map<RequestId, int> finals;
  std::map<RequestId, FinishReason> how;
  std::vector<TokenId> golden_tokens;
  bool golden_done = false;
  bool after_final = false;  // an output came after its request's final one
  long allocations = 0;      // on the step thread while the three ran
};

ThreadRun run_engine(long n, long run_length) {
  ThreadRun result;
  auto created = Engine::create(test::base_config());
  EXPECT_TRUE(created.is_ok()) << created.status().message();
  if (!created.is_ok()) return result;
  std::unique_ptr<Engine> engine = std::move(created).value();
  std::mutex mu;
  std::condition_variable cv;
  if (n >= 0) fn::arm_thread("tern-step", n, run_length);
  else fn::arm_thread("tern-step", fn::kEveryOneAfter);  // count only
  const auto reqs = requests();
  for (size_t i = 0; i < reqs.size(); ++i) {
    auto id = engine->add_request(reqs[i], [&](const RequestOutput& o) {
      std::lock_guard lock(mu);
      if (result.finals.contains(o.id)) result.after_final = true;
      if (o.finish) {
        ++result.finals[o.id];
        result.how[o.id] = *o.finish;
        cv.notify_all();
      }
    });
    EXPECT_TRUE(id.is_ok()) << id.status().message();
  }
  {
    std::unique_lock lock(mu);
    EXPECT_TRUE(cv.wait_for(lock, std::chrono::seconds(60), [&] { return result.finals.size() == reqs.size(); }))
        << "the requests did not all end (at allocation " << n << ")";
  }
  result.allocations = fn::thread_allocations();
  fn::disarm_thread();
  GenerationRequest g = test::golden_request();
  g.max_tokens = 24;  // enough to show the engine serves on exactly; every point runs it
  auto golden = engine->add_request(g, [&](const RequestOutput& o) {
    std::lock_guard lock(mu);
    if (o.has_token) result.golden_tokens.push_back(o.token);
    if (o.finish) {
      result.golden_done = true;
      cv.notify_all();
    }
  });
  EXPECT_TRUE(golden.is_ok());
  {
    std::unique_lock lock(mu);
    EXPECT_TRUE(cv.wait_for(lock, std::chrono::seconds(60), [&] { return result.golden_done; }));
  }
  engine->shutdown();
  EXPECT_EQ(engine->stats().kv_blocks_used, 0) << "at allocation " << n;
  return result;
}

class EngineThreadAllocFaults : public ::testing::TestWithParam<long> {};

TEST_P(EngineThreadAllocFaults, TheStepThreadLosesNothing) {
  TERN_REQUIRE_STORIES();
  const long run_length = GetParam();
  const ThreadRun clean = run_engine(-1, 0);
  const long total = clean.allocations;
  ASSERT_GT(total, 0) << "no allocation seen on the thread named tern-step";
  const std::vector<TokenId> continuation = test::golden_continuation();
  ASSERT_EQ(clean.golden_tokens, std::vector<TokenId>(continuation.begin(), continuation.begin() + 24));
  // The count varies with timing (how arrivals fall into steps): points spread over it.
  // Single failures need the density to reach the rare ones (a new node of the output queue);
  // runs of 300 cover a stretch each.
  const long stride = std::max(1L, total / (run_length == 1 ? 250 : 100));
  int with_errors = 0;
  for (long n = 0; n < total; n += stride) {
    const ThreadRun r = run_engine(n, run_length);
    ASSERT_EQ(r.finals.size(), 3u) << "at allocation " << n;
    for (const auto& [id, count] : r.finals) EXPECT_EQ(count, 1) << "request " << id.value << " at allocation " << n;
    EXPECT_FALSE(r.after_final) << "at allocation " << n;
    EXPECT_EQ(r.golden_tokens, clean.golden_tokens) << "at allocation " << n;
    for (const auto& [id, reason] : r.how) with_errors += reason == FinishReason::Error;
    if (HasFailure()) return;
  }
  EXPECT_GT(with_errors, 0) << "no failure reached a step";
  std::printf("step thread, runs of %ld: ~%ld allocations, %ld points tried, %d requests ended with Error\n",
              run_length, total, (total + stride - 1) / stride, with_errors);
}

INSTANTIATE_TEST_SUITE_P(Engine, EngineThreadAllocFaults, ::testing::Values(1L, 300L),
                         [](const auto& param_info) { return "run_of_" + std::to_string(param_info.param); });

// Step 0 prefills (the first 16-token chunk); step 4 decodes all three; with a pool of 3 blocks
// step 8 preempts a request (to recompute, or swapped to host memory). In the *_stays_short
// cases every allocation from the n-th to the end of the step fails.
INSTANTIATE_TEST_SUITE_P(Steps, EngineStepAllocFaults,
                         ::testing::Values(Case{"prefill", 0, 0, "recompute"}, Case{"decode", 4, 0, "recompute"},
                                           Case{"preempt_recompute", 8, 3, "recompute"},
                                           Case{"preempt_swap", 8, 3, "swap"},
                                           Case{"decode_stays_short", 4, 0, "recompute", true},
                                           Case{"preempt_swap_stays_short", 8, 3, "swap", true}),
                         [](const auto& param_info) { return std::string(param_info.param.name); });

}  // namespace
}  // namespace tern
