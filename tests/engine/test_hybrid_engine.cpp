// A hybrid model (tern synth --arch nemotron_h: Mamba-2 mixers, attention and
// FFN layers) served by the engine: each running sequence holds KV blocks for
// its attention layers and one state slot for its mixers; it gets the greedy
// tokens it gets alone whatever the batch, the chunking, a preemption by swap
// (blocks and state copied out together) or by recompute, and a prefix-cache
// hit (cached blocks plus the state snapshot at the same position). The state
// pool shares the --kv-memory budget with the blocks.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "engine/inline_engine.h"
#include "engine_run_util.h"
#include "kv/paged_kv_cache.h"
#include "model/quantize.h"
#include "model/synth.h"

namespace tern {
namespace {

std::string vocab_path() {
  return std::string(TERN_SHARED_DIR) + "/testdata/tokenizers/ggml-vocab-llama-spm.gguf";
}

// dim 64, layers M*-M*- (2 mixers of 4 heads of 32 in 2 groups, d_state 32;
// 2 attention layers of 4 heads over 2 K/V heads; 2 FFNs of 128), Q8_0.
class EngineHybrid : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!std::filesystem::exists(vocab_path())) return;
    const std::string dir = std::string(TERN_BINARY_DIR) + "/test_models";
    std::filesystem::create_directories(dir);
    path_ = dir + "/engine_hybrid." + std::to_string(::getpid()) + ".gguf";
    SynthOptions o;
    o.arch = "nemotron_h";
    o.n_embd = 64;
    o.layer_pattern = "M*-M*-";
    o.n_layer = 6;
    o.n_head = 4;
    o.n_head_kv = 2;
    o.n_ff = 128;
    o.ssm_head_dim = 32;
    o.n_group = 2;
    o.d_state = 32;
    o.n_ctx = 1024;
    o.seed = 5;
    o.weight_std = 0.1f;
    o.vocab_path = vocab_path();
    o.out_path = path_;
    o.scheme = *find_quant_scheme("Q8_0");
    ThreadPool pool(2);
    ASSERT_TRUE(synth_model(o, pool).is_ok());
  }
  static void TearDownTestSuite() { std::filesystem::remove(path_); }
  void SetUp() override {
    if (!std::filesystem::exists(vocab_path())) GTEST_SKIP() << "tokenizer test data absent";
  }
  static EngineConfig config() {
    EngineConfig c;
    c.model_path = path_;
    c.n_threads = 2;
    c.max_num_seqs = 16;
    return c;
  }
  static GenerationRequest request(size_t i) { return test::mixed_length_request(i); }
  static std::vector<TokenId> alone(const GenerationRequest& r) {
    auto core = test::make_core(config());
    EXPECT_TRUE(core);
    return core ? test::run_all(*core, {r})[0].tokens : std::vector<TokenId>{};
  }
  static std::string path_;
};
std::string EngineHybrid::path_;

TEST_F(EngineHybrid, SixteenConcurrentRequestsGetWhatEachGetsAlone) {
  std::vector<GenerationRequest> reqs;
  for (size_t i = 0; i < 16; ++i) reqs.push_back(request(i));
  std::vector<std::vector<TokenId>> want;
  for (const GenerationRequest& r : reqs) want.push_back(alone(r));
  EngineConfig c = config();
  c.max_batched_tokens = 24;  // prompts span several steps
  auto core = test::make_core(c);
  ASSERT_TRUE(core);
  const auto together = test::run_all(*core, reqs);
  for (size_t i = 0; i < reqs.size(); ++i) {
    EXPECT_EQ(together[i].tokens, want[i]) << "request " << i;
    EXPECT_EQ(together[i].tokens.size(), static_cast<size_t>(reqs[i].max_tokens));
  }
  const EngineStats st = core->stats();
  EXPECT_EQ(st.state_slots_total, 16);
  EXPECT_EQ(st.state_slots_used, 0) << "every finished request gave its slot back";
  EXPECT_GT(st.state_slots_peak, 1);
  EXPECT_EQ(st.kv_blocks_used, 0) << "and its blocks";
  EXPECT_GT(st.kv_blocks_peak, 16) << "the attention layers kept blocks for every running sequence";
  // 2 mixers x (3 x (128 + 2 x 2 x 32) + 128 x 32) floats.
  EXPECT_EQ(st.state_slot_bytes, 2 * (3 * 256 + 128 * 32) * 4);
}

