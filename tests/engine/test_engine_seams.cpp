// The seams of one engine step: the model runner's logits rows against the
// model fed token by token, a sliding-window model whose out-of-window KV
// blocks are released while it generates exactly what direct decoding does,
// and the public engine's output thread (stop strings cancel in the core).
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <thread>

#include "../core/file_test_util.h"
#include "../model/model_fixture.h"
#include "../model/one_by_one.h"
#include "../model/synthetic_model.h"
#include "engine/generate.h"
#include "engine/inline_engine.h"
#include "engine/model_runner.h"
#include "gguf/writer.h"
#include "model/batch_runner.h"

namespace tern {
namespace {

using test::logits_one_by_one;

TEST(ModelRunner, SeveralLogitsRowsPerSequenceEqualFeedingThemOneByOne) {
  TERN_REQUIRE_STORIES();
  auto model = Model::load(test::stories_gguf());
  ASSERT_TRUE(model.is_ok());
  const Model& m = **model;
  KvManagerConfig kc;
  kc.n_blocks = 64;
  kc.block_size = 16;  // paged, unlike the direct runner's one block per sequence
  auto kv = KvManager::create(m.kv_specs(KvType::F32), kc);
  ASSERT_TRUE(kv.is_ok());
  Scheduler sched(SchedulerConfig{});
  ModelRunner runner(m, **kv);
  const std::vector<int> golden = test::golden_ids();
  std::vector<TokenId> a(golden.begin(), golden.begin() + 40), b(golden.begin() + 60, golden.begin() + 85);
  b[0] = 1;
  for (auto [id, toks] : {std::pair{1, &a}, std::pair{2, &b}}) {
    SchedRequest r;
    r.id = RequestId(static_cast<uint64_t>(id));
    r.seq = SeqId(id);
    r.tokens = *toks;
    r.n_prompt = r.n_tokens = static_cast<int32_t>(toks->size());
    r.max_tokens = 1;
    sched.add(std::move(r));
  }
  const SchedulerOutput so = sched.schedule(**kv, 0);
  ASSERT_EQ(so.chunks.size(), 2u);
  // Every row of the first sequence, the last 7 of the second.
  const std::vector<int> n_rows = {so.chunks[0].n_tokens, 7};
  auto logits = runner.logits(so, sched, n_rows);
  ASSERT_TRUE(logits.is_ok()) << logits.status().message();
  const size_t nv = static_cast<size_t>(m.hparams().n_vocab);
  ASSERT_EQ(logits->size(), (40u + 7u) * nv);
  const auto want_a = logits_one_by_one(m, a), want_b = logits_one_by_one(m, b);
  for (size_t t = 0; t < 40; ++t)
    ASSERT_EQ(0, std::memcmp(logits->data() + t * nv, want_a[t].data(), nv * sizeof(float))) << "a, token " << t;
  for (size_t t = 0; t < 7; ++t)
    ASSERT_EQ(0, std::memcmp(logits->data() + (40 + t) * nv, want_b[18 + t].data(), nv * sizeof(float)))
        << "b, token " << 18 + t;
}

// A mistral-shaped model with a 6-position window (or per-layer windows) and
// the stories260K vocabulary (so an engine can tokenise), written to a file.
std::string write_window_model(const std::string& path, std::vector<int> layer_windows = {}) {
  test::SynthSpec s;
  s.arch = "mistral";
  s.sliding_window = layer_windows.empty() ? 6 : 0;
  s.layer_sliding_window = std::move(layer_windows);
  s.n_layer = s.layer_sliding_window.empty() ? 2 : static_cast<int>(s.layer_sliding_window.size());
  s.n_vocab = 512;
  s.seed = 11;
  test::SyntheticModel sm = test::make_synthetic(s);
  auto stories = gguf::GgufFile::open(test::stories_gguf());
  EXPECT_TRUE(stories.is_ok());
  for (const auto& [key, value] : stories->metadata())
    if (key.rfind("tokenizer.", 0) == 0) sm.set(key, value);
  auto image = test::to_gguf(sm);
  EXPECT_TRUE(image.is_ok());
  gguf::GgufWriter w;
  for (const auto& [key, value] : image->metadata()) w.set(key, value);
  for (const auto& t : image->tensors())
    EXPECT_TRUE(w.add_tensor(t.name, t.type, std::vector<uint64_t>(t.dims.begin(), t.dims.begin() + t.n_dims),
                             {t.data, t.n_bytes}).is_ok());
  EXPECT_TRUE(w.write(path).is_ok());
  return path;
}

// Greedy tokens of `prompt` through the model driven directly (nothing released).
std::vector<TokenId> direct_greedy(const std::string& path, const std::vector<TokenId>& prompt, int n) {
  auto model = Model::load(path);
  EXPECT_TRUE(model.is_ok());
  auto direct = BatchRunner::create(**model, 1, 128);
  EXPECT_TRUE(direct.is_ok());
  std::vector<TokenId> want;
  std::vector<float> logits;
  Batch b;
  for (size_t i = 0; i < prompt.size(); ++i) b.add(prompt[i], static_cast<int32_t>(i), SeqId(0), i + 1 == prompt.size());
  int32_t pos = static_cast<int32_t>(prompt.size());
  for (int k = 0; k < n; ++k) {
    EXPECT_TRUE(direct.value()->forward(b, logits).is_ok());
    const TokenId t = static_cast<TokenId>(std::max_element(logits.begin(), logits.end()) - logits.begin());
    want.push_back(t);
    b.clear();
    b.add(t, pos++, SeqId(0), true);
  }
  return want;
}

TEST(EngineSlidingWindow, ReleasesOutOfWindowBlocksAndGeneratesWhatDirectDecodingDoes) {
  TERN_REQUIRE_STORIES();
  test::ScratchDir dir;
  const std::string path = write_window_model(dir / "window.gguf");
  EngineConfig c;
  c.model_path = path;
  c.n_threads = 2;
  c.kv_type = KvType::F32;
  c.block_size = 2;
  c.kv_memory_bytes = 8 << 20;
  auto engine = InlineEngine::create(c);
  ASSERT_TRUE(engine.is_ok()) << engine.status().message();
  InlineEngine& e = **engine;
  GenerationRequest r;
  r.prompt_tokens = {1, 30, 41, 52, 63, 74, 85, 96, 107, 118};
  r.max_tokens = 60;
  r.ignore_eos = true;
  r.sampling.temperature = 0.0f;
  auto p = e.prepare(r);
  ASSERT_TRUE(p.is_ok());
  std::vector<TokenId> got;
  e.add(RequestId(1), *p, [&](const RequestOutput& o) {
    if (o.has_token) got.push_back(o.token);
  });
  int peak_decode = 0;
  while (e.has_work()) {
    ASSERT_TRUE(e.step().is_ok());
    if (got.size() > 2) peak_decode = std::max(peak_decode, e.stats().kv_blocks_used);
  }
  ASSERT_EQ(got.size(), 60u);
  // Window 6, blocks of 2: the window's 3 blocks, the one being written, one
  // partly behind the window.
  EXPECT_LE(peak_decode, 5) << "blocks behind the window were kept";
  EXPECT_EQ(e.stats().kv_blocks_used, 0);

  // The same greedy tokens when nothing is released (the model driven directly).
  EXPECT_EQ(got, direct_greedy(path, r.prompt_tokens, 60));
}

// Layers with different windows keep their K/V in different groups (one pool
// each, allocated in lockstep): the engine runs them through the same step.
TEST(EngineSlidingWindow, MixedWindowAndFullAttentionLayersRunInTwoGroups) {
  TERN_REQUIRE_STORIES();
  test::ScratchDir dir;
  const std::string path = write_window_model(dir / "mixed.gguf", {4, 0, 4});
  EngineConfig c;
  c.model_path = path;
  c.n_threads = 2;
  c.kv_type = KvType::F32;
  c.block_size = 2;
  c.kv_memory_bytes = 8 << 20;
  auto engine = InlineEngine::create(c);
  ASSERT_TRUE(engine.is_ok()) << engine.status().message();
  InlineEngine& e = **engine;
  EXPECT_EQ(e.core().kv().n_groups(), 2);
  GenerationRequest r;
  r.prompt_tokens = {1, 30, 41, 52, 63, 74};
  r.max_tokens = 40;
  r.ignore_eos = true;
  r.sampling.temperature = 0.0f;
  auto p = e.prepare(r);
  ASSERT_TRUE(p.is_ok());
  std::vector<TokenId> got;
  e.add(RequestId(1), *p, [&](const RequestOutput& o) {
    if (o.has_token) got.push_back(o.token);
  });
  while (e.has_work()) ASSERT_TRUE(e.step().is_ok());
  EXPECT_EQ(got, direct_greedy(path, r.prompt_tokens, 40));
  EXPECT_EQ(e.stats().kv_blocks_used, 0);
}

// The public engine: outputs arrive on its output thread; a stop string found
// there cancels the request in the core, which frees its KV at the next step.
TEST(EngineThreads, StopStringOnTheOutputThreadCancelsInTheCore) {
  TERN_REQUIRE_STORIES();
  auto engine = Engine::create(single_sequence_config(test::stories_gguf(), 0, 2));
  ASSERT_TRUE(engine.is_ok());
  GenerateOptions o;
  o.sampling.temperature = 0.0f;
  o.max_tokens = 200;
  o.stop = {"Lily."};
  auto r = generate(**engine, {1}, o);
  ASSERT_TRUE(r.is_ok());
  EXPECT_EQ(r->finish, FinishReason::Stop);
  for (int i = 0; i < 200 && (*engine)->stats().kv_blocks_used > 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  EXPECT_EQ((*engine)->stats().kv_blocks_used, 0);
  EXPECT_EQ((*engine)->stats().n_running, 0);
}

}  // namespace
}  // namespace tern
