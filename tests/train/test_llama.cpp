// The training core's Llama pass as a whole: every parameter's gradient of a
// tiny random model against central finite differences in double (tied and
// untied heads, both RoPE layouts); its float forward against the inference
// engine's logits on stories260K; and AdamW steps on it lowering the loss,
// the same way twice.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "../model/model_fixture.h"
#include "gguf/reader.h"
#include "model/batch_runner.h"
#include "model/model.h"
#include "train/llama.h"
#include "train/optimizer.h"

namespace tern::train {
namespace {

template <typename F>
std::vector<F> random_params(const LlamaLayout& l, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<double> d(0.0, 0.4);
  std::vector<F> p(l.n_params);
  for (const ParamTensor& t : l.tensors)
    for (size_t i = 0; i < t.size; ++i) p[t.offset + i] = static_cast<F>(t.decay ? d(rng) : 1.0 + 0.2 * d(rng));
  return p;
}

LlamaShape tiny(bool tied, bool neox) {
  LlamaShape s;
  s.n_vocab = 11;
  s.n_embd = 8;
  s.n_layer = 2;
  s.n_head = 2;
  s.n_head_kv = 1;
  s.head_dim = 4;
  s.n_ff = 12;
  s.tied = tied;
  s.rope_neox = neox;
  return s;
}

TEST(TrainLlama, EveryParameterGradientMatchesFiniteDifferences) {
  for (bool tied : {true, false})
    for (bool neox : {false, true}) {
      SCOPED_TRACE(std::string(tied ? "tied" : "untied") + (neox ? ", neox" : ", adjacent pairs"));
      const LlamaLayout layout = LlamaLayout::make(tiny(tied, neox));
      std::vector<double> p = random_params<double>(layout, 3);
      const std::vector<int32_t> tokens = {1, 7, 3, 3, 10, 0}, targets = {7, 3, 3, 10, 0, -1};
      ThreadPool pool(2);
      LlamaPass<double> pass(layout);
      const double loss = pass.forward(p.data(), tokens.data(), targets.data(), 6, pool);
      EXPECT_GT(loss, 0.0);
      std::vector<double> g(layout.n_params, 0.0);
      pass.backward(p.data(), g.data(), pool);
      const double h = 1e-5;
      size_t checked = 0;
      for (const ParamTensor& t : layout.tensors) {
        double norm = 0;
        for (size_t i = 0; i < t.size; ++i) {
          double& x = p[t.offset + i];
          const double keep = x;
          x = keep + h;
          const double up = pass.forward(p.data(), tokens.data(), targets.data(), 6, pool);
          x = keep - h;
          const double down = pass.forward(p.data(), tokens.data(), targets.data(), 6, pool);
          x = keep;
          const double numeric = (up - down) / (2 * h);
          EXPECT_NEAR(g[t.offset + i], numeric, 1e-8 + 1e-6 * std::fabs(numeric)) << t.name << "[" << i << "]";
          norm += numeric * numeric;
          ++checked;
        }
        EXPECT_GT(norm, 1e-14) << t.name << ": no gradient reaches it";
      }
      EXPECT_EQ(checked, layout.n_params);
    }
}

TEST(TrainLlama, ForwardGivesTheInferenceEnginesLogitsOnStories) {
  TERN_REQUIRE_STORIES();
  auto file = gguf::GgufFile::open(test::stories_gguf());
  ASSERT_TRUE(file);
  auto shape = llama_shape(*file);
  ASSERT_TRUE(shape) << shape.status().message();
  EXPECT_TRUE(shape->tied);
  const LlamaLayout layout = LlamaLayout::make(*shape);
  auto params = load_params(*file, layout);
  ASSERT_TRUE(params) << params.status().message();
  const std::vector<int> golden = test::golden_ids();
  ASSERT_GE(golden.size(), 64u);
  std::vector<int32_t> tokens(golden.begin(), golden.begin() + 64), targets(golden.begin() + 1, golden.begin() + 65);
  ThreadPool pool(2);
  LlamaPass<float> pass(layout);
  const double loss = pass.forward(params->data(), tokens.data(), targets.data(), 64, pool);
  // The golden continuation is the model's own greedy output: its loss is low.
  EXPECT_LT(loss, 1.5);
  auto model = Model::load(test::stories_gguf());
  ASSERT_TRUE(model);
  auto runner = BatchRunner::create(**model, 1, 64);
  ASSERT_TRUE(runner);
  Batch b;
  for (int i = 0; i < 64; ++i) b.add(tokens[i], i, SeqId(0), true);
  std::vector<float> want;
  ASSERT_TRUE((*runner)->forward(b, want).is_ok());
  ASSERT_EQ(want.size(), pass.logits().size());
  double worst = 0;
  for (size_t i = 0; i < want.size(); ++i) worst = std::max(worst, double(std::fabs(want[i] - pass.logits()[i])));
  EXPECT_LT(worst, 2e-3);
}

// 30 AdamW steps on one 32-token sequence: a random tiny model learns it
// (loss at least halved), and a second run gives the same losses bit for bit.
TEST(TrainLlama, AdamWStepsLowerTheLossDeterministically) {
  LlamaShape s = tiny(false, false);
  s.n_vocab = 16;
  s.n_embd = 16;
  s.n_ff = 32;
  const LlamaLayout layout = LlamaLayout::make(s);
  std::vector<int32_t> seq(33);
  std::mt19937 rng(5);
  for (int32_t& t : seq) t = static_cast<int32_t>(rng() % 16);
  const std::vector<int32_t> tokens(seq.begin(), seq.end() - 1), targets(seq.begin() + 1, seq.end());
  auto run = [&](int threads) {
    std::vector<float> p = random_params<float>(layout, 9), m(layout.n_params, 0.0f), v(layout.n_params, 0.0f),
                       g(layout.n_params);
    ThreadPool pool(threads);
    LlamaPass<float> pass(layout);
    const AdamWConfig c{0.9, 0.95, 1e-8, 0.0};
    std::vector<double> losses;
    for (int step = 1; step <= 30; ++step) {
      losses.push_back(pass.forward(p.data(), tokens.data(), targets.data(), 32, pool));
      std::fill(g.begin(), g.end(), 0.0f);
      pass.backward(p.data(), g.data(), pool);
      for (const ParamTensor& t : layout.tensors)
        adamw_step(c, {p.data() + t.offset, t.size}, {g.data() + t.offset, t.size}, {m.data() + t.offset, t.size},
                   {v.data() + t.offset, t.size}, step, 1e-2, t.decay);
    }
    return losses;
  };
  const std::vector<double> a = run(2), b = run(1);
  EXPECT_LT(a.back(), a.front() * 0.5) << a.front() << " -> " << a.back();
  EXPECT_EQ(a, b);
}

}  // namespace
}  // namespace tern::train
