// Architectures as data (model/arch.h registry, model/gguf_names.h table), on
// synthetic models checked against the independent ReferenceGguf
// (tolerances: arch_checks.h).
#include <gtest/gtest.h>

#include <set>

#include "arch_checks.h"
#include "model/arch.h"
#include "model/gguf_names.h"
#include "model/model.h"

namespace tern {
namespace {

using gguf::Value;
using namespace test;  // arch_checks.h: load, run, expect_matches, ...

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
    SynthSpec s;
    s.arch = std::string(a->name);
    s.qkv_bias = a->reads_qkv_bias;  // the optional tensors the row reads are present and used
    s.seed = 21;
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
  EXPECT_EQ(describe_tensor("blk.0.ffn_gate_inp.weight"), "");
  EXPECT_EQ(describe_tensor("attn_q.weight"), "") << "a per-layer suffix without blk.N. is not that tensor";
}

}  // namespace
}  // namespace tern
