// gemma2 and gemma3 on synthetic random-weight models against the independent
// double-precision ReferenceGguf (tolerances: arch_checks.h), with each Gemma
// feature switched off in the reference in turn to show the engine's logits
// depend on it, and the files Gemma loading must refuse.
#include <gtest/gtest.h>

#include <cmath>

#include "arch_checks.h"
#include "model/model.h"

namespace tern {
namespace {

using gguf::Value;
using namespace test;  // arch_checks.h: load, run, expect_matches, ...

// 4 heads of 16 over 2 KV heads: n_embd / n_head = 16 = head_dim, so the
// 27B scale is told apart by key_length where a test needs it.
SynthSpec gemma_spec(const char* arch, int n_layer, uint32_t seed) {
  SynthSpec s;
  s.arch = arch;
  s.n_layer = n_layer;
  s.n_head = 4;
  s.n_head_kv = 2;
  s.tied_output = true;  // as Gemma files are
  s.rms_eps = 1e-6f;
  s.seed = seed;
  return s;
}

// Gemma 2 with small caps (so that each matters on these O(1..5) logits) and
// a window of 4 on the local (even) layers.
TEST(Gemma2, MatchesReferenceAndEachFeatureMatters) {
  SynthSpec s = gemma_spec("gemma2", 4, 31);
  s.sliding_window = 4;
  s.attn_softcap = 1.5;
  s.final_softcap = 2.5;
  Loaded l = load(make_synthetic(s));
  ASSERT_TRUE(l.model);
  const HParams& hp = l.model->hparams();
  EXPECT_EQ(hp.rope.layout, kernels::RopeLayout::NeoX);
  for (int il = 0; il < 4; ++il) {
    EXPECT_EQ(hp.layers[il].sliding_window, il % 2 == 0 ? 4 : 0) << il;
    EXPECT_EQ(hp.layers[il].rope_local, il % 2 == 0) << il;
  }
  EXPECT_EQ(hp.sliding_window, -1);
  EXPECT_FLOAT_EQ(hp.attn_softcap, 1.5f);
  EXPECT_FLOAT_EQ(hp.final_softcap, 2.5f);
  EXPECT_FLOAT_EQ(hp.embd_scale, 8.0f);
  EXPECT_FLOAT_EQ(hp.attn_scale, 0.25f);
  EXPECT_EQ(l.model->kv_specs().size(), 2u) << "local and global layers keep separate KV groups";

  const auto tokens = random_tokens(24, s.n_vocab, 31);
  const Rows got = expect_matches(*l.model, l.ref, tokens);
  for (const auto& row : got)
    for (float logit : row) ASSERT_LE(std::fabs(logit), 2.5f);
  auto off = [&](const char* what, auto change) {
    ReferenceGguf r = l.ref;
    change(r.config);
    expect_sensitive(got, r, tokens, what);
  };
  off("attention soft-cap", [](RefConfig& c) { c.attn_softcap = 0; });
  off("final soft-cap", [](RefConfig& c) { c.final_softcap = 0; });
  off("post-norms", [](RefConfig& c) { c.post_norms = false; });
  off("GELU (vs SiLU)", [](RefConfig& c) { c.gelu = false; });
  off("embedding scale", [](RefConfig& c) { c.embd_scale = 1; });
  off("local windows", [](RefConfig& c) { c.layer_window.assign(c.n_layer, 0); });
  off("local/global alternation (odd layers local)", [](RefConfig& c) {
    for (int il = 0; il < c.n_layer; ++il) c.layer_window[il] = il % 2 ? 4 : 0;
  });
  off("NeoX pairing", [](RefConfig& c) { c.neox = false; });
}

// Keys absent: caps 50 and 30 and a window of 4096, as llama.cpp defaults them.
TEST(Gemma2, DefaultsAsLlamaCpp) {
  SynthSpec s = gemma_spec("gemma2", 2, 32);
  Loaded l = load(make_synthetic(s));
  ASSERT_TRUE(l.model);
  const HParams& hp = l.model->hparams();
  EXPECT_FLOAT_EQ(hp.attn_softcap, 50.0f);
  EXPECT_FLOAT_EQ(hp.final_softcap, 30.0f);
  EXPECT_EQ(hp.layers[0].sliding_window, 4096);
  EXPECT_EQ(hp.layers[1].sliding_window, 0);
  EXPECT_EQ(hp.rope_local.freq_base, hp.rope.freq_base);
  expect_matches(*l.model, l.ref, random_tokens(16, s.n_vocab, 32));
}

// A pattern key overrides the default period; rope.freq_base_swa gives local
// layers their base in Gemma 2 too.
TEST(Gemma2, PatternKeyAndLocalBase) {
  SynthSpec s = gemma_spec("gemma2", 3, 33);
  s.sliding_window = 3;
  s.window_pattern = 3;  // layers 0, 1 local, 2 global
  s.freq_base = 1e6;
  s.freq_base_swa = 100;
  s.attn_softcap = 2;
  Loaded l = load(make_synthetic(s));
  ASSERT_TRUE(l.model);
  const HParams& hp = l.model->hparams();
  EXPECT_EQ(hp.layers[1].sliding_window, 3);
  EXPECT_EQ(hp.layers[2].sliding_window, 0);
  EXPECT_EQ(hp.rope_local.freq_base, 100.0f);
  const auto tokens = random_tokens(20, s.n_vocab, 33);
  const Rows got = expect_matches(*l.model, l.ref, tokens);
  ReferenceGguf same_base = l.ref;
  same_base.config.rope_base_local = 1e6;
  expect_sensitive(got, same_base, tokens, "rope.freq_base_swa");
}

// 27B sizes (46 layers): queries scaled by 1/sqrt(n_embd / n_head) = 1/4,
// not by 1/sqrt(key_length) = 1/sqrt(24).
TEST(Gemma2, Scale27BFromLayerCount) {
  SynthSpec s = gemma_spec("gemma2", 46, 34);
  s.key_length = 24;
  s.n_embd = 32;
  s.n_ff = 32;
  s.n_vocab = 40;
  s.sliding_window = 4;
  Loaded l = load(make_synthetic(s));
  ASSERT_TRUE(l.model);
  EXPECT_FLOAT_EQ(l.model->hparams().attn_scale, 1.0f / std::sqrt(8.0f));
  const auto tokens = random_tokens(10, s.n_vocab, 34);
  const Rows got = expect_matches(*l.model, l.ref, tokens);
  ReferenceGguf by_head = l.ref;
  by_head.config.attn_scale = 1.0 / std::sqrt(24.0);
  EXPECT_GT(max_diff(got, by_head.forward_all(tokens)), 10 * kTol) << "the 27B scale does not change the logits";
  s.n_layer = 45;
  Loaded other = load(make_synthetic(s));
  ASSERT_TRUE(other.model);
  EXPECT_FLOAT_EQ(other.model->hparams().attn_scale, 1.0f / std::sqrt(24.0f));
}

// Gemma 3: per-head q/k norms, every 6th layer global, local layers with base
// 10000 and without the global layers' linear scaling, no caps.
TEST(Gemma3, MatchesReferenceAndEachFeatureMatters) {
  SynthSpec s = gemma_spec("gemma3", 7, 35);
  s.sliding_window = 4;
  s.freq_base = 1e6;
  s.scaling_type = "linear";
  s.scaling_factor = 8.0;
  Loaded l = load(make_synthetic(s));
  ASSERT_TRUE(l.model);
  const HParams& hp = l.model->hparams();
  for (int il = 0; il < 7; ++il) EXPECT_EQ(hp.layers[il].sliding_window, il == 5 ? 0 : 4) << il;
  EXPECT_EQ(hp.attn_softcap, 0.0f);
  EXPECT_EQ(hp.final_softcap, 0.0f);
  EXPECT_EQ(hp.rope_local.freq_base, 10000.0f);
  EXPECT_EQ(hp.rope_local.freq_scale, 1.0f);
  EXPECT_EQ(hp.rope.freq_scale, 0.125f);
  const auto tokens = random_tokens(40, s.n_vocab, 35);
  const Rows got = expect_matches(*l.model, l.ref, tokens);
  auto off = [&](const char* what, auto change) {
    ReferenceGguf r = l.ref;
    change(r.config);
    expect_sensitive(got, r, tokens, what);
  };
  off("q/k norms", [](RefConfig& c) { c.qk_norm = false; });
  off("local RoPE base", [](RefConfig& c) { c.rope_base_local = c.rope_base; });
  off("local layers unscaled", [](RefConfig& c) { c.local_rope_scaled = true; });
  off("post-norms", [](RefConfig& c) { c.post_norms = false; });
  off("every 6th layer global", [](RefConfig& c) { c.layer_window.assign(c.n_layer, 4); });
  off("local windows", [](RefConfig& c) { c.layer_window.assign(c.n_layer, 0); });
}

// No window key: every layer global with the global RoPE; a stated cap is read.
TEST(Gemma3, NoWindowAndOptionalFinalCap) {
  SynthSpec s = gemma_spec("gemma3", 3, 36);
  s.final_softcap = 2.0;
  Loaded l = load(make_synthetic(s));
  ASSERT_TRUE(l.model);
  const HParams& hp = l.model->hparams();
  EXPECT_EQ(hp.sliding_window, 0);
  for (const LayerHParams& lh : hp.layers) EXPECT_FALSE(lh.rope_local);
  EXPECT_FLOAT_EQ(hp.final_softcap, 2.0f);
  const auto tokens = random_tokens(16, s.n_vocab, 36);
  const Rows got = expect_matches(*l.model, l.ref, tokens);
  ReferenceGguf uncapped = l.ref;
  uncapped.config.final_softcap = 0;
  expect_sensitive(got, uncapped, tokens, "gemma3 final soft-cap");
}

// ---- Files Gemma loading refuses, naming the culprit.

TEST(GemmaBadFiles, MissingNormsAndBadKeys) {
  for (const char* name : {"blk.1.post_ffw_norm.weight", "blk.0.post_attention_norm.weight"}) {
    auto sm = make_synthetic(gemma_spec("gemma2", 2, 37));
    sm.remove_tensor(name);
    expect_error(sm, ErrorKind::InvalidFile, {name, "missing"});
  }
  auto sm = make_synthetic(gemma_spec("gemma3", 2, 37));
  sm.remove_tensor("blk.1.attn_k_norm.weight");
  expect_error(sm, ErrorKind::InvalidFile, {"blk.1.attn_k_norm.weight", "missing"});
  sm = make_synthetic(gemma_spec("gemma3", 2, 37));
  sm.find_tensor("blk.0.attn_q_norm.weight")->dims = {8};
  expect_error(sm, ErrorKind::InvalidFile, {"blk.0.attn_q_norm.weight"});

  sm = make_synthetic(gemma_spec("gemma2", 2, 37));
  sm.set("gemma2.attn_logit_softcapping", Value::of_f32(NAN));
  expect_error(sm, ErrorKind::InvalidFile, {"gemma2.attn_logit_softcapping", "must be a finite"});
  sm = make_synthetic(gemma_spec("gemma2", 2, 37));
  sm.set("gemma2.final_logit_softcapping", Value::of_f32(0.0f));
  expect_error(sm, ErrorKind::InvalidFile, {"gemma2.final_logit_softcapping"});
  // A per-layer pattern array is not what llama.cpp reads for these: refused, not misread.
  sm = make_synthetic(gemma_spec("gemma3", 2, 37));
  sm.set("gemma3.attention.sliding_window_pattern", Value::of_i32s({1, 0}));
  EXPECT_FALSE(load_status(sm).is_ok());
  // Gemma tensors in a llama file are not silently ignored.
  sm = make_synthetic(gemma_spec("gemma2", 2, 37));
  sm.set("general.architecture", Value::of_string("llama"));
  for (auto& [k, v] : sm.metadata)
    if (k.starts_with("gemma2.")) k = "llama." + k.substr(7);
  expect_error(sm, ErrorKind::Unsupported, {"post_attention_norm", "post_ffw_norm"});
}

}  // namespace
}  // namespace tern
