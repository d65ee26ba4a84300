// KV eviction by importance through the engine on stories260K: H2O keeps its
// budget of blocks and is normal generation until it first evicts; SnapKV
// compresses a prompt once; both are batch-invariant; what an evicting
// sequence computed from a partial past never serves as a cached prefix; bad
// settings are refused with the figures.
#include <gtest/gtest.h>

#include <vector>

#include "engine/streaming.h"
#include "engine_run_util.h"

namespace tern {
namespace {

KvEvictParams h2o(int budget, int recent) { return {KvEvictMode::H2o, budget, recent}; }
KvEvictParams snapkv(int budget, int window) { return {KvEvictMode::SnapKv, budget, window}; }

// h2o:128,32 keeps 8 blocks between steps (9 while a step opens one); the
// tokens before its first eviction (at 129 positions) are normal generation's.
TEST(KvEvictEngine, H2oKeepsItsBudgetAndIsNormalGenerationUntilItEvicts) {
  TERN_REQUIRE_STORIES();
  EngineConfig c = test::base_config();
  auto plain = test::make_core(c);
  const auto normal = test::run_all(*plain, {test::greedy_request({1}, 450)});
  auto core = test::make_core(c);
  const auto out = test::run_all(*core, {test::greedy_request({1}, 450, std::nullopt, h2o(128, 32))});
  ASSERT_EQ(out[0].tokens.size(), 450u);
  EXPECT_EQ(std::vector<TokenId>(out[0].tokens.begin(), out[0].tokens.begin() + 128),
            std::vector<TokenId>(normal[0].tokens.begin(), normal[0].tokens.begin() + 128));
  EXPECT_NE(out[0].tokens, normal[0].tokens) << "450 tokens in 128 positions' blocks and nothing changed";
  const EngineStats st = core->stats();
  EXPECT_LE(st.kv_blocks_peak, 9);
  EXPECT_GE(st.kv_blocks_evicted, (450 + 15) / 16 - 9);
  EXPECT_EQ(st.kv_blocks_used, 0);
}

// A long prompt is computed whole (every query adds its mass), then cut to
// the budget at once: 300 positions = 19 blocks, 8 kept.
TEST(KvEvictEngine, SnapKvCutsThePromptOnceAndKeepsWhatDecodeAdds) {
  TERN_REQUIRE_STORIES();
  EngineConfig c = test::base_config();
  auto core = test::make_core(c);
  const auto out = test::run_all(
      *core, {test::greedy_request(test::story_prompt(300), 60, std::nullopt, snapkv(128, 32))});
  ASSERT_EQ(out[0].tokens.size(), 60u);
  EXPECT_EQ(core->stats().kv_blocks_evicted, 19 - 8);
  auto h2o_core = test::make_core(c);
  test::run_all(*h2o_core, {test::greedy_request(test::story_prompt(300), 60, std::nullopt, h2o(128, 32))});
  EXPECT_GT(h2o_core->stats().kv_blocks_evicted, 19 - 8) << "H2O goes on evicting as decode adds blocks";
}

// Every request's tokens are the same alone and among others (mixed modes and
// lengths, chunked prompts): what a sequence evicts depends only on itself.
TEST(KvEvictEngine, BatchInvariant) {
  TERN_REQUIRE_STORIES();
  std::vector<GenerationRequest> reqs;
  const size_t prompts[] = {1, 40, 200, 300, 9, 130};
  for (size_t i = 0; i < std::size(prompts); ++i) {
    std::optional<KvEvictParams> e;
    if (i % 3 == 0) e = h2o(96, 24);
    if (i % 3 == 1) e = snapkv(112, 40);
    reqs.push_back(test::greedy_request(test::story_prompt(prompts[i]), 160 + 10 * static_cast<int>(i),
                                        std::nullopt, e));
  }
  EngineConfig c = test::base_config();
  c.max_batched_tokens = 96;  // prompts in several chunks, differently cut when together
  std::vector<std::vector<TokenId>> alone;
  for (const GenerationRequest& r : reqs) {
    auto core = test::make_core(c);
    alone.push_back(test::run_all(*core, {r})[0].tokens);
  }
  auto core = test::make_core(c);
  const auto together = test::run_all(*core, reqs);
  for (size_t i = 0; i < reqs.size(); ++i) EXPECT_EQ(together[i].tokens, alone[i]) << "request " << i;
  EXPECT_GT(core->stats().kv_blocks_evicted, 0);
}

// A plain request whose prompt is an H2O request's prompt and output gets no
// cached block computed after that request first evicted (at 129 positions:
// blocks 0-7 are exact), and the tokens of a fresh engine.
TEST(KvEvictEngine, EvictedPastNeverServesAsCachedPrefix) {
  TERN_REQUIRE_STORIES();
  EngineConfig c = test::base_config();
  auto core = test::make_core(c);
  const auto first = test::run_all(*core, {test::greedy_request({1}, 300, std::nullopt, h2o(128, 32))});
  std::vector<TokenId> prompt{1};
  prompt.insert(prompt.end(), first[0].tokens.begin(), first[0].tokens.begin() + 280);
  const int64_t hits_before = core->stats().prefix_hit_tokens;
  const auto got = test::run_all(*core, {test::greedy_request(prompt, 20)});
  EXPECT_LE(core->stats().prefix_hit_tokens - hits_before, 128);
  auto fresh = test::make_core(c);
  EXPECT_EQ(got[0].tokens, test::run_all(*fresh, {test::greedy_request(prompt, 20)})[0].tokens);
}

TEST(KvEvictEngine, BadSettingsAreRefusedWithTheFigures) {
  TERN_REQUIRE_STORIES();
  auto core = test::make_core(test::base_config());
  auto refused = [&](GenerationRequest r, const std::string& needle) {
    auto p = core->prepare(std::move(r));
    ASSERT_FALSE(p.is_ok());
    EXPECT_NE(p.status().message().find(needle), std::string::npos) << p.status().message();
  };
  refused(test::greedy_request({1}, 8, std::nullopt, h2o(32, 32)),
          "keeps 2 KV blocks of 16 positions, and its last 32 positions can span 3");
  GenerationRequest both = test::greedy_request({1}, 8, std::nullopt, h2o(128, 32));
  both.streaming = StreamingParams{StreamingMode::Window, 4, 60};
  refused(both, "cannot be combined with streaming '4,60'");
  for (const char* bad : {"h2o", "h2o:128", "h2o:0,4", "h2o:64,-1", "lru:64,4", "snapkv:64,x"}) {
    auto p = parse_kv_evict(bad);
    ASSERT_FALSE(p.is_ok()) << bad;
    EXPECT_NE(p.status().message().find("expected h2o:BUDGET,RECENT"), std::string::npos);
  }
  for (const char* good : {"h2o:256,64", "snapkv:1024,32", "off"}) {
    auto p = parse_kv_evict(good);
    ASSERT_TRUE(p.is_ok()) << good;
    EXPECT_EQ(kv_evict_text(*p), good);
  }
}

}  // namespace
}  // namespace tern
