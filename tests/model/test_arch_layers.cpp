// Architectures as data (model/arch.h registry, model/gguf_names.h table),
// per-layer hyper-parameters (GGUF array-valued keys) and the refusal of
// tensors an architecture would not use — on synthetic models checked against
// the independent ReferenceGguf (tolerances: arch_checks.h).
#include <gtest/gtest.h>

#include <cstring>
#include <set>

#include "arch_checks.h"
#include "model/arch.h"
#include "model/gguf_names.h"
#include "model/model.h"

namespace tern {
namespace {

using gguf::Value;
using namespace test;  // arch_checks.h: load, run, expect_matches, ...

// Logits compared bit for bit.
void expect_identical(const Rows& a, const Rows& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t t = 0; t < a.size(); ++t)
    ASSERT_EQ(0, std::memcmp(a[t].data(), b[t].data(), a[t].size() * sizeof(float))) << "token " << t;
}

// ---- The registry: every row loads, and the names derive from it.

TEST(ArchRegistry, EveryRegisteredArchitectureLoadsAndMatchesTheReference) {
  ASSERT_FALSE(registered_archs().empty());
  std::set<std::string_view> names;
  for (const ArchInfo* a : registered_archs()) {
    SCOPED_TRACE(std::string(a->name));
    EXPECT_TRUE(names.insert(a->name).second) << "registered twice";
    EXPECT_EQ(find_arch(a->name), a);
    EXPECT_NE(supported_arch_names().find(a->name), std::string_view::npos);
    ASSERT_NE(a->block, nullptr);
    if (a->state_space || a->hybrid) continue;  // their own references: tests/model/test_mamba*.cpp, test_nemotron_h.cpp
    SynthSpec s;
    s.arch = std::string(a->name);
    s.qkv_bias = a->reads_qkv_bias;  // the optional tensors the row reads are present and used
    s.seed = 21;
    if (a->moe && a->moe->required) s.n_expert = 4, s.n_expert_used = 2;  // qwen2moe, qwen3moe
    Loaded l = load(make_synthetic(s));
    ASSERT_TRUE(l.model);
    EXPECT_EQ(l.model->hparams().arch, a->name);
    EXPECT_EQ(l.model->hparams().rope.layout, a->rope_layout);
    // The reference picks its RoPE pairing from the name on its own (qwen2: NeoX).
    expect_matches(*l.model, l.ref, random_tokens(16, s.n_vocab, 21));
  }
  EXPECT_EQ(find_arch("gpt2"), nullptr);
  auto sm = make_synthetic(SynthSpec{});
  sm.set("general.architecture", Value::of_string("gpt2"));
  expect_error(sm, ErrorKind::Unsupported, {"gpt2", std::string(supported_arch_names())});
}

TEST(GgufNames, OneTableSpellsKeysAndTensors) {
  using namespace gguf_names;
  EXPECT_EQ(key("qwen2", Key::EmbeddingLength), "qwen2.embedding_length");
  EXPECT_EQ(key("llama", Key::HeadCountKv), "llama.attention.head_count_kv");
  EXPECT_EQ(key("mistral", Key::SlidingWindow), "mistral.attention.sliding_window");
  EXPECT_EQ(tensor_name(Tensor::TokenEmbd), "token_embd.weight");
  EXPECT_EQ(tensor_name(Tensor::AttnQ, 3), "blk.3.attn_q.weight");
  EXPECT_EQ(tensor_name(Tensor::AttnVBias, 0), "blk.0.attn_v.bias");
  EXPECT_TRUE(is_per_layer(Tensor::FfnDown));
  EXPECT_FALSE(is_per_layer(Tensor::Output));
  EXPECT_NE(describe_tensor("rope_freqs.weight").find("RoPE"), std::string_view::npos);
  EXPECT_NE(describe_tensor("blk.12.attn_output.bias"), "");
  EXPECT_EQ(describe_tensor("blk.0.ffn_gate_inp.weight"), "MoE router");
  EXPECT_EQ(describe_tensor("blk.0.time_mix_key.weight"), "");
  EXPECT_EQ(describe_tensor("attn_q.weight"), "") << "a per-layer suffix without blk.N. is not that tensor";
}

// ---- Per-layer hyper-parameters (array-valued keys).

// A scalar and an array repeating it are the same model: identical bits, one KV group.
TEST(PerLayerHParams, ScalarAndArrayGiveIdenticalLogits) {
  SynthSpec scalar;
  scalar.arch = "mistral";
  scalar.n_head_kv = 2;
  scalar.sliding_window = 4;
  scalar.seed = 22;
  SynthSpec array = scalar;
  array.layer_n_head_kv = {2, 2};
  array.layer_sliding_window = {4, 4};
  Loaded a = load(make_synthetic(scalar)), b = load(make_synthetic(array));
  ASSERT_TRUE(a.model && b.model);
  ASSERT_NE(b.model->file().find("mistral.attention.head_count_kv")->as_array(), nullptr) << "not written as an array";
  EXPECT_EQ(b.model->hparams().n_head_kv, 2);
  EXPECT_EQ(b.model->hparams().sliding_window, 4);
  ASSERT_EQ(b.model->kv_specs().size(), 1u);
  EXPECT_EQ(b.model->kv_specs()[0].window, 4);
  const auto tokens = random_tokens(20, scalar.n_vocab, 22);
  expect_identical(run(*a.model, tokens, {5, 1}, 3), run(*b.model, tokens, {5, 1}, 3));
}

TEST(PerLayerHParams, ArrayOfWrongLengthOrBadValueNamesTheKey) {
  auto sm = make_synthetic(SynthSpec{});  // 2 layers
  sm.set("llama.attention.head_count_kv", Value::of_i32s({2, 2, 2}));
  expect_error(sm, ErrorKind::InvalidFile, {"'llama.attention.head_count_kv'", "3 values", "2 layers"});

  sm = make_synthetic(SynthSpec{});
  sm.set("llama.attention.sliding_window", Value::of_i32s({4}));
  expect_error(sm, ErrorKind::InvalidFile, {"'llama.attention.sliding_window'", "has 1 value but", "2 layers"});

  sm = make_synthetic(SynthSpec{});
  sm.set("llama.attention.sliding_window", Value::of_i32s({4, -1}));
  expect_error(sm, ErrorKind::InvalidFile, {"'llama.attention.sliding_window'", "layer 1"});

  sm = make_synthetic(SynthSpec{});
  sm.set("llama.attention.head_count_kv", Value::of_strings({"2", "2"}));
  expect_error(sm, ErrorKind::InvalidFile, {"'llama.attention.head_count_kv'", "layer 0"});

  sm = make_synthetic(SynthSpec{});  // 8 heads
  sm.set("llama.attention.head_count_kv", Value::of_i32s({2, 3}));
  expect_error(sm, ErrorKind::InvalidFile, {"head_count_kv 3", "layer 1"});

  sm = make_synthetic(SynthSpec{});
  sm.set("llama.attention.head_count_kv", Value::of_i32s({2, 0}));
  expect_error(sm, ErrorKind::InvalidFile, {"'llama.attention.head_count_kv'", "layer 1", "positive"});
}

// Windows differ between layers: layer 0 and 2 attend over 3 positions,
// layer 1 over everything. Two KV groups (layers 0, 2 share one), matched
// against a reference that honours per-layer windows, contiguous and paged.
TEST(PerLayerHParams, WindowPerLayerMatchesTheReference) {
  SynthSpec s;
  s.arch = "mistral";
  s.n_layer = 3;
  s.layer_sliding_window = {3, 0, 3};
  s.seed = 23;
  Loaded l = load(make_synthetic(s));
  ASSERT_TRUE(l.model);
  EXPECT_EQ(l.model->hparams().sliding_window, -1) << "layers differ";
  const std::vector<KvCacheSpec> specs = l.model->kv_specs();
  ASSERT_EQ(specs.size(), 2u);
  EXPECT_EQ(specs[0].kind, CacheKind::SlidingWindow);
  EXPECT_EQ(specs[0].window, 3);
  EXPECT_EQ(specs[0].n_layer, 2);
  EXPECT_EQ(specs[1].kind, CacheKind::FullAttention);
  EXPECT_EQ(specs[1].n_layer, 1);

  const auto tokens = random_tokens(24, s.n_vocab, 23);
  const Rows got = expect_matches(*l.model, l.ref, tokens);
  EXPECT_LT(max_diff(run(*l.model, tokens, {7, 1}, 4, /*block_size=*/4), l.ref.forward_all(tokens)), kTol)
      << "paged KV, 4 positions a block";
  // Switched off: the same window for every layer, or none at all, is another model.
  for (int w : {3, 0}) {
    ReferenceGguf uniform = l.ref;
    uniform.config.layer_window.clear();
    uniform.config.sliding_window = w;
    expect_sensitive(got, uniform, tokens, w ? "per-layer windows (vs 3 everywhere)" : "per-layer windows (vs none)");
  }
  ReferenceGguf swapped = l.ref;
  swapped.config.layer_window = {0, 3, 0};
  expect_sensitive(got, swapped, tokens, "which layer has the window");
}

// K/V heads differ between layers: each layer's projections, RoPE, KV pool
// and GQA map use its own count.
TEST(PerLayerHParams, KvHeadsPerLayerMatchTheReference) {
  SynthSpec s;  // 8 heads
  s.n_layer = 3;
  s.layer_n_head_kv = {2, 4, 2};
  s.seed = 24;
  Loaded l = load(make_synthetic(s));
  ASSERT_TRUE(l.model);
  EXPECT_EQ(l.model->hparams().n_head_kv, 4) << "the largest: it sizes K/V rows";
  EXPECT_EQ(l.model->hparams().kv_dim(0), 16);
  EXPECT_EQ(l.model->hparams().kv_dim(1), 32);
  const std::vector<KvCacheSpec> specs = l.model->kv_specs();
  ASSERT_EQ(specs.size(), 2u);
  EXPECT_EQ(specs[0].n_kv_head, 2);
  EXPECT_EQ(specs[0].n_layer, 2);
  EXPECT_EQ(specs[1].n_kv_head, 4);
  EXPECT_EQ(specs[1].n_layer, 1);
  const auto tokens = random_tokens(20, s.n_vocab, 24);
  expect_matches(*l.model, l.ref, tokens);
  EXPECT_LT(max_diff(run(*l.model, tokens, {3}, 5, /*block_size=*/4), l.ref.forward_all(tokens)), kTol) << "paged";
  // Switched off: a file whose tensors have the per-layer shapes but whose key
  // says 2 everywhere does not load (layer 1's attn_k would be [64, 16]).
  auto sm = make_synthetic(s);
  sm.set("llama.attention.head_count_kv", Value::of_u32(2));
  expect_error(sm, ErrorKind::InvalidFile, {"blk.1.attn_k.weight", "[64, 32]", "[64, 16]"});
}

// ---- Tensors the architecture does not use are refused by name.

TEST(UnusedTensors, AreReportedNotIgnored) {
  SynthSpec s;
  // RoPE frequency factors on an architecture that does not read them
  // (llama does: test_archs_rope.cpp); computing without them would be wrong.
  SynthSpec q = s;
  q.arch = "qwen2";
  auto sm = make_synthetic(q);
  sm.tensors.push_back({"rope_freqs.weight", {4}, {1.0f, 1.0f, 2.0f, 8.0f}, {}});
  expect_error(sm, ErrorKind::Unsupported, {"rope_freqs.weight", "RoPE frequency factors", "'qwen2'", "1 tensor "});

  sm = make_synthetic(s);
  sm.tensors.push_back({"blk.1.attn_output.bias", {64}, std::vector<float>(64, 0.5f), {}});
  sm.tensors.push_back({"blk.0.ffn_gate_inp.weight", {64, 4}, std::vector<float>(256, 0.1f), {}});
  expect_error(sm, ErrorKind::Unsupported, {"2 tensors", "blk.1.attn_output.bias", "blk.0.ffn_gate_inp.weight"});

  sm = make_synthetic(s);  // many: the first 8 named, the rest counted
  for (int i = 0; i < 11; ++i) sm.tensors.push_back({"extra." + std::to_string(i), {4}, std::vector<float>(4), {}});
  expect_error(sm, ErrorKind::Unsupported, {"11 tensors", "extra.0", "extra.7", "and 3 more"});

  // Control: the same file without the extra tensors loads.
  EXPECT_TRUE(load_status(make_synthetic(s)).is_ok());
}

}  // namespace
}  // namespace tern
