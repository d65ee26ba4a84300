// Memory running out inside an engine step (issue 19): EngineCore::step() on stories260K with
// its n-th allocation failing (operator new throws std::bad_alloc, as when memory runs out), for
// every n the step makes, in a prefill step and in a decode step. Each time: the step ends every
// live request with an error and returns Unavailable (never a crash, a hang or, under ASan, a
// leak), every KV block comes back, and the same core then serves the golden request exactly.
// Its own binary: it replaces operator new (counting only the armed thread's allocations).
#include <gtest/gtest.h>

#include <cstdlib>
#include <map>
#include <new>

#include "../model/model_fixture.h"
#include "failing_new.h"
#include "engine/engine_core.h"
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
    if (p.is_ok()) s.core->add(RequestId(i + 1), *p);
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
  core.add(RequestId(100), *p);
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
    fn::arm(n);
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
      EXPECT_FALSE(s.core->has_work()) << "at allocation " << n;
    }
    for (const CoreOutput& o : s.outs)
      if (o.finish) ++s.finals[o.id];
    // Whatever happened, the requests end (once each) and their KV comes back.
    for (int guard = 0; s.core->has_work() && guard < 1000; ++guard) {
      s.outs.clear();
      EXPECT_TRUE(s.core->step(s.outs).is_ok());
      for (const CoreOutput& o : s.outs)
        if (o.finish) ++s.finals[o.id];
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

// Queueing a request (EngineCore::add) with its n-th allocation failing, while three run: it ends
// with Error at the next step, the others finish normally, and nothing of it stays behind.
TEST(EngineAllocFaults, QueueingFailsCleanly) {
  TERN_REQUIRE_STORIES();
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
    s.core->add(RequestId(4), *p);
    total = fn::allocations();
    fn::disarm();
  }
  ASSERT_GT(total, 0);
  const std::vector<TokenId> golden = run_golden(*start(k, 0).core, 20);
  for (long n = 0; n < total; ++n) {
    Running s = start(k, k.steps);
    ASSERT_TRUE(s.core);
    auto p = s.core->prepare(extra);
    ASSERT_TRUE(p.is_ok());
    fn::arm(n);
    try {
      s.core->add(RequestId(4), *p);
    } catch (const std::bad_alloc&) {
      fn::disarm();
      FAIL() << "bad_alloc escaped add() at allocation " << n << " of " << total;
    }
    fn::disarm();
    std::map<RequestId, FinishReason> how;
    for (int guard = 0; s.core->has_work() && guard < 1000; ++guard) {
      s.outs.clear();
      EXPECT_TRUE(s.core->step(s.outs).is_ok());
      for (const CoreOutput& o : s.outs)
        if (o.finish) ++s.finals[o.id], how[o.id] = *o.finish;
    }
    ASSERT_EQ(s.finals.size(), 4u) << "at allocation " << n;
    for (const auto& [id, count] : s.finals) EXPECT_EQ(count, 1) << "request " << id.value << " at allocation " << n;
    EXPECT_EQ(how[RequestId(4)], FinishReason::Error) << "at allocation " << n;
    for (int id = 1; id <= 3; ++id) EXPECT_NE(how[RequestId(id)], FinishReason::Error) << "at allocation " << n;
    EXPECT_EQ(s.core->stats().kv_blocks_used, 0) << "at allocation " << n;
    EXPECT_EQ(run_golden(*s.core, 20), golden) << "at allocation " << n;
    if (HasFailure()) return;
  }
  std::printf("add: %ld allocations, each failing in turn\n", total);
}

// Step 0 prefills (the first 16-token chunk); step 4 decodes all three; with a pool of 3 blocks
// step 8 preempts a request (to recompute, or swapped to host memory).
INSTANTIATE_TEST_SUITE_P(Steps, EngineStepAllocFaults,
                         ::testing::Values(Case{"prefill", 0, 0, "recompute"}, Case{"decode", 4, 0, "recompute"},
                                           Case{"preempt_recompute", 8, 3, "recompute"},
                                           Case{"preempt_swap", 8, 3, "swap"}),
                         [](const auto& param_info) { return std::string(param_info.param.name); });

}  // namespace
}  // namespace tern
