// The GGUF name table (model/gguf_names.h).
#include <gtest/gtest.h>

#include "model/gguf_names.h"

namespace tern {
namespace {

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
