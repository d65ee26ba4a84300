// Training runs (train/trainer.h): a run interrupted and resumed from its
// checkpoint ends bit-identical to the uninterrupted one; checkpoints refuse
// other options and other models; the written model computes in the engine
// what the trainer computed; the loss curve is a well-formed SVG.
#include <gtest/gtest.h>

#include <filesystem>
#include <random>
#include <set>

#include "../model/model_fixture.h"
#include "gguf/reader.h"
#include "model/batch_runner.h"
#include "model/model.h"
#include "train/distill.h"
#include "train/trainer.h"

namespace tern::train {
namespace {

std::string scratch(const std::string& name) {
  return std::string(TERN_BINARY_DIR) + "/train_" + name + "." + std::to_string(::getpid()) + ".gguf";
}

LlamaLayout tiny_layout() {
  LlamaShape s;
  s.n_vocab = 19;
  s.n_embd = 16;
  s.n_layer = 2;
  s.n_head = 4;
  s.n_head_kv = 2;
  s.head_dim = 4;
  s.n_ff = 24;
  s.tied = false;
  return LlamaLayout::make(s);
}

TrainState random_state(const LlamaLayout& l) {
  std::mt19937 rng(11);
  std::normal_distribution<float> d(0.0f, 0.3f);
  TrainState st;
  st.params.resize(l.n_params);
  for (const ParamTensor& t : l.tensors)
    for (size_t i = 0; i < t.size; ++i) st.params[t.offset + i] = t.decay ? d(rng) : 1.0f;
  return st;
}

// A stream a model can learn: each token follows from the one before, but for one in ten drawn at random.
std::vector<int32_t> random_tokens(size_t n, int vocab) {
  std::mt19937 rng(3);
  std::vector<int32_t> t(n);
  for (size_t i = 0; i < n; ++i)
    t[i] = static_cast<int32_t>(i == 0 || rng() % 10 == 0 ? rng() % static_cast<uint32_t>(vocab) : (t[i - 1] * 5 + 1) % vocab);
  return t;
}

TrainOptions options() {
  TrainOptions o;
  o.steps = 12;
  o.ctx = 16;
  o.batch = 3;
  o.lr = {3e-3, 3e-4, 2, 12};
  o.seed = 7;
  return o;
}

TEST(Trainer, WindowsDependOnlyOnSeedStepAndIndex) {
  std::set<int64_t> seen;
  for (int64_t s = 0; s < 50; ++s)
    for (int64_t k = 0; k < 4; ++k) {
      const int64_t a = window_start(7, s, k, 1000, 64);
      EXPECT_EQ(a, window_start(7, s, k, 1000, 64));
      EXPECT_GE(a, 0);
      EXPECT_LE(a + 64, 999);  // the last token of the window still has a target
      seen.insert(a);
    }
  EXPECT_GT(seen.size(), 150u);  // spread over the text
  EXPECT_NE(window_start(7, 3, 0, 1000, 64), window_start(8, 3, 0, 1000, 64));
}

TEST(Trainer, ResumedRunEndsBitIdenticalToTheUninterruptedOne) {
  const LlamaLayout layout = tiny_layout();
  const std::vector<int32_t> tokens = random_tokens(400, 19);
  const TrainOptions o = options();
  ThreadPool pool(2);
  TrainState whole = random_state(layout);
  ASSERT_TRUE(train_steps(layout, tokens, o, whole, pool).is_ok());
  ASSERT_EQ(whole.step, 12);
  EXPECT_LT(whole.losses.back(), whole.losses.front() * 0.9) << whole.losses.front() << " -> " << whole.losses.back();

  TrainState part = random_state(layout);
  ASSERT_TRUE(train_steps(layout, tokens, o, part, pool, [](const StepReport& r) { return r.step < 5; }).is_ok());
  ASSERT_EQ(part.step, 5);
  const std::string ck = scratch("ck");
  ASSERT_TRUE(write_checkpoint(ck, layout, o, part).is_ok());
  auto resumed = read_checkpoint(ck, layout, o);
  ASSERT_TRUE(resumed) << resumed.status().message();
  EXPECT_EQ(resumed->step, 5);
  ThreadPool other(1);  // and on another thread count
  ASSERT_TRUE(train_steps(layout, tokens, o, *resumed, other).is_ok());
  EXPECT_EQ(resumed->params, whole.params);
  EXPECT_EQ(resumed->m, whole.m);
  EXPECT_EQ(resumed->v, whole.v);
  EXPECT_EQ(resumed->losses, whole.losses);

  TrainOptions changed = o;
  changed.seed = 8;
  auto r = read_checkpoint(ck, layout, changed);
  ASSERT_FALSE(r);
  EXPECT_NE(r.status().message().find("resume with the same options"), std::string::npos) << r.status().message();
  LlamaShape bigger = layout.shape;
  bigger.n_ff = 32;
  auto r2 = read_checkpoint(ck, LlamaLayout::make(bigger), o);
  ASSERT_FALSE(r2);
  EXPECT_NE(r2.status().message().find("a checkpoint of another model"), std::string::npos) << r2.status().message();
  std::filesystem::remove(ck);
}

TEST(Trainer, KeepZerosLeavesPrunedWeightsAtZero) {
  const LlamaLayout layout = tiny_layout();
  const std::vector<int32_t> tokens = random_tokens(400, 19);
  TrainOptions o = options();
  ThreadPool pool(2);
  for (bool keep : {true, false}) {
    TrainState st = random_state(layout);
    const size_t wq = layout.layers[1].wq;
    for (size_t i = 0; i < 64; i += 2) st.params[wq + i] = 0.0f;  // half of the first 64 weights
    const std::vector<float> before = st.params;
    o.keep_zeros = keep;
    ASSERT_TRUE(train_steps(layout, tokens, o, st, pool).is_ok());
    int zero = 0, moved = 0;
    for (size_t i = 0; i < 64; ++i) {
      zero += st.params[wq + i] == 0.0f ? 1 : 0;
      moved += st.params[wq + i] != before[wq + i] ? 1 : 0;
    }
    EXPECT_EQ(zero, keep ? 32 : 0) << keep;
    EXPECT_EQ(moved, keep ? 32 : 64) << keep;
  }
}

TEST(Trainer, RefusesATextShorterThanOneSequence) {
  const LlamaLayout layout = tiny_layout();
  TrainState st = random_state(layout);
  ThreadPool pool(1);
  auto s = train_steps(layout, random_tokens(16, 19), options(), st, pool);
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("fewer than one sequence"), std::string::npos) << s.message();
}

// stories260K trained 3 steps: the file written loads in the engine and gives
// the logits the trainer's own forward gives for its parameters.
TEST(Trainer, WrittenModelComputesWhatTheTrainerComputed) {
  TERN_REQUIRE_STORIES();
  auto file = gguf::GgufFile::open(test::stories_gguf());
  ASSERT_TRUE(file);
  const LlamaLayout layout = LlamaLayout::make(*llama_shape(*file));
  TrainState st;
  st.params = *load_params(*file, layout);
  const std::vector<int> golden = test::golden_ids();
  const std::vector<int32_t> tokens(golden.begin(), golden.end());
  TrainOptions o = options();
  o.steps = 3;
  o.ctx = 32;
  ThreadPool pool(2);
  ASSERT_TRUE(train_steps(layout, tokens, o, st, pool).is_ok());
  const std::string out = scratch("trained");
  ASSERT_TRUE(write_trained_model(*file, layout, st.params, out, o, st.losses).is_ok());
  auto written = gguf::GgufFile::open(out);
  ASSERT_TRUE(written);
  EXPECT_EQ(*written->get_i64("tern.train.steps"), 3);
  EXPECT_EQ(written->find_tensor("blk.1.ffn_up.weight")->type, gguf::GgmlType::F32);
  EXPECT_TRUE(written->get_string("tokenizer.ggml.model"));  // the tokenizer travels with it
  LlamaPass<float> pass(layout);
  const std::vector<int32_t> seq(tokens.begin(), tokens.begin() + 40), next(tokens.begin() + 1, tokens.begin() + 41);
  pass.forward(st.params.data(), seq.data(), next.data(), 40, pool);
  auto model = Model::load(out);
  ASSERT_TRUE(model);
  auto runner = BatchRunner::create(**model, 1, 40);
  ASSERT_TRUE(runner);
  Batch b;
  for (int i = 0; i < 40; ++i) b.add(seq[i], i, SeqId(0), true);
  std::vector<float> logits;
  ASSERT_TRUE((*runner)->forward(b, logits).is_ok());
  ASSERT_EQ(logits.size(), pass.logits().size());
  for (size_t i = 0; i < logits.size(); ++i) ASSERT_NEAR(logits[i], pass.logits()[i], 2e-3) << i;
  std::filesystem::remove(out);
}

// Distillation from the engine running stories260K: into stories260K itself
// the KL starts at float noise; into its structured-pruned copy it starts
// high and falls.
TEST(Trainer, DistillationMatchesATeacherItEqualsAndPullsAPrunedStudentToward) {
  TERN_REQUIRE_STORIES();
  auto file = gguf::GgufFile::open(test::stories_gguf());
  ASSERT_TRUE(file);
  const LlamaLayout layout = LlamaLayout::make(*llama_shape(*file));
  auto teacher = EngineTeacher::open(test::stories_gguf(), layout.shape.n_vocab, 32);
  ASSERT_TRUE(teacher) << teacher.status().message();
  const std::vector<int> golden = test::golden_ids();
  const std::vector<int32_t> tokens(golden.begin(), golden.end());
  TrainOptions o = options();
  o.ctx = 32;
  o.steps = 1;
  o.teacher = [&](const int32_t* seq, int64_t n, std::vector<float>& logits) { return (*teacher)->logits(seq, n, logits); };
  ThreadPool pool(2);
  TrainState same;
  same.params = *load_params(*file, layout);
  ASSERT_TRUE(train_steps(layout, tokens, o, same, pool).is_ok());
  EXPECT_LT(same.losses[0], 1e-5);  // τ²·KL of two computations of one model

  // A student with its FFN weights halved learns them back from the teacher.
  TrainState student;
  student.params = *load_params(*file, layout);
  for (const LlamaLayout::Layer& l : layout.layers)
    for (int64_t i = 0; i < layout.shape.n_ff * layout.shape.n_embd; ++i) student.params[l.w_down + static_cast<size_t>(i)] *= 0.5f;
  o.steps = 25;
  o.lr = {3e-3, 3e-4, 2, 25};
  ASSERT_TRUE(train_steps(layout, tokens, o, student, pool).is_ok());
  EXPECT_GT(student.losses.front(), 0.01);
  EXPECT_LT(student.losses.back(), student.losses.front() * 0.5) << student.losses.front() << " -> " << student.losses.back();
  auto other = EngineTeacher::open(test::stories_gguf(), 600, 32);
  ASSERT_FALSE(other);
  EXPECT_NE(other.status().message().find("the same tokens"), std::string::npos);
}

TEST(Trainer, LossCurveIsAnSvgWithOnePointPerStep) {
  const std::string svg = loss_curve_svg({3.0, 2.5, 2.25, 2.0}, "a <b> & c");
  EXPECT_EQ(svg.rfind("<svg ", 0), 0u);
  EXPECT_NE(svg.find("</svg>"), std::string::npos);
  EXPECT_NE(svg.find("a &lt;b&gt; &amp; c"), std::string::npos);
  const size_t at = svg.find("points=\"");
  ASSERT_NE(at, std::string::npos);
  const std::string pts = svg.substr(at + 8, svg.find('"', at + 8) - at - 8);
  EXPECT_EQ(std::count(pts.begin(), pts.end(), ','), 4);
  EXPECT_NE(pts.find("56.0,32.0"), std::string::npos);   // the first (highest) loss at the top left
  EXPECT_NE(pts.find("624.0,320.0"), std::string::npos);  // the last (lowest) at the bottom right
}

}  // namespace
}  // namespace tern::train
