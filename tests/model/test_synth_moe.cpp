// tern synth --arch mixtral|qwen2moe|qwen3moe: the keys and tensors
// llama.cpp's converter writes (Mixtral as "llama" with experts), loaded and
// run by the engine, whose per-expert counts (EngineStats) sum to the tokens
// run x experts per token x layers; tern quantize of a MoE file (3-D expert
// tensors) to Q8_0, Q4_0 and Q4_K_M.
#include <gtest/gtest.h>

#include <filesystem>
#include <numeric>

#include "engine/inline_engine.h"
#include "model/model.h"
#include "model/quantize.h"
#include "model/synth.h"
#include "scratch_model.h"

namespace tern {
namespace {

using gguf::GgmlType;

std::string vocab_path() { return std::string(TERN_SHARED_DIR) + "/testdata/tokenizers/ggml-vocab-llama-spm.gguf"; }

// A model file under the build tree, "moe_" + name.
struct Scratch : test::ScratchModel {
  explicit Scratch(const std::string& name) : test::ScratchModel("moe_" + name) {}
};

// dim 64, 2 layers, 4 heads of 16 over 2 KV heads, 4 experts of which 2 per token.
SynthOptions moe_options(const std::string& arch, const std::string& out, const char* scheme) {
  SynthOptions o;
  o.arch = arch;
  o.n_embd = 64;
  o.n_layer = 2;
  o.n_head = 4;
  o.n_head_kv = 2;
  o.n_ff = arch == "mixtral" ? 64 : 128;
  o.n_expert = 4;
  o.n_expert_used = 2;
  o.n_ctx = 256;
  o.seed = 3;
  o.vocab_path = vocab_path();
  o.out_path = out;
  o.scheme = *find_quant_scheme(scheme);
  return o;
}

Status synth(const SynthOptions& o) {
  ThreadPool pool(2);
  auto r = synth_model(o, pool);
  return r.is_ok() ? Status::ok() : r.status();
}

// Runs a prompt of 5 tokens and 6 greedy ones through an engine; the engine's
// expert counts sum to every token stepped x k x layers.
void expect_runs_and_counts(const std::string& path, int k, int n_layer) {
  EngineConfig c;
  c.model_path = path;
  c.n_threads = 2;
  c.kv_memory_bytes = 16ll << 20;
  auto core = InlineEngine::create(c);
  ASSERT_TRUE(core.is_ok()) << core.status().message();
  GenerationRequest req;
  req.prompt_tokens = {1, 450, 4996, 17354, 1701};
  req.max_tokens = 6;
  req.ignore_eos = true;
  req.sampling.temperature = 0;
  auto p = (*core)->prepare(req);
  ASSERT_TRUE(p.is_ok()) << p.status().message();
  int n_out = 0;
  (*core)->add(RequestId(1), std::move(p).value(), [&](const RequestOutput& o) { n_out += o.has_token ? 1 : 0; });
  for (int guard = 0; (*core)->has_work() && guard < 1000; ++guard) ASSERT_TRUE((*core)->step().is_ok());
  EXPECT_EQ(n_out, 6);
  const EngineStats st = (*core)->stats();
  ASSERT_EQ(st.moe_expert_tokens.size(), 4u);
  EXPECT_GT(st.n_tokens_stepped, 0);
  EXPECT_EQ(std::accumulate(st.moe_expert_tokens.begin(), st.moe_expert_tokens.end(), uint64_t{0}),
            static_cast<uint64_t>(st.n_tokens_stepped) * k * n_layer);
}

TEST(SynthMoe, ArchitecturesWriteConverterNamesAndRun) {
  if (!std::filesystem::exists(vocab_path())) GTEST_SKIP() << "tokenizer test data absent";
  struct Case {
    const char* arch;
    const char* file_arch;
    int n_ff_exp;
    std::vector<std::string> has, lacks;
  };
  const Case cases[] = {
      {"mixtral", "llama", 64, {"blk.1.ffn_gate_inp.weight"}, {"blk.1.ffn_gate.weight", "blk.1.ffn_gate_shexp.weight"}},
      {"qwen2moe", "qwen2moe", 64, {"blk.1.ffn_gate_inp_shexp.weight", "blk.1.ffn_down_shexp.weight", "blk.1.attn_q.bias"},
       {"blk.1.ffn_gate.weight"}},
      {"qwen3moe", "qwen3moe", 64, {"blk.1.attn_q_norm.weight"}, {"blk.1.ffn_gate_shexp.weight", "blk.1.attn_q.bias"}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.arch);
    Scratch out(c.arch);
    ASSERT_TRUE(synth(moe_options(c.arch, out.path, "Q8_0")));
    auto model = Model::load(out.path);
    ASSERT_TRUE(model.is_ok()) << model.status().message();
    const HParams& hp = (*model)->hparams();
    EXPECT_EQ(hp.arch, c.file_arch);
    EXPECT_EQ(hp.n_expert, 4);
    EXPECT_EQ(hp.n_expert_used, 2);
    EXPECT_EQ(hp.n_ff_exp, c.n_ff_exp);  // mixtral: --ffn; qwen*moe: --ffn / --experts-used
    const gguf::GgufFile& f = (*model)->file();
    const gguf::TensorInfo* up = f.find_tensor("blk.1.ffn_up_exps.weight");
    ASSERT_NE(up, nullptr);
    EXPECT_EQ(up->n_dims, 3u);
    EXPECT_EQ(up->dims[0], 64u);
    EXPECT_EQ(up->dims[1], static_cast<uint64_t>(c.n_ff_exp));
    EXPECT_EQ(up->dims[2], 4u);
    EXPECT_EQ(up->type, GgmlType::Q8_0);
    const gguf::TensorInfo* down = f.find_tensor("blk.0.ffn_down_exps.weight");
    ASSERT_NE(down, nullptr);
    EXPECT_EQ(down->dims[0], static_cast<uint64_t>(c.n_ff_exp));
    EXPECT_EQ(down->dims[1], 64u);
    EXPECT_EQ(f.find_tensor("blk.0.ffn_gate_inp.weight")->type, GgmlType::F32) << "routers stay F32";
    for (const auto& n : c.has) EXPECT_NE(f.find_tensor(n), nullptr) << n;
    for (const auto& n : c.lacks) EXPECT_EQ(f.find_tensor(n), nullptr) << n;
    expect_runs_and_counts(out.path, 2, 2);
  }
}

TEST(SynthMoe, BadOptions) {
  Scratch out("bad");
  SynthOptions o = moe_options("mixtral", out.path, "Q8_0");
  o.n_expert_used = 5;
  EXPECT_NE(validate_synth_options(o).message().find("--experts-used"), std::string::npos);
  o = moe_options("llama", out.path, "Q8_0");
  EXPECT_NE(validate_synth_options(o).message().find("apply to mixtral"), std::string::npos);
  o = moe_options("qwen3moe", out.path, "Q8_0");
  o.n_ff_shexp = 32;
  EXPECT_NE(validate_synth_options(o).message().find("qwen2moe only"), std::string::npos);
}

// An F32 MoE file quantized: the 3-D expert tensors take the scheme's types
// (ffn_down_exps the ffn_down rules), the routers stay F32, and the result runs.
TEST(SynthMoe, QuantizeExpertTensors) {
  if (!std::filesystem::exists(vocab_path())) GTEST_SKIP() << "tokenizer test data absent";
  Scratch f32("f32");
  SynthOptions o = moe_options("qwen2moe", f32.path, "F32");
  o.n_embd = 256;  // rows of 256: the K-quants apply
  o.n_ff = 512;
  ASSERT_TRUE(synth(o));
  struct Case {
    const char* scheme;
    GgmlType up, down_last;
  };
  for (const Case& c : {Case{"Q8_0", GgmlType::Q8_0, GgmlType::Q8_0}, Case{"Q4_0", GgmlType::Q4_0, GgmlType::Q4_0},
                        Case{"Q4_K_M", GgmlType::Q4_K, GgmlType::Q6_K}}) {
    SCOPED_TRACE(c.scheme);
    Scratch q(c.scheme);
    ThreadPool pool(2);
    auto r = quantize_gguf({f32.path, q.path, *find_quant_scheme(c.scheme)}, pool);
    ASSERT_TRUE(r.is_ok()) << r.status().message();
    auto model = Model::load(q.path);
    ASSERT_TRUE(model.is_ok()) << model.status().message();
    const gguf::GgufFile& f = (*model)->file();
    EXPECT_EQ(f.find_tensor("blk.1.ffn_up_exps.weight")->type, c.up);
    EXPECT_EQ(f.find_tensor("blk.1.ffn_down_exps.weight")->type, c.down_last);  // last layer: use_more_bits
    EXPECT_EQ(f.find_tensor("blk.0.ffn_gate_inp.weight")->type, GgmlType::F32);
    EXPECT_EQ(f.find_tensor("blk.0.ffn_gate_inp_shexp.weight")->type, GgmlType::F32);
    EXPECT_EQ(f.find_tensor("blk.0.ffn_up_exps.weight")->n_dims, 3u);
    expect_runs_and_counts(q.path, 2, 2);
  }
}

}  // namespace
}  // namespace tern
