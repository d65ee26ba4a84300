// A Mamba or Mamba-2 model (tern synth --arch mamba|mamba2) served by the engine: sequences in
// a continuous batch at different positions each hold one state slot, and
// get the greedy tokens they get alone, whatever the batch and however their
// prompts are chunked; a cancelled or finished request gives its slot back;
// the state memory is reported; speculative decoding is refused with a reason.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <map>
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

// One synthetic file per architecture, made by the first test that needs it:
// mamba (dim 64, 2 layers, d_state 16) and mamba2 (dim 64, 2 layers, 4 heads
// of 32 in 2 groups, d_state 32), Q8_0 matrices.
class EngineMamba : public ::testing::TestWithParam<std::string> {
 protected:
  static void TearDownTestSuite() {
    for (const auto& [arch, path] : paths_) std::filesystem::remove(path);
    paths_.clear();
  }
  void SetUp() override {
    if (!std::filesystem::exists(vocab_path())) GTEST_SKIP() << "tokenizer test data absent";
    std::string& path = paths_[GetParam()];
    if (!path.empty()) return;
    const std::string dir = std::string(TERN_BINARY_DIR) + "/test_models";
    std::filesystem::create_directories(dir);
    path = dir + "/engine_" + GetParam() + "." + std::to_string(::getpid()) + ".gguf";
    SynthOptions o;
    o.arch = GetParam();
    o.n_embd = 64;
    o.n_layer = 2;
    if (o.arch == "mamba2") {
      o.head_dim = 32;
      o.n_group = 2;
      o.d_state = 32;
    }
    o.n_ctx = 1024;
    o.seed = 5;
    o.weight_std = 0.1f;
    o.vocab_path = vocab_path();
    o.out_path = path;
    o.scheme = *find_quant_scheme("Q8_0");
    ThreadPool pool(2);
    ASSERT_TRUE(synth_model(o, pool).is_ok());
  }
  EngineConfig config() const {
    EngineConfig c;
    c.model_path = paths_[GetParam()];
    c.n_threads = 2;
    c.max_num_seqs = 16;
    return c;
  }
  static GenerationRequest request(size_t i) { return test::mixed_length_request(i); }
  static std::map<std::string, std::string> paths_;
};
std::map<std::string, std::string> EngineMamba::paths_;

TEST_P(EngineMamba, SixteenConcurrentRequestsGetWhatEachGetsAlone) {
  std::vector<GenerationRequest> reqs;
  for (size_t i = 0; i < 16; ++i) reqs.push_back(request(i));
  std::vector<std::vector<TokenId>> alone;
  for (const GenerationRequest& r : reqs) {
    auto core = test::make_core(config());
    ASSERT_TRUE(core);
    alone.push_back(test::run_all(*core, {r})[0].tokens);
  }
  // All at once, prompts chunked by a small token budget (a prompt spans several steps).
  EngineConfig c = config();
  c.max_batched_tokens = 24;
  auto core = test::make_core(c);
  ASSERT_TRUE(core);
  const auto together = test::run_all(*core, reqs);
  for (size_t i = 0; i < reqs.size(); ++i) {
    EXPECT_EQ(together[i].tokens, alone[i]) << "request " << i;
    EXPECT_EQ(together[i].tokens.size(), static_cast<size_t>(reqs[i].max_tokens));
  }
  const EngineStats st = core->stats();
  EXPECT_EQ(st.state_slots_total, 16);
  EXPECT_EQ(st.state_slots_used, 0) << "every finished request gave its slot back";
  EXPECT_GT(st.state_slots_peak, 1) << "requests ran together";
  // 2 layers x ((d_conv - 1) x conv channels + d_inner x d_state) floats: Mamba's
  // conv runs over d_inner 128, Mamba-2's over x, B and C (128 + 2 x 2 x 32).
  const int64_t want_slot = GetParam() == "mamba2" ? 2 * (3 * 256 + 128 * 32) * 4 : 2 * (3 * 128 + 128 * 16) * 4;
  EXPECT_EQ(st.state_slot_bytes, want_slot);
  EXPECT_EQ(st.state_bytes_total, (16 + 16) * st.state_slot_bytes) << "16 running, 16 prompt snapshots";
  EXPECT_EQ(st.kv_blocks_used, 0);
}