// Four sequences, room in --kv-memory for the state slots, the snapshots and
// the blocks of about two: urgent requests preempt running ones (the priority
// policy), whose blocks and state are copied out and back (swap), recomputed,
// or found damaged on the way back and recomputed; every request still gets
// the tokens it gets alone.
TEST_F(EngineHybrid, PreemptionBySwapOrRecomputeKeepsEveryRequestsTokens) {
  std::vector<GenerationRequest> reqs = {request(3), request(4), request(1), request(2)};
  for (size_t i = 0; i < reqs.size(); ++i) {
    reqs[i].max_tokens = i < 2 ? 40 : 20;
    reqs[i].priority = i < 2 ? 5 : 0;  // the last two are more urgent
  }
  std::vector<std::vector<TokenId>> want;
  for (const GenerationRequest& r : reqs) want.push_back(alone(r));
  auto probe = test::make_core(config());
  ASSERT_TRUE(probe);
  const int64_t slot_bytes = probe->stats().state_slot_bytes, block_bytes = probe->stats().kv_block_bytes;
  ASSERT_GT(block_bytes, 0);
  struct Mode {
    PreemptionMode preemption;
    bool damaged;
  };
  for (const Mode m : {Mode{PreemptionMode::Recompute, false}, Mode{PreemptionMode::Swap, false},
                       Mode{PreemptionMode::Swap, true}}) {
    SCOPED_TRACE(std::string(m.preemption == PreemptionMode::Swap ? "swap" : "recompute") +
                 (m.damaged ? ", damaged copies" : ""));
    EngineConfig c = config();
    c.max_num_seqs = 4;
    // 4 running slots + 16 snapshot slots, and 8 blocks of 16 positions (a
    // request needs up to 4: a prompt of 18-23 tokens and 20-40 generated).
    c.kv_memory_bytes = (4 + 16) * slot_bytes + 8 * block_bytes;
    c.policy = SchedulePolicy::Priority;
    c.preemption = m.preemption;
    auto core = test::make_core(c);
    ASSERT_TRUE(core);
    EXPECT_EQ(core->stats().kv_blocks_total, 8);
    EXPECT_EQ(core->stats().state_slots_total, 4);
    corrupt_swaps_for_testing(m.damaged);
    const test::LateArrivalRun run = test::run_with_late_arrivals(*core, reqs, 2);
    corrupt_swaps_for_testing(false);
    for (size_t i = 0; i < reqs.size(); ++i) EXPECT_EQ(run.tokens[i], want[i]) << "request " << i;
    const EngineStats st = core->stats();
    EXPECT_GE(st.n_preemptions, 1) << "the urgent requests needed the blocks";
    EXPECT_EQ(run.max_swapped > 0, m.preemption == PreemptionMode::Swap);
    EXPECT_EQ(st.n_swaps_lost > 0, m.damaged);
    EXPECT_EQ(st.state_slots_used, 0);
    EXPECT_EQ(st.kv_blocks_used, 0);
  }
}

// A request sharing a prompt's first 300 tokens starts at 256: the blocks of
// those positions are cached and the state was snapshotted there; it gets
// exactly the tokens it gets on an engine that never saw the first.
TEST_F(EngineHybrid, APromptStartsFromItsSharedPrefixsBlocksAndStateSnapshot) {
  const auto [first, second] = test::shared_prefix_pair();
  const std::vector<TokenId> want = alone(second);
  auto core = test::make_core(config());
  ASSERT_TRUE(core);
  test::run_all(*core, {first});
  EXPECT_EQ(core->stats().prefix_hit_tokens, 0);
  EXPECT_EQ(test::run_all(*core, {second})[0].tokens, want);
  EXPECT_EQ(core->stats().prefix_hit_tokens, 256)
      << "18 blocks (288 positions) are cached, the state at 256 is the last snapshot they cover";
  EngineConfig off = config();
  off.prefix_caching = false;
  auto plain = test::make_core(off);
  ASSERT_TRUE(plain);
  test::run_all(*plain, {first});
  EXPECT_EQ(test::run_all(*plain, {second})[0].tokens, want);
  EXPECT_EQ(plain->stats().prefix_hit_tokens, 0);
}

TEST_F(EngineHybrid, TheStatesShareTheKvMemoryBudget) {
  auto probe = test::make_core(config());
  ASSERT_TRUE(probe);
  const int64_t slot_bytes = probe->stats().state_slot_bytes, block_bytes = probe->stats().kv_block_bytes;
  EngineConfig c = config();
  c.kv_memory_bytes = (16 + 16) * slot_bytes + 100 * block_bytes;  // 16 running slots + 16 snapshots
  auto core = test::make_core(c);
  ASSERT_TRUE(core);
  EXPECT_EQ(core->stats().kv_blocks_total, 100);
  EXPECT_EQ(core->stats().state_bytes_total, 32 * slot_bytes);
  c.kv_memory_bytes = 32 * slot_bytes;  // nothing left for blocks
  auto refused = InlineEngine::create(c);
  ASSERT_FALSE(refused.is_ok());
  EXPECT_NE(refused.status().message().find("recurrent states"), std::string::npos)
      << refused.status().message();
}

}  // namespace
}  // namespace tern
