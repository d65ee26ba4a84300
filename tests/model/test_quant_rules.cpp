// The per-tensor type rules (model/quant_rules.h) on their own: llama-quantize's
// mixes for 7B/8B/70B-like layer stacks, the row-length fallback, the scheme table.
#include <gtest/gtest.h>

#include <map>

#include "gguf/writer.h"
#include "model/quant_rules.h"

namespace tern {
namespace {

using gguf::GgmlType;

QuantModelInfo llama(int n_layer, int n_head, int n_head_kv, bool has_output = true) {
  QuantModelInfo m;
  m.arch = "llama";
  m.n_layer = n_layer;
  m.n_head = n_head;
  m.n_head_kv = n_head_kv;
  m.has_output = has_output;
  return m;
}

GgmlType type_of(const char* scheme, const QuantModelInfo& m, const std::string& name, uint64_t n_cols = 4096,
                 uint32_t n_dims = 2, GgmlType current = GgmlType::F32) {
  const QuantScheme* s = find_quant_scheme(scheme);
  EXPECT_NE(s, nullptr) << scheme;
  return choose_tensor_type(*s, m, name, n_dims, n_cols, current).type;
}

std::string blk(int i, const char* t) { return "blk." + std::to_string(i) + "." + t + ".weight"; }

// Layers whose `tensor` gets `type` under `scheme`.
std::vector<int> layers_with(const char* scheme, const QuantModelInfo& m, const char* tensor, GgmlType type) {
  std::vector<int> out;
  for (int i = 0; i < m.n_layer; ++i)
    if (type_of(scheme, m, blk(i, tensor)) == type) out.push_back(i);
  return out;
}

// MoE (llama.cpp's llama_tensor_get_type): 3-D expert tensors follow their
// 2-D role (ffn_down_exps takes ffn_down's upgrades), routers are never
// quantized, and 8-expert models (Mixtral) get attn_v/attn_k as Q8_0 in every
// scheme and attn_output as Q5_K in the K-quant mixes that list it.
TEST(QuantRules, MixtureOfExperts) {
  QuantModelInfo mixtral = llama(32, 32, 8);
  mixtral.n_expert = 8;
  EXPECT_EQ(type_of("Q4_K_M", mixtral, blk(0, "ffn_up_exps"), 4096, 3), GgmlType::Q4_K);
  EXPECT_EQ(type_of("Q4_K_M", mixtral, blk(0, "ffn_down_exps"), 14336, 3), GgmlType::Q6_K);  // use_more_bits
  EXPECT_EQ(type_of("Q4_K_M", mixtral, blk(5, "ffn_down_exps"), 14336, 3), GgmlType::Q4_K);
  EXPECT_EQ(type_of("Q4_K_M", mixtral, blk(0, "ffn_gate_inp")), GgmlType::F32);
  for (const char* scheme : {"Q4_0", "Q8_0", "Q4_K_M", "Q2_K", "Q5_K_M"}) {
    EXPECT_EQ(type_of(scheme, mixtral, blk(3, "attn_v")), GgmlType::Q8_0) << scheme;
    EXPECT_EQ(type_of(scheme, mixtral, blk(3, "attn_k")), GgmlType::Q8_0) << scheme;
  }
  EXPECT_EQ(type_of("Q4_K_M", mixtral, blk(3, "attn_output")), GgmlType::Q5_K);
  EXPECT_EQ(type_of("Q2_K", mixtral, blk(3, "attn_output")), GgmlType::Q5_K);
  EXPECT_EQ(type_of("Q4_0", mixtral, blk(3, "attn_output")), GgmlType::Q4_0);
  EXPECT_EQ(type_of("Q4_K_M", mixtral, blk(3, "attn_q")), GgmlType::Q4_K);
  // Other expert counts (qwen3moe's 128): no Mixtral rules.
  QuantModelInfo qwen = mixtral;
  qwen.arch = "qwen3moe";
  qwen.n_expert = 128;
  EXPECT_EQ(type_of("Q4_K_M", qwen, blk(3, "attn_k")), GgmlType::Q4_K);
  EXPECT_EQ(type_of("Q4_K_M", qwen, blk(3, "attn_output")), GgmlType::Q4_K);
  // Pure: every matrix the base type.
  const QuantScheme pure = pure_scheme(*find_quant_scheme("Q4_K_M"));
  EXPECT_EQ(choose_tensor_type(pure, mixtral, blk(3, "attn_v"), 2, 4096, GgmlType::F32).type, GgmlType::Q4_K);
}

TEST(QuantRules, SchemeTable) {
  const std::map<std::string, std::pair<GgmlType, uint32_t>> want = {
      {"F32", {GgmlType::F32, 0}},      {"F16", {GgmlType::F16, 1}},       {"BF16", {GgmlType::BF16, 32}},
      {"Q4_0", {GgmlType::Q4_0, 2}},    {"Q4_1", {GgmlType::Q4_1, 3}},     {"Q8_0", {GgmlType::Q8_0, 7}},
      {"Q5_0", {GgmlType::Q5_0, 8}},    {"Q5_1", {GgmlType::Q5_1, 9}},     {"Q2_K", {GgmlType::Q2_K, 10}},
      {"Q3_K_S", {GgmlType::Q3_K, 11}}, {"Q3_K_M", {GgmlType::Q3_K, 12}},  {"Q3_K_L", {GgmlType::Q3_K, 13}},
      {"Q4_K_S", {GgmlType::Q4_K, 14}}, {"Q4_K_M", {GgmlType::Q4_K, 15}},  {"Q5_K_S", {GgmlType::Q5_K, 16}},
      {"Q5_K_M", {GgmlType::Q5_K, 17}}, {"Q6_K", {GgmlType::Q6_K, 18}},    {"IQ4_NL", {GgmlType::IQ4_NL, 25}},
      {"IQ4_XS", {GgmlType::IQ4_XS, 30}},
      {"Q3_K", {GgmlType::Q3_K, 12}},   {"Q4_K", {GgmlType::Q4_K, 15}},    {"Q5_K", {GgmlType::Q5_K, 17}},
      {"W8A8", {GgmlType::I8, 1024}},   {"MXFP4_MOE", {GgmlType::MXFP4, 38}}, {"MXFP4", {GgmlType::MXFP4, 38}},
  };
  for (const auto& [name, tf] : want) {
    const QuantScheme* s = find_quant_scheme(name);
    ASSERT_NE(s, nullptr) << name;
    EXPECT_EQ(s->base, tf.first) << name;
    EXPECT_EQ(s->file_type, tf.second) << name;
    EXPECT_EQ(s->mix, name != "Q3_K" && name != "Q4_K" && name != "Q5_K" && name != "MXFP4") << name;
  }
  EXPECT_EQ(find_quant_scheme("q4_k_m"), find_quant_scheme("Q4_K_M"));
  EXPECT_EQ(find_quant_scheme("Q9_X"), nullptr);
  EXPECT_EQ(find_quant_scheme(""), nullptr);
  EXPECT_NE(quant_scheme_names().find("Q4_K_M"), std::string::npos);
}

// W8A8: the layers' dense matrices I8 at any row length; embeddings, output
// head and expert tensors Q8_0 (F16 where 32 does not divide the row).
TEST(QuantRules, W8a8) {
  const QuantModelInfo m = llama(16, 32, 8), tied = llama(16, 32, 8, false);
  for (const char* t : {"attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down"})
    EXPECT_EQ(type_of("W8A8", m, blk(3, t)), GgmlType::I8) << t;
  EXPECT_EQ(type_of("W8A8", m, blk(3, "ffn_down"), 172), GgmlType::I8);
  EXPECT_EQ(type_of("W8A8", m, "output.weight"), GgmlType::Q8_0);
  EXPECT_EQ(type_of("W8A8", m, "token_embd.weight"), GgmlType::Q8_0);
  EXPECT_EQ(type_of("W8A8", tied, "token_embd.weight", 100), GgmlType::F16);
  EXPECT_EQ(type_of("W8A8", m, blk(0, "ffn_up_exps"), 4096, 3), GgmlType::Q8_0);
  EXPECT_EQ(type_of("W8A8", m, blk(0, "attn_norm")), GgmlType::F32);
  // FP8: the same, and MoE experts too (their row scales as [rows, experts]).
  EXPECT_EQ(type_of("F8_E4M3", m, blk(3, "attn_q")), GgmlType::F8_E4M3);
  EXPECT_EQ(type_of("F8_E5M2", m, blk(3, "ffn_down"), 172), GgmlType::F8_E5M2);
  EXPECT_EQ(type_of("F8_E4M3", m, blk(0, "ffn_up_exps"), 4096, 3), GgmlType::F8_E4M3);
  EXPECT_EQ(type_of("F8_E4M3", m, "output.weight"), GgmlType::Q8_0);
  EXPECT_EQ(type_of("F8_E4M3", m, blk(0, "ffn_gate_inp"), 4096, 2), GgmlType::F32);
}

// llama.cpp's MXFP4_MOE: experts MXFP4, every other matrix Q8_0; MXFP4: every matrix.
TEST(QuantRules, Mxfp4) {
  const QuantModelInfo moe = llama(24, 64, 8);
  EXPECT_EQ(type_of("MXFP4_MOE", moe, blk(0, "ffn_up_exps"), 2880, 3), GgmlType::MXFP4);
  EXPECT_EQ(type_of("MXFP4_MOE", moe, blk(0, "ffn_down_exps"), 2880, 3), GgmlType::MXFP4);
  EXPECT_EQ(type_of("MXFP4_MOE", moe, blk(0, "attn_q")), GgmlType::Q8_0);
  EXPECT_EQ(type_of("MXFP4_MOE", moe, blk(0, "attn_v")), GgmlType::Q8_0);
  EXPECT_EQ(type_of("MXFP4_MOE", moe, "output.weight"), GgmlType::Q8_0);
  EXPECT_EQ(type_of("MXFP4_MOE", moe, blk(0, "ffn_gate_inp")), GgmlType::F32);
  EXPECT_EQ(type_of("MXFP4", moe, blk(0, "attn_q")), GgmlType::MXFP4);
  EXPECT_EQ(type_of("MXFP4", moe, "output.weight"), GgmlType::MXFP4);
  EXPECT_EQ(type_of("MXFP4", moe, blk(0, "ffn_down"), 172), GgmlType::F16);
}

TEST(QuantRules, OnlyMatricesChange) {
  const auto m = llama(32, 32, 32);
  EXPECT_EQ(type_of("Q4_K_M", m, "blk.0.attn_norm.weight", 4096, 1), GgmlType::F32);
  EXPECT_EQ(type_of("Q4_K_M", m, "output_norm.weight", 4096, 1), GgmlType::F32);
  EXPECT_EQ(type_of("Q4_K_M", m, "blk.0.attn_q.bias", 4096, 1), GgmlType::F32);
  EXPECT_EQ(type_of("F16", m, "blk.0.ffn_norm.weight", 4096, 1), GgmlType::F32);
  EXPECT_EQ(type_of("Q8_0", m, "blk.0.ffn_gate_inp.weight", 4096, 2), GgmlType::F32);  // MoE router
  EXPECT_EQ(type_of("Q8_0", m, "blk.0.attn_q_norm.weight", 128, 2, GgmlType::F16), GgmlType::F16);
  EXPECT_FALSE(is_quantizable("blk.0.attn_q.bias", 2));
  EXPECT_TRUE(is_quantizable("blk.0.attn_q.weight", 2));
  EXPECT_TRUE(is_quantizable("blk.0.ffn_up_exps.weight", 3));
}

TEST(QuantRules, FloatSchemesConvertEveryMatrix) {
  const auto m = llama(32, 32, 8);
  for (const char* name : {"token_embd.weight", "output.weight", "blk.3.attn_v.weight", "blk.3.ffn_down.weight"}) {
    EXPECT_EQ(type_of("F16", m, name, 4096, 2, GgmlType::Q8_0), GgmlType::F16) << name;
    EXPECT_EQ(type_of("BF16", m, name), GgmlType::BF16) << name;
    EXPECT_EQ(type_of("F32", m, name, 4096, 2, GgmlType::F16), GgmlType::F32) << name;
    EXPECT_EQ(type_of("F16", m, name, 172), GgmlType::F16) << "no block constraint for floats";
  }
}

TEST(QuantRules, OutputAndEmbeddings) {
  const auto untied = llama(32, 32, 8, true), tied = llama(32, 32, 8, false);
  for (const char* s : {"Q4_0", "Q4_1", "Q5_0", "Q5_1", "IQ4_NL", "IQ4_XS", "Q2_K", "Q3_K_S", "Q3_K_M", "Q4_K_S",
                        "Q4_K_M", "Q5_K_M", "Q6_K"}) {
    EXPECT_EQ(type_of(s, untied, "output.weight"), GgmlType::Q6_K) << s;
    EXPECT_EQ(type_of(s, tied, "token_embd.weight"), GgmlType::Q6_K) << s << ": tied embeddings are the output";
    EXPECT_EQ(type_of(s, untied, "token_embd.weight"), find_quant_scheme(s)->base) << s;
  }
  EXPECT_EQ(type_of("Q8_0", untied, "output.weight"), GgmlType::Q8_0);
  EXPECT_EQ(type_of("Q8_0", tied, "token_embd.weight"), GgmlType::Q8_0);
  // Rows that do not divide into the base type's blocks: Q8_0 (llama.cpp's rule), no fallback needed.
  EXPECT_EQ(type_of("Q4_K_M", untied, "output.weight", 2880), GgmlType::Q8_0);
  const QuantScheme* s = find_quant_scheme("Q4_K_M");
  EXPECT_FALSE(choose_tensor_type(*s, untied, "output.weight", 2, 2880, GgmlType::F32).fell_back);
  // Rows of 64 divide into Q4_0 blocks, so the output rule picks Q6_K, which falls back to Q8_0.
  auto c = choose_tensor_type(*find_quant_scheme("Q4_0"), tied, "token_embd.weight", 2, 64, GgmlType::F32);
  EXPECT_EQ(c.type, GgmlType::Q8_0);
  EXPECT_TRUE(c.fell_back);
}

TEST(QuantRules, Q4KMUpgradesHalfOfAttnVAndFfnDown) {
  const auto m = llama(32, 32, 32);
  // use_more_bits(i, 32): i < 4, i >= 28, and (i - 4) % 3 == 2.
  const std::vector<int> more = {0, 1, 2, 3, 6, 9, 12, 15, 18, 21, 24, 27, 28, 29, 30, 31};
  for (const char* scheme : {"Q4_K_M", "Q5_K_M"}) {
    EXPECT_EQ(layers_with(scheme, m, "attn_v", GgmlType::Q6_K), more) << scheme;
    EXPECT_EQ(layers_with(scheme, m, "ffn_down", GgmlType::Q6_K), more) << scheme;
  }
  EXPECT_EQ(type_of("Q4_K_M", m, blk(4, "attn_v")), GgmlType::Q4_K);
  EXPECT_EQ(type_of("Q5_K_M", m, blk(4, "ffn_down")), GgmlType::Q5_K);
  for (const char* t : {"attn_q", "attn_k", "attn_output", "ffn_gate", "ffn_up"})
    EXPECT_EQ(layers_with("Q4_K_M", m, t, GgmlType::Q4_K).size(), 32u) << t;
  // The same rule on a 16-layer stack (1B): i < 2, i >= 14, (i - 2) % 3 == 2.
  EXPECT_EQ(layers_with("Q4_K_M", llama(16, 32, 8), "ffn_down", GgmlType::Q6_K),
            (std::vector<int>{0, 1, 4, 7, 10, 13, 14, 15}));
}

TEST(QuantRules, SmallKMixes) {
  const auto mha = llama(32, 32, 32), gqa = llama(32, 32, 8);
  // Q2_K: attn_v Q3_K (Q4_K with GQA >= 4), ffn_down and attn_output Q3_K.
  EXPECT_EQ(type_of("Q2_K", mha, blk(5, "attn_v")), GgmlType::Q3_K);
  EXPECT_EQ(type_of("Q2_K", gqa, blk(5, "attn_v")), GgmlType::Q4_K);
  EXPECT_EQ(type_of("Q2_K", mha, blk(5, "ffn_down")), GgmlType::Q3_K);
  EXPECT_EQ(type_of("Q2_K", mha, blk(5, "attn_output")), GgmlType::Q3_K);
  EXPECT_EQ(type_of("Q2_K", mha, blk(5, "attn_q")), GgmlType::Q2_K);
  // Q3_K_S: only the output upgrade.
  EXPECT_EQ(type_of("Q3_K_S", mha, blk(0, "attn_v")), GgmlType::Q3_K);
  EXPECT_EQ(type_of("Q3_K_S", mha, blk(0, "ffn_down")), GgmlType::Q3_K);
  // Q3_K_M: attn_v Q5_K for the first two, else Q4_K; ffn_down Q5_K for i < n/16, else Q4_K; attn_output Q4_K.
  EXPECT_EQ(layers_with("Q3_K_M", mha, "attn_v", GgmlType::Q5_K), (std::vector<int>{0, 1}));
  EXPECT_EQ(layers_with("Q3_K_M", mha, "attn_v", GgmlType::Q4_K).size(), 30u);
  EXPECT_EQ(layers_with("Q3_K_M", mha, "ffn_down", GgmlType::Q5_K), (std::vector<int>{0, 1}));
  EXPECT_EQ(layers_with("Q3_K_M", mha, "ffn_down", GgmlType::Q4_K).size(), 30u);
  EXPECT_EQ(type_of("Q3_K_M", mha, blk(9, "attn_output")), GgmlType::Q4_K);
  // Q3_K_L: attn_v, ffn_down, attn_output Q5_K.
  for (const char* t : {"attn_v", "ffn_down", "attn_output"}) EXPECT_EQ(type_of("Q3_K_L", mha, blk(9, t)), GgmlType::Q5_K);
  // Q4_K_S: attn_v Q5_K for the first four, ffn_down Q5_K for i < n/8.
  EXPECT_EQ(layers_with("Q4_K_S", mha, "attn_v", GgmlType::Q5_K), (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(layers_with("Q4_K_S", mha, "ffn_down", GgmlType::Q5_K), (std::vector<int>{0, 1, 2, 3}));
  // Q5_K_S, Q6_K: only the output.
  EXPECT_EQ(type_of("Q5_K_S", mha, blk(0, "attn_v")), GgmlType::Q5_K);
  EXPECT_EQ(type_of("Q6_K", mha, blk(0, "ffn_down")), GgmlType::Q6_K);
  // IQ4_NL: attn_v Q5_K with GQA >= 4, ffn_down Q5_K for i < n/8.
  EXPECT_EQ(type_of("IQ4_NL", gqa, blk(20, "attn_v")), GgmlType::Q5_K);
  EXPECT_EQ(type_of("IQ4_NL", mha, blk(20, "attn_v")), GgmlType::IQ4_NL);
  EXPECT_EQ(layers_with("IQ4_NL", mha, "ffn_down", GgmlType::Q5_K), (std::vector<int>{0, 1, 2, 3}));
  // IQ4_XS: the same upgrades as IQ4_NL (llama.cpp treats the two alike).
  EXPECT_EQ(type_of("IQ4_XS", gqa, blk(20, "attn_v")), GgmlType::Q5_K);
  EXPECT_EQ(type_of("IQ4_XS", mha, blk(20, "attn_v")), GgmlType::IQ4_XS);
  EXPECT_EQ(layers_with("IQ4_XS", mha, "ffn_down", GgmlType::Q5_K), (std::vector<int>{0, 1, 2, 3}));
  // Legacy types: no per-layer upgrades.
  for (const char* s : {"Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0"})
    for (const char* t : {"attn_v", "ffn_down", "attn_output"})
      EXPECT_EQ(type_of(s, gqa, blk(0, t)), find_quant_scheme(s)->base) << s << " " << t;
}

TEST(QuantRules, SeventyBBumpsAttnV) {
  const auto b70 = llama(80, 64, 8), b65 = llama(80, 64, 64);
  ASSERT_TRUE(b70.is_70b());
  ASSERT_FALSE(b65.is_70b());
  EXPECT_EQ(type_of("Q4_K_M", b70, blk(10, "attn_v")), GgmlType::Q5_K);  // not a more-bits layer
  EXPECT_EQ(type_of("Q4_K_M", b70, blk(0, "attn_v")), GgmlType::Q6_K);
  EXPECT_EQ(type_of("Q4_K_M", b65, blk(10, "attn_v")), GgmlType::Q4_K);
  EXPECT_EQ(type_of("Q3_K_S", b70, blk(10, "attn_v")), GgmlType::Q5_K);
  EXPECT_EQ(type_of("Q2_K", b70, blk(10, "attn_v")), GgmlType::Q5_K);  // Q4_K for GQA, then bumped
  EXPECT_EQ(type_of("Q5_K_S", b70, blk(10, "attn_v")), GgmlType::Q5_K);
}

TEST(QuantRules, RowLengthFallback) {
  EXPECT_EQ(fallback_type(GgmlType::Q4_K, 4096), GgmlType::Q4_K);
  EXPECT_EQ(fallback_type(GgmlType::Q2_K, 64), GgmlType::Q4_0);
  EXPECT_EQ(fallback_type(GgmlType::Q3_K, 96), GgmlType::Q4_0);
  EXPECT_EQ(fallback_type(GgmlType::Q4_K, 64), GgmlType::Q5_0);
  EXPECT_EQ(fallback_type(GgmlType::Q5_K, 64), GgmlType::Q5_1);
  EXPECT_EQ(fallback_type(GgmlType::Q6_K, 64), GgmlType::Q8_0);
  EXPECT_EQ(fallback_type(GgmlType::Q4_K, 172), GgmlType::F16);
  EXPECT_EQ(fallback_type(GgmlType::Q6_K, 172), GgmlType::F16);
  EXPECT_EQ(fallback_type(GgmlType::Q4_0, 172), GgmlType::F16);
  EXPECT_EQ(fallback_type(GgmlType::Q8_0, 48), GgmlType::F16);
  EXPECT_EQ(fallback_type(GgmlType::IQ4_NL, 40), GgmlType::F16);
  EXPECT_EQ(fallback_type(GgmlType::IQ4_XS, 64), GgmlType::IQ4_NL);  // rows of 64: IQ4_NL's 32-blocks
  EXPECT_EQ(fallback_type(GgmlType::IQ4_XS, 512), GgmlType::IQ4_XS);
  EXPECT_EQ(fallback_type(GgmlType::IQ4_XS, 48), GgmlType::F16);
  EXPECT_EQ(fallback_type(GgmlType::F16, 7), GgmlType::F16);
  const auto m = llama(32, 32, 32);
  auto c = choose_tensor_type(*find_quant_scheme("Q4_K_M"), m, blk(2, "ffn_down"), 2, 11008 + 64, GgmlType::F32);
  EXPECT_EQ(c.type, GgmlType::Q8_0);  // Q6_K wanted (more bits), rows of 11072 are not multiples of 256
  EXPECT_TRUE(c.fell_back);
}

TEST(QuantRules, PureSchemesSkipTheMix) {
  const auto m = llama(32, 32, 8, false);
  const QuantScheme pure = pure_scheme(*find_quant_scheme("Q4_K_M"));
  EXPECT_EQ(choose_tensor_type(pure, m, "token_embd.weight", 2, 4096, GgmlType::F32).type, GgmlType::Q4_K);
  EXPECT_EQ(choose_tensor_type(pure, m, blk(0, "attn_v"), 2, 4096, GgmlType::F32).type, GgmlType::Q4_K);
  EXPECT_EQ(choose_tensor_type(pure, m, blk(0, "attn_v"), 2, 64, GgmlType::F32).type, GgmlType::Q5_0);
  EXPECT_EQ(pure.file_type, 15u);
  // Q4_K as a block type is pure.
  EXPECT_EQ(type_of("Q4_K", llama(32, 32, 8), "output.weight"), GgmlType::Q4_K);
  EXPECT_EQ(type_of("Q4_K", llama(32, 32, 8), blk(0, "ffn_down")), GgmlType::Q4_K);
}

}  // namespace
}  // namespace tern

namespace tern {
namespace {

// A per-layer head_count_kv array (as llama.cpp's GGUF allows) is read as
// layer 0's value for the mix rules, as llama-quantize does; a scalar as is.
TEST(QuantRules, PerLayerHeadCountKvReadsLayerZero) {
  for (bool per_layer : {false, true}) {
    SCOPED_TRACE(per_layer);
    gguf::GgufWriter w;
    w.set("general.architecture", gguf::Value::of_string("llama"));
    w.set("llama.block_count", gguf::Value::of_u32(3));
    w.set("llama.attention.head_count", gguf::Value::of_u32(8));
    if (per_layer) {
      std::vector<gguf::Value> items;
      for (uint32_t n : {2u, 4u, 2u}) items.push_back(gguf::Value::of_u32(n));
      w.set("llama.attention.head_count_kv", gguf::Value::of_array(gguf::ValueType::U32, std::move(items)));
    } else {
      w.set("llama.attention.head_count_kv", gguf::Value::of_u32(2));
    }
    auto f = gguf::GgufFile::from_bytes(w.to_bytes());
    ASSERT_TRUE(f.is_ok()) << f.status().message();
    auto m = quant_model_info(*f);
    ASSERT_TRUE(m.is_ok()) << m.status().message();
    EXPECT_EQ(m->n_head_kv, 2);
    EXPECT_EQ(m->n_layer, 3);
  }
}

// <arch>.expert_count is read for the 8-expert rules; absent: 0 (dense); absurd: an error naming the key.
TEST(QuantRules, ExpertCountFromMetadata) {
  for (uint32_t n : {0u, 8u, 600u}) {
    SCOPED_TRACE(n);
    gguf::GgufWriter w;
    w.set("general.architecture", gguf::Value::of_string("llama"));
    w.set("llama.block_count", gguf::Value::of_u32(2));
    if (n > 0) w.set("llama.expert_count", gguf::Value::of_u32(n));
    auto f = gguf::GgufFile::from_bytes(w.to_bytes());
    ASSERT_TRUE(f.is_ok()) << f.status().message();
    auto m = quant_model_info(*f);
    if (n == 600) {
      ASSERT_FALSE(m.is_ok());
      EXPECT_NE(m.status().message().find("llama.expert_count"), std::string::npos) << m.status().message();
      continue;
    }
    ASSERT_TRUE(m.is_ok()) << m.status().message();
    EXPECT_EQ(m->n_expert, static_cast<int>(n));
  }
}

}  // namespace
}  // namespace tern