TEST_P(EngineMamba, CancellingARequestGivesItsSlotBack) {
  EngineConfig c = config();
  c.max_num_seqs = 2;
  auto core = test::make_core(c);
  ASSERT_TRUE(core);
  GenerationRequest long_req = request(1);
  long_req.max_tokens = 200;
  std::vector<TokenId> got_third;
  int n_first = 0;
  for (uint64_t id : {1, 2}) {
    auto p = core->prepare(long_req);
    ASSERT_TRUE(p.is_ok());
    core->add(RequestId(id), std::move(p).value(),
              [&](const RequestOutput& o) { n_first += o.has_token ? 1 : 0; });
  }
  auto p3 = core->prepare(request(2));
  ASSERT_TRUE(p3.is_ok());
  core->add(RequestId(3), std::move(p3).value(), [&](const RequestOutput& o) {
    if (o.has_token) got_third.push_back(o.token);
  });
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(core->step().is_ok());
  EXPECT_EQ(core->stats().state_slots_used, 2);
  EXPECT_TRUE(got_third.empty()) << "both slots are taken";
  core->cancel(RequestId(1));
  core->cancel(RequestId(2));
  for (int guard = 0; core->has_work() && guard < 1000; ++guard) ASSERT_TRUE(core->step().is_ok());
  EXPECT_EQ(core->stats().state_slots_used, 0);
  // The third ran in a slot a cancelled request left mid-sequence, and got what it gets alone.
  auto fresh = test::make_core(config());
  ASSERT_TRUE(fresh);
  EXPECT_EQ(got_third, test::run_all(*fresh, {request(2)})[0].tokens);
}

// Two state slots (a --kv-memory of two states) for four sequences: urgent
// requests preempt running ones (the priority policy), whose state is copied
// out and back (swap), or recomputed, or found damaged on the way back and
// recomputed; every request still gets the tokens it gets alone.
TEST_P(EngineMamba, PreemptionBySwapOrRecomputeKeepsEveryRequestsTokens) {
  std::vector<GenerationRequest> reqs = {request(3), request(4), request(1), request(2)};
  for (size_t i = 0; i < reqs.size(); ++i) {
    reqs[i].max_tokens = i < 2 ? 30 : 8;
    reqs[i].priority = i < 2 ? 5 : 0;  // the last two are more urgent
  }
  std::vector<std::vector<TokenId>> alone;
  for (const GenerationRequest& r : reqs) {
    auto core = test::make_core(config());
    ASSERT_TRUE(core);
    alone.push_back(test::run_all(*core, {r})[0].tokens);
  }
  auto probe = test::make_core(config());
  ASSERT_TRUE(probe);
  const int64_t slot_bytes = probe->stats().state_slot_bytes;
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
    c.kv_memory_bytes = 2 * slot_bytes;
    c.policy = SchedulePolicy::Priority;
    c.preemption = m.preemption;
    auto core = test::make_core(c);
    ASSERT_TRUE(core);
    EXPECT_EQ(core->stats().state_slots_total, 2);
    corrupt_swaps_for_testing(m.damaged);
    const test::LateArrivalRun run = test::run_with_late_arrivals(*core, reqs, 2);
    corrupt_swaps_for_testing(false);
    for (size_t i = 0; i < reqs.size(); ++i) EXPECT_EQ(run.tokens[i], alone[i]) << "request " << i;
    const EngineStats st = core->stats();
    EXPECT_GE(st.n_preemptions, 2) << "the urgent requests took both slots";
    EXPECT_EQ(run.max_swapped > 0, m.preemption == PreemptionMode::Swap);
    EXPECT_EQ(st.n_swaps_lost > 0, m.damaged);
    EXPECT_EQ(st.state_slots_used, 0);
  }
}

// Prefix caching by state snapshots (every 128 prompt positions): a request
// sharing a prompt's first 300 tokens starts from the snapshot at 256 and
// gets exactly the tokens it gets on an engine that never saw the first.
TEST_P(EngineMamba, APromptStartsFromTheSnapshotOfItsSharedPrefix) {
  const auto [first, second] = test::shared_prefix_pair();
  auto fresh = test::make_core(config());
  ASSERT_TRUE(fresh);
  const std::vector<TokenId> want = test::run_all(*fresh, {second})[0].tokens;
  EXPECT_EQ(fresh->stats().prefix_hit_tokens, 0);

  auto core = test::make_core(config());
  ASSERT_TRUE(core);
  test::run_all(*core, {first});
  const int64_t hits_before = core->stats().prefix_hit_tokens;
  EXPECT_EQ(hits_before, 0);
  EXPECT_EQ(test::run_all(*core, {second})[0].tokens, want);
  EXPECT_EQ(core->stats().prefix_hit_tokens, 256) << "the snapshot after 256 of the 300 shared tokens";
  // Without prefix caching nothing is snapshotted or hit.
  EngineConfig off = config();
  off.prefix_caching = false;
  auto plain = test::make_core(off);
  ASSERT_TRUE(plain);
  test::run_all(*plain, {first});
  EXPECT_EQ(test::run_all(*plain, {second})[0].tokens, want);
  EXPECT_EQ(plain->stats().prefix_hit_tokens, 0);
}

TEST_P(EngineMamba, SpeculativeDecodingIsRefusedWithAReason) {
  EngineConfig c = config();
  c.spec = SpecMethod::Ngram;
  auto core = InlineEngine::create(c);
  ASSERT_FALSE(core.is_ok());
  EXPECT_NE(core.status().message().find("recurrent state"), std::string::npos) << core.status().message();
}

INSTANTIATE_TEST_SUITE_P(Engine, EngineMamba, ::testing::Values("mamba", "mamba2"),
                         [](const ::testing::TestParamInfo<std::string>& i) { return i.param; });

}  // namespace
}  // namespace tern
