// Llama 3.1 RoPE frequency factors (rope_freqs.weight), Qwen3 (per-head q/k
// RMSNorm) and Phi-3 (fused attn_qkv and gate/up, LongRoPE factors chosen by
// the context, attention factor) on synthetic models checked against the
// independent ReferenceGguf, each with the feature switched off in the
// reference to show the comparison would catch it ignored (arch_checks.h).
#include <gtest/gtest.h>

#include <cmath>

#include "arch_checks.h"
#include "model/model.h"

namespace tern {
namespace {

using namespace test;  // arch_checks.h: load, run, expect_matches, ...

// Llama 3.1's factors are 1 for fast pairs, up to 8 for slow ones; these mix
// divisors and multipliers so that positions < 40 turn every pair visibly.
const std::vector<float> kFactors{1.0f, 4.0f, 0.25f, 8.0f, 0.1f, 16.0f, 0.05f, 0.02f};

SynthSpec llama3_spec() {
  SynthSpec s;
  s.n_head = 4;
  s.n_head_kv = 2;  // head_dim = n_rot = 16: 8 pairs
  s.freq_base = 500000.0;
  s.rope_freqs = kFactors;
  s.seed = 31;
  return s;
}

TEST(Llama3, RopeFreqsDivideEachPairsFrequency) {
  const SynthSpec s = llama3_spec();
  Loaded l = load(make_synthetic(s));
  ASSERT_TRUE(l.model);
  // The reference's angle: pair 3 at position 10 is 10 * base^(-6/16) / 8.
  double theta, mscale;
  l.ref.rope_angle(3, 10, theta, mscale);
  EXPECT_NEAR(theta, 10.0 * std::pow(500000.0, -6.0 / 16) / 8.0, 1e-12);
  EXPECT_EQ(mscale, 1.0);
  const auto tokens = random_tokens(40, s.n_vocab, 31);
  const Rows got = expect_matches(*l.model, l.ref, tokens);
  ReferenceGguf without = l.ref;  // the same file read by something that ignores rope_freqs
  without.config.rope_freqs.clear();
  expect_sensitive(got, without, tokens, "rope_freqs.weight");
}

TEST(Llama3, BadRopeFreqsAreRefusedByName) {
  SynthSpec s = llama3_spec();
  s.rope_freqs[2] = 0.0f;  // would turn every angle of pair 2 into inf
  expect_error(make_synthetic(s), ErrorKind::InvalidFile, {"rope_freqs.weight", "value 2", "positive"});
  s = llama3_spec();
  s.rope_freqs.pop_back();  // n_rot / 2 = 8 expected
  expect_error(make_synthetic(s), ErrorKind::InvalidFile, {"rope_freqs.weight"});
}

// qwen3: q and k heads RMSNorm'd (own weights, [head_dim]) before RoPE; head
// size 16 with n_embd 64 and 8 heads (q_dim 128 != n_embd), as Qwen3's
// key_length 128 differs from n_embd / n_head.
TEST(Qwen3, PerHeadQkNormBeforeRope) {
  SynthSpec s;
  s.arch = "qwen3";
  s.n_head = 8;
  s.n_head_kv = 2;
  s.key_length = 16;
  s.freq_base = 1e6;
  s.rms_eps = 1e-6f;
  s.seed = 32;
  Loaded l = load(make_synthetic(s));
  ASSERT_TRUE(l.model);
  EXPECT_EQ(l.model->hparams().rope.layout, kernels::RopeLayout::NeoX);
  EXPECT_EQ(l.model->hparams().q_dim(), 128);
  const auto tokens = random_tokens(30, s.n_vocab, 32);
  const Rows got = expect_matches(*l.model, l.ref, tokens);
  ReferenceGguf without = l.ref;
  without.config.qk_norm = false;
  expect_sensitive(got, without, tokens, "q/k norm");
  ReferenceGguf normal = l.ref;
  normal.config.neox = false;
  expect_sensitive(got, normal, tokens, "NeoX pairing");
}

TEST(Qwen3, MissingQkNormIsRefused) {
  SynthSpec s;
  s.arch = "qwen3";
  auto sm = make_synthetic(s);
  sm.remove_tensor("blk.1.attn_k_norm.weight");
  expect_error(sm, ErrorKind::InvalidFile, {"blk.1.attn_k_norm.weight", "missing"});
  // qwen2 does not read q/k norms: a file that has them is refused, not half-computed.
  s.arch = "qwen2";
  sm = make_synthetic(s);
  sm.tensors.push_back({"blk.0.attn_q_norm.weight", {8}, std::vector<float>(8, 1.0f), {}});
  expect_error(sm, ErrorKind::Unsupported, {"blk.0.attn_q_norm.weight", "'qwen2'"});
}

SynthSpec phi3_spec(int orig_ctx) {
  SynthSpec s;
  s.arch = "phi3";
  s.n_head = 4;
  s.n_head_kv = 4;  // Phi-3 mini has no GQA; Phi-3 medium does (covered by the registry test's 8/2)
  s.n_ctx_train = 256;
  s.yarn_orig_ctx = orig_ctx;
  s.rope_long = kFactors;
  s.rope_short = {1.0f, 0.5f, 2.0f, 0.2f, 6.0f, 0.03f, 1.0f, 0.01f};
  s.attn_factor = 1.25f;
  s.seed = 33;
  return s;
}

// LongRoPE: a context (here the 40 positions the runner is sized for) past
// rope.scaling.original_context_length takes rope_factors_long, one within it
// rope_factors_short; rope.scaling.attn_factor scales q and k either way.
TEST(Phi3, FusedWeightsAndLongRope) {
  for (int orig_ctx : {32, 64}) {
    SCOPED_TRACE(orig_ctx);
    const bool long_ctx = orig_ctx < 40;
    const SynthSpec s = phi3_spec(orig_ctx);
    Loaded l = load(make_synthetic(s));
    ASSERT_TRUE(l.model);
    EXPECT_EQ(l.model->hparams().rope.layout, kernels::RopeLayout::NeoX);
    const auto tokens = random_tokens(40, s.n_vocab, 33);
    l.ref.config.n_ctx = static_cast<int>(tokens.size());
    ASSERT_EQ(l.ref.rope_factors(), long_ctx ? &l.ref.config.rope_long : &l.ref.config.rope_short);
    const Rows got = expect_matches(*l.model, l.ref, tokens);
    ReferenceGguf other_set = l.ref;
    other_set.config.n_ctx = long_ctx ? 64 : 65;
    other_set.config.yarn_orig_ctx = 64;
    expect_sensitive(got, other_set, tokens, long_ctx ? "long vs short factors" : "short vs long factors");
    ReferenceGguf no_factors = l.ref;
    no_factors.config.rope_long.clear();
    no_factors.config.rope_short.clear();
    expect_sensitive(got, no_factors, tokens, "LongRoPE factors");
    ReferenceGguf no_attn_factor = l.ref;
    no_attn_factor.config.yarn_attn_factor = 1.0;
    expect_sensitive(got, no_attn_factor, tokens, "rope.scaling.attn_factor");
  }
}

// Without LongRoPE tensors (Phi-3-mini-4k) phi3 is plain NeoX RoPE over fused
// weights; its sliding window is honoured where the file declares one.
TEST(Phi3, NoFactorsAndSlidingWindow) {
  SynthSpec s = phi3_spec(0);
  s.rope_long.clear();
  s.rope_short.clear();
  s.attn_factor = 0.0f;
  s.sliding_window = 6;
  Loaded l = load(make_synthetic(s));
  ASSERT_TRUE(l.model);
  EXPECT_EQ(l.model->hparams().sliding_window, 6);
  const auto tokens = random_tokens(30, s.n_vocab, 34);
  const Rows got = expect_matches(*l.model, l.ref, tokens);
  ReferenceGguf full = l.ref;
  full.config.sliding_window = 0;
  expect_sensitive(got, full, tokens, "phi3 sliding window");
}

TEST(Phi3, BadFusedShapesAndHalfLongRopeAreRefused) {
  auto sm = make_synthetic(phi3_spec(32));
  sm.remove_tensor("rope_factors_short.weight");
  expect_error(sm, ErrorKind::InvalidFile, {"rope_factors_long.weight", "rope_factors_short.weight"});
  sm = make_synthetic(phi3_spec(32));
  SynthTensor* up = sm.find_tensor("blk.0.ffn_up.weight");
  ASSERT_NE(up, nullptr);
  up->dims[1] /= 2;  // n_ff rows: an unfused up without its gate
  up->data.resize(up->dims[0] * up->dims[1]);
  expect_error(sm, ErrorKind::InvalidFile, {"blk.0.ffn_up.weight", "shape"});
}

}  // namespace
}  // namespace tern
