// The quantized KV cache on the trained model: greedy stories260K with a
// q8_0 cache against an f16 one, and what the encoding costs in KL.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "model/batch_runner.h"
#include "model/model.h"
#include "model_fixture.h"

namespace tern {
namespace {

int argmax(const float* v, int n) { return static_cast<int>(std::max_element(v, v + n) - v); }

// KL(p || q) of two logit rows, in double.
double kl(const float* p_logits, const float* q_logits, int n) {
  auto log_softmax = [n](const float* x) {
    const double mx = *std::max_element(x, x + n);
    double sum = 0;
    for (int i = 0; i < n; ++i) sum += std::exp(x[i] - mx);
    std::vector<double> out(static_cast<size_t>(n));
    for (int i = 0; i < n; ++i) out[static_cast<size_t>(i)] = x[i] - mx - std::log(sum);
    return out;
  };
  const auto lp = log_softmax(p_logits), lq = log_softmax(q_logits);
  double d = 0;
  for (size_t i = 0; i < lp.size(); ++i) d += std::exp(lp[i]) * (lp[i] - lq[i]);
  return d;
}

struct Decoded {
  std::vector<int> tokens;                // greedy choices
  std::vector<std::vector<float>> rows;   // logits of every step
};

// Greedy decode of n tokens after `prompt` through a paged cache of `type`;
// `forced`: feed these tokens instead of its own choices (teacher forcing).
Decoded greedy(const Model& m, const std::vector<int>& prompt, int n, KvType type, const std::vector<int>* forced) {
  Decoded r;
  auto runner = BatchRunner::create(m, 1, static_cast<int32_t>(prompt.size()) + n + 1, type, 16);
  EXPECT_TRUE(runner.is_ok());
  if (!runner) return r;
  const int nv = m.hparams().n_vocab;
  Batch b;
  for (size_t i = 0; i < prompt.size(); ++i) b.add(prompt[i], static_cast<int32_t>(i), SeqId(0), i + 1 == prompt.size());
  std::vector<float> logits;
  for (int step = 0; step < n; ++step) {
    EXPECT_TRUE(runner.value()->forward(b, logits).is_ok());
    r.rows.emplace_back(logits.begin(), logits.begin() + nv);
    r.tokens.push_back(argmax(logits.data(), nv));
    b.clear();
    const int next = forced ? (*forced)[static_cast<size_t>(step)] : r.tokens.back();
    b.add(next, static_cast<int32_t>(prompt.size()) + step, SeqId(0), true);
  }
  return r;
}

// stories260K (loaded once) and the golden output's first 5 tokens; 200 steps.
class KvQuant : public ::testing::Test {
 protected:
  void SetUp() override {
    TERN_REQUIRE_STORIES();
    static const auto m = Model::load(test::stories_gguf());
    ASSERT_TRUE(m.is_ok()) << m.status().message();
    model_ = m->get();
    const auto golden = test::golden_ids();
    prompt = {golden.begin(), golden.begin() + 5};
  }
  const Model* model_ = nullptr;
  std::vector<int> prompt;
  static constexpr int kSteps = 200;
};

// stories260K's head size is 8: one q8_0 group per head (8 int8 and a half
// scale, 10 bytes where f16 takes 16). Greedy from the golden prompt: the
// q8_0 cache gives the f16 cache's first 114 tokens and then diverges where
// f16's top two logits are 0.12 apart (measured on AVX-512); the test wants
// at least 100 equal tokens and any divergence at a near-tie. Teacher-forced
// on f16's tokens, the mean KL of the q8_0 cache's next-token distributions
// from the f16 cache's stays under the 0.002 (measured 0.00089; f16
// against f32 measured 5.7e-7).
TEST_F(KvQuant, Q8_0GreedyFollowsF16AndKlIsSmall) {
  const Model& model = *model_;
  const Decoded f16 = greedy(model, prompt, kSteps, KvType::F16, nullptr);
  const Decoded q8 = greedy(model, prompt, kSteps, KvType::Q8_0, nullptr);
  ASSERT_EQ(f16.tokens.size(), static_cast<size_t>(kSteps));
  const auto diverge = std::mismatch(f16.tokens.begin(), f16.tokens.end(), q8.tokens.begin());
  const size_t first_diff = static_cast<size_t>(diverge.first - f16.tokens.begin());
  if (first_diff < f16.tokens.size()) {
    std::vector<float> r = f16.rows[first_diff];
    std::partial_sort(r.begin(), r.begin() + 2, r.end(), std::greater<>());
    std::printf("first divergence at step %zu: f16's top-2 gap %.4f, q8_0 row KL %.4g\n", first_diff, r[0] - r[1],
                kl(f16.rows[first_diff].data(), q8.rows[first_diff].data(), model.hparams().n_vocab));
    // A divergence may only come where f16's choice was close to a tie.
    EXPECT_LT(r[0] - r[1], 0.5f) << "diverged at step " << first_diff << " on a clear choice";
  }
  EXPECT_GE(first_diff, 100u);

  const Decoded forced = greedy(model, prompt, kSteps, KvType::Q8_0, &f16.tokens);
  const int nv = model.hparams().n_vocab;
  double sum = 0, worst = 0, f32_sum = 0;
  for (int t = 0; t < kSteps; ++t) {
    const double d = kl(f16.rows[static_cast<size_t>(t)].data(), forced.rows[static_cast<size_t>(t)].data(), nv);
    sum += d;
    worst = std::max(worst, d);
  }
  // Against the f32 cache too: q8_0's cost must dwarf f16's rounding, or the
  // comparison above would measure nothing.
  const Decoded f32 = greedy(model, prompt, kSteps, KvType::F32, &f16.tokens);
  for (int t = 0; t < kSteps; ++t)
    f32_sum += kl(f32.rows[static_cast<size_t>(t)].data(), f16.rows[static_cast<size_t>(t)].data(), nv);
  const double mean = sum / kSteps;
  EXPECT_LT(mean, 0.002);
  EXPECT_GT(mean, 0.0);
  RecordProperty("q8_0_mean_kl", std::to_string(mean));
  RecordProperty("q8_0_max_kl", std::to_string(worst));
  RecordProperty("f16_vs_f32_mean_kl", std::to_string(f32_sum / kSteps));
  std::printf("q8_0 vs f16 KV, 200 steps: mean KL %.3g, max %.3g; f16 vs f32: mean KL %.3g\n", mean, worst,
              f32_sum / kSteps);
}

// The q4_0 and fp8 caches on the same path: q4_0 one 4-bit group per head of 8
// (6 bytes where f16 takes 16), fp8 a byte per element. Teacher-forced on the
// f16 cache's greedy tokens, q4_0's mean KL from f16 must exceed q8_0's (the
// coarser code has to cost something, or the comparison measures nothing) and
// stay under 0.6: measured 0.397 (q8_0 0.00089), the 16x coarser step squared,
// near enough; greedy equal for the first 15 tokens: a lossy cache. fp8's 3
// mantissa bits per element fall between: measured 0.0087.
TEST_F(KvQuant, Q4_0AndFp8CostWhatTheirBitsSay) {
  const Model& model = *model_;
  const int nv = model.hparams().n_vocab;
  const Decoded f16 = greedy(model, prompt, kSteps, KvType::F16, nullptr);
  const Decoded q4_own = greedy(model, prompt, kSteps, KvType::Q4_0, nullptr);
  const size_t first_diff =
      static_cast<size_t>(std::mismatch(f16.tokens.begin(), f16.tokens.end(), q4_own.tokens.begin()).first - f16.tokens.begin());
  double mean[3] = {0, 0, 0};  // q8_0, q4_0, fp8
  const KvType types[3] = {KvType::Q8_0, KvType::Q4_0, KvType::Fp8};
  for (int k = 0; k < 3; ++k) {
    const Decoded forced = greedy(model, prompt, kSteps, types[k], &f16.tokens);
    for (int t = 0; t < kSteps; ++t)
      mean[k] += kl(f16.rows[static_cast<size_t>(t)].data(), forced.rows[static_cast<size_t>(t)].data(), nv) / kSteps;
  }
  std::printf("q4_0 vs f16 KV, 200 steps: mean KL %.3g (q8_0 %.3g, fp8 %.3g); greedy equal for %zu tokens\n", mean[1],
              mean[0], mean[2], first_diff);
  RecordProperty("q4_0_mean_kl", std::to_string(mean[1]));
  RecordProperty("fp8_mean_kl", std::to_string(mean[2]));
  // fp8 keeps 3 mantissa bits of every element: between q8_0 and q4_0.
  EXPECT_GT(mean[2], mean[0]);
  EXPECT_LT(mean[2], mean[1]);
  EXPECT_GT(mean[1], mean[0]);
  EXPECT_LT(mean[1], 0.6);
}

}  // namespace
}  // namespace tern
