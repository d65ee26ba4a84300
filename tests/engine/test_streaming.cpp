// Streaming sequences through the engine on stories260K (trained on 512
// positions): StreamingLLM sinks + window and context shift generate past the
// context in constant KV memory, give normal generation's tokens while they
// keep everything, and are batch- and preemption-invariant; bad settings are
// refused with a message.
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "engine/streaming.h"
#include "engine_run_util.h"
#include "sanitized.h"

namespace tern {
namespace {

StreamingParams window(int sinks, int w) { return {StreamingMode::Window, sinks, w}; }

// (Its suite name keeps it out of the TSan job's ^Engine filter: 20,000
// steps there cost minutes and check no threading the other tests do not.)
// The check: 20,000 greedy tokens with --streaming 4,252, the KV
// footprint never above the sinks' block plus the blocks the window can
// straddle, and the first 256 tokens those of normal generation.
TEST(StreamingEngine, TwentyThousandTokensInConstantKvMemory) {
  TERN_REQUIRE_STORIES();
  EngineConfig c = test::base_config();
  auto core = test::make_core(c);
  ASSERT_TRUE(core);
  const auto normal = test::run_all(*core, {test::greedy_request({1}, 256)});
  ASSERT_EQ(normal[0].tokens.size(), 256u);

  auto streaming_core = test::make_core(c);
  // Under a sanitizer 4,000 tokens: still eight contexts, the window sliding
  // past every block boundary many times.
  const int n_gen = test::kSanitized ? 4000 : 20000;
  const auto out = test::run_all(*streaming_core, {test::greedy_request({1}, n_gen, window(4, 252))});
  ASSERT_EQ(out[0].tokens.size(), static_cast<size_t>(n_gen));
  ASSERT_TRUE(out[0].final_output);
  EXPECT_EQ(out[0].final_output->finish, FinishReason::Length);
  EXPECT_EQ(std::vector<TokenId>(out[0].tokens.begin(), out[0].tokens.begin() + 256), normal[0].tokens);
  const EngineStats st = streaming_core->stats();
  const int bound = 1 + (252 - 1 + 15) / 16 + 1;  // sinks' block + a straddling window's blocks = 18
  EXPECT_LE(st.kv_blocks_peak, bound) << "blocks outside the sinks and the window were kept";
  EXPECT_GE(st.kv_blocks_peak, bound - 2) << "the window was not kept";
  EXPECT_EQ(st.kv_blocks_used, 0);
}

// Every sequence's tokens are the same alone, among others of mixed lengths
// (prompts past the context included: a window request's prompt is not bounded
// by it), and when a small pool makes the engine preempt and recompute them.
TEST(EngineStreaming, BatchAndPreemptionInvariant) {
  TERN_REQUIRE_STORIES();
  std::vector<GenerationRequest> reqs;
  const size_t prompts[] = {1, 9, 40, 130, 700, 3, 77, 600};
  // Every output passes the 64-position window; under a sanitizer by less (50 s of the TSan job at full length).
  const int first = test::kSanitized ? 80 : 150, more = test::kSanitized ? 10 : 20;
  for (size_t i = 0; i < std::size(prompts); ++i)
    reqs.push_back(test::greedy_request(test::story_prompt(prompts[i]), first + more * static_cast<int>(i), window(4, 60)));
  EngineConfig c = test::base_config();
  std::vector<std::vector<TokenId>> alone;
  for (const GenerationRequest& r : reqs) {
    auto core = test::make_core(c);
    alone.push_back(test::run_all(*core, {r})[0].tokens);
  }
  {
    auto core = test::make_core(c);
    const auto together = test::run_all(*core, reqs);
    for (size_t i = 0; i < reqs.size(); ++i) EXPECT_EQ(together[i].tokens, alone[i]) << "request " << i;
  }
  // 40 blocks of 16 for 8 sequences that each hold ~6 while decoding (more
  // while a long prompt is prefilled): the engine must preempt.
  c.max_batched_tokens = 64;
  const int64_t block_bytes = test::make_core(c)->stats().kv_block_bytes;
  ASSERT_GT(block_bytes, 0);
  c.kv_memory_bytes = 40 * block_bytes;
  auto core = test::make_core(c);
  ASSERT_TRUE(core);
  const auto squeezed = test::run_all(*core, reqs);
  for (size_t i = 0; i < reqs.size(); ++i) EXPECT_EQ(squeezed[i].tokens, alone[i]) << "request " << i << " (preempted)";
  EXPECT_GT(core->stats().n_preemptions, 0) << "the pool did not force preemption: the test needs a smaller one";
}

// Context shift: the sinks stay and the older half of the rest goes whenever
// the context (512) is full; the tokens before the first shift are normal generation's.
// (StreamingEngine, like the 20,000-token test, keeps it out of the TSan job: one
// sequence's 1,500 steps, 38 s there, check no threading the batch tests do not.)
TEST(StreamingEngine, ContextShiftGeneratesPastTheContext) {
  TERN_REQUIRE_STORIES();
  EngineConfig c = test::base_config();
  c.n_ctx = 512;
  auto core = test::make_core(c);
  const auto normal = test::run_all(*core, {test::greedy_request({1}, 500)});
  auto shift_core = test::make_core(c);
  const auto out = test::run_all(*shift_core, {test::greedy_request({1}, 1500, StreamingParams{StreamingMode::Shift, 4, 0})});
  ASSERT_EQ(out[0].tokens.size(), 1500u);
  EXPECT_EQ(std::vector<TokenId>(out[0].tokens.begin(), out[0].tokens.begin() + 500), normal[0].tokens);
  EXPECT_LE(shift_core->stats().kv_blocks_peak, 512 / 16);
  // Without streaming the same request stops at the context.
  auto plain = test::make_core(c);
  const auto stopped = test::run_all(*plain, {test::greedy_request({1}, 1500)});
  ASSERT_TRUE(stopped[0].final_output);
  EXPECT_EQ(stopped[0].final_output->finish, FinishReason::Context);
  EXPECT_LT(stopped[0].tokens.size(), 512u);
}

TEST(EngineStreaming, BadSettingsAreRefusedWithTheFigures) {
  TERN_REQUIRE_STORIES();
  EngineConfig c = test::base_config();
  c.n_ctx = 512;
  auto core = test::make_core(c);
  auto too_wide = core->prepare(test::greedy_request({1}, 10, window(4, 600)));
  ASSERT_FALSE(too_wide.is_ok());
  EXPECT_NE(too_wide.status().message().find("KV blocks"), std::string::npos) << too_wide.status().message();
  EXPECT_FALSE(core->prepare(test::greedy_request({1}, 10, window(4, 0))).is_ok());
  EXPECT_FALSE(core->prepare(test::greedy_request({1}, 10, window(-1, 10))).is_ok());
  // Neither a shift's prompt nor a window's is bounded by the context; a plain one is.
  EXPECT_TRUE(core->prepare(test::greedy_request(test::story_prompt(600), 10, StreamingParams{StreamingMode::Shift, 4, 0})).is_ok());
  EXPECT_TRUE(core->prepare(test::greedy_request(test::story_prompt(600), 10, window(4, 252))).is_ok());
  EXPECT_FALSE(core->prepare(test::greedy_request(test::story_prompt(600), 10)).is_ok());
}

TEST(StreamingText, ParsesAndPrints) {
  auto w = parse_streaming("4,1020");
  ASSERT_TRUE(w.is_ok());
  EXPECT_EQ(w->mode, StreamingMode::Window);
  EXPECT_EQ(w->sinks, 4);
  EXPECT_EQ(w->window, 1020);
  EXPECT_EQ(streaming_text(*w), "4,1020");
  auto s = parse_streaming("shift:8");
  ASSERT_TRUE(s.is_ok());
  EXPECT_EQ(s->mode, StreamingMode::Shift);
  EXPECT_EQ(s->sinks, 8);
  EXPECT_EQ(parse_streaming("shift")->sinks, 4);
  EXPECT_EQ(parse_streaming("off")->mode, StreamingMode::Off);
  for (const char* bad : {"", "4", "4,", ",4", "4,0", "-1,4", "4,x", "shift:", "shift:-2", "shiftx", "4,5,6"})
    EXPECT_FALSE(parse_streaming(bad).is_ok()) << bad;
}

}  // namespace
}  // namespace tern

namespace tern {
namespace {

// A windowed sequence's K/V past its first sinks + window positions were
// computed from a partial past: they must never serve another request as a
// cached prefix. A plain request after a windowed one with the same long
// prompt gets the tokens it gets on a fresh engine.
TEST(EngineStreaming, LossyBlocksNeverServeAsCachedPrefix) {
  TERN_REQUIRE_STORIES();
  EngineConfig c = test::base_config();
  const std::vector<TokenId> prompt = test::story_prompt(300);
  auto fresh = test::make_core(c);
  const auto want = test::run_all(*fresh, {test::greedy_request(prompt, 24)});
  auto core = test::make_core(c);
  test::run_all(*core, {test::greedy_request(prompt, 8, window(4, 60))});
  const auto got = test::run_all(*core, {test::greedy_request(prompt, 24)});
  EXPECT_EQ(got[0].tokens, want[0].tokens);
  // The exact blocks (positions < 4 + 60) may still serve it.
  EXPECT_LE(core->stats().prefix_hit_tokens, 64);
}

}  // namespace
}  // namespace tern
