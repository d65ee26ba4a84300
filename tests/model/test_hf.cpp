// Hugging Face checkpoints (model/hf_model.h): for every architecture, a
// random model written as an HF directory by the test's own writer
// (hf_writer.h, the inverse of llama.cpp's converter) gives the same logits
// and greedy tokens three ways — the directory loaded directly, its
// `convert --from hf` GGUF, and the independent double-precision reference
// over the synthetic GGUF (tolerances: arch_checks.h). "Switched off" cases
// show the Q/K permutation and Gemma's 1 + w are needed.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "arch_checks.h"
#include "hf_writer.h"
#include "model/hf_model.h"
#include "model/quant_rules.h"
#include "model/quantize.h"
#include "gguf/safetensors.h"

namespace tern {
namespace {

using namespace test;  // arch_checks.h, hf_writer.h
using json = nlohmann::json;

std::vector<int> greedy_engine(const Model& m, std::vector<int> tokens, int n) {
  for (int i = 0; i < n; ++i) {
    const Rows r = run(m, tokens, {tokens.size()}, 1);
    const auto& last = r.back();
    tokens.push_back(static_cast<int>(std::max_element(last.begin(), last.end()) - last.begin()));
  }
  return tokens;
}

// The reference with the context in force set as the engine's runner sets it
// (the tokens so far: it picks Phi-3's LongRoPE set).
std::vector<int> greedy_ref(ReferenceGguf ref, std::vector<int> tokens, int n) {
  for (int i = 0; i < n; ++i) {
    ref.config.n_ctx = static_cast<int>(tokens.size());
    const auto rows = ref.forward_all(tokens);
    const auto& last = rows.back();
    tokens.push_back(static_cast<int>(std::max_element(last.begin(), last.end()) - last.begin()));
  }
  return tokens;
}

std::unique_ptr<Model> load_ok(const std::string& path) {
  auto m = Model::load(path);
  EXPECT_TRUE(m.is_ok()) << m.status().message();
  return m.is_ok() ? std::move(m).value() : nullptr;
}

Status convert(const std::string& dir, const std::string& out, const char* scheme = "F32") {
  ThreadPool pool(2);
  auto r = hf::convert_hf_model(dir, out, *find_quant_scheme(scheme), {}, pool);
  return r.is_ok() ? Status::ok() : r.status();
}

// The three ways agree: logits of the directory and of its conversion match the
// reference within kTol and each other exactly; greedy continuations are equal.
struct ThreeWay {
  Rows direct;
  std::unique_ptr<Model> model;
};
ThreeWay check_three_ways(SyntheticModel& sm, const SynthSpec& spec, const std::string& name,
                          const HfDirOptions& o = {}) {
  ThreeWay out;
  const std::string dir = fresh_dir(name);
  write_hf_dir(sm, spec, dir, o);
  ReferenceGguf ref = reference_of(sm);
  out.model = load_ok(dir);
  if (!out.model) return out;
  const auto tokens = random_tokens(20, spec.n_vocab, spec.seed);
  ref.config.n_ctx = static_cast<int>(tokens.size());
  // bf16 kernels round activations too (test_archs.cpp, WeightTypes: 0.1).
  out.direct = expect_matches(*out.model, ref, tokens, o.dtype == "BF16" ? 0.1 : kTol);

  const std::string gguf = dir + ".gguf";
  const Status s = convert(dir, gguf, o.dtype == "F32" ? "F32" : o.dtype == "F16" ? "F16" : "BF16");
  EXPECT_TRUE(s.is_ok()) << s.message();
  auto converted = load_ok(gguf);
  if (!converted) return out;
  EXPECT_EQ(max_diff(run(*converted, tokens, {tokens.size()}, 1), out.direct), 0.0) << "same weights, same types";

  const std::vector<int> prompt(tokens.begin(), tokens.begin() + 4);
  const auto want = greedy_ref(ref, prompt, 8);
  EXPECT_EQ(greedy_engine(*out.model, prompt, 8), want) << "directory";
  EXPECT_EQ(greedy_engine(*converted, prompt, 8), want) << "converted";
  std::filesystem::remove_all(dir);
  std::filesystem::remove(gguf);
  return out;
}

TEST(Hf, LlamaQkPermutedAndNeededUntiedOutput) {
  SynthSpec s;
  s.seed = 11;
  SyntheticModel sm = make_synthetic(s);
  ThreeWay r = check_three_ways(sm, s, "llama");
  ASSERT_TRUE(r.model);
  EXPECT_EQ(r.model->hparams().arch, "llama");
  // Switched off: the rows left in GGUF order compute another model.
  SyntheticModel sm2 = make_synthetic(s);
  const std::string dir = fresh_dir("llama_unpermuted");
  HfDirOptions o;
  o.permute = false;
  write_hf_dir(sm2, s, dir, o);
  auto wrong = load_ok(dir);
  ASSERT_TRUE(wrong);
  const auto tokens = random_tokens(20, s.n_vocab, s.seed);
  expect_sensitive(run(*wrong, tokens, {tokens.size()}, 1), reference_of(sm), tokens, "Q/K permutation");
}

TEST(Hf, LlamaTiedWithBiasesBf16) {
  SynthSpec s;
  s.seed = 12;
  s.tied_output = true;
  s.qkv_bias = true;  // permuted like the rows
  SyntheticModel sm = make_synthetic(s);
  HfDirOptions o;
  o.dtype = "BF16";
  check_three_ways(sm, s, "llama_bf16", o);
}

// A checkpoint without lm_head (tie_word_embeddings unset) classifies with the
// embedding, as llama.cpp loads a GGUF without output.weight.
TEST(Hf, MissingLmHeadMeansTied) {
  SynthSpec s;
  s.seed = 21;
  s.tied_output = true;  // no output.weight in sm, so none written
  SyntheticModel sm = make_synthetic(s);
  const std::string dir = fresh_dir("no_lm_head");
  HfDirOptions o;
  o.extra_config = {{"tie_word_embeddings", nullptr}};
  write_hf_dir(sm, s, dir, o);
  auto m = load_ok(dir);
  ASSERT_TRUE(m);
  EXPECT_EQ(m->file().find_tensor("output.weight"), nullptr);
  expect_matches(*m, reference_of(sm), random_tokens(16, s.n_vocab, s.seed));
  std::filesystem::remove_all(dir);
}

TEST(Hf, Llama3RopeFreqsComputedAsTheConverter) {
  SynthSpec s;
  s.seed = 13;
  s.n_head = 4;  // head_dim 16: 8 frequencies
  s.n_head_kv = 2;
  s.freq_base = 500000.0;
  // Meta's Llama 3.1 scaling over a tiny original context, so that the three
  // regimes (kept, divided by factor, smoothed) all occur among 8 frequencies.
  const double factor = 8, low = 1, high = 4, orig = 64;
  const int dim = 16;
  for (int i = 0; i < dim; i += 2) {
    const double freq = 1.0 / std::pow(s.freq_base, static_cast<double>(i) / dim);
    const double wavelen = 2 * M_PI / freq;
    double f = 1.0;
    if (wavelen > orig / low) f = factor;
    else if (wavelen >= orig / high) {
      const double smooth = (orig / wavelen - low) / (high - low);
      f = 1 / ((1 - smooth) / factor + smooth);
    }
    s.rope_freqs.push_back(static_cast<float>(f));
  }
  ASSERT_EQ(s.rope_freqs.front(), 1.0f);
  ASSERT_EQ(s.rope_freqs.back(), 8.0f);
  SyntheticModel sm = make_synthetic(s);
  HfDirOptions o;
  o.extra_config = {{"rope_scaling", {{"rope_type", "llama3"}, {"factor", factor}, {"low_freq_factor", low},
                                      {"high_freq_factor", high}, {"original_max_position_embeddings", orig}}}};
  ThreeWay r = check_three_ways(sm, s, "llama3", o);
  ASSERT_TRUE(r.model);
  const gguf::TensorInfo* t = r.model->file().find_tensor("rope_freqs.weight");
  ASSERT_NE(t, nullptr);
  const float* v = reinterpret_cast<const float*>(t->data);
  for (int i = 0; i < dim / 2; ++i) EXPECT_NEAR(v[i], s.rope_freqs[i], 1e-5 * s.rope_freqs[i]) << i;
  // Switched off: without the divisors the model is another one.
  SynthSpec plain = s;
  plain.rope_freqs.clear();
  const auto tokens = random_tokens(20, s.n_vocab, s.seed);
  expect_sensitive(r.direct, reference_of(make_synthetic(plain)), tokens, "rope_freqs");
}

TEST(Hf, MistralIsLlamaWithItsWindow) {
  SynthSpec s;
  s.seed = 14;
  s.sliding_window = 5;
  SyntheticModel sm = make_synthetic(s);
  HfDirOptions o;
  o.model_type = "mistral";
  ThreeWay r = check_three_ways(sm, s, "mistral", o);
  ASSERT_TRUE(r.model);
  EXPECT_EQ(r.model->hparams().arch, "llama");
  EXPECT_EQ(r.model->hparams().sliding_window, 5);
}

TEST(Hf, Qwen2BiasesF16Sharded) {
  SynthSpec s;
  s.arch = "qwen2";
  s.seed = 15;
  s.qkv_bias = true;
  s.freq_base = 1e6;
  SyntheticModel sm = make_synthetic(s);
  HfDirOptions o;
  o.dtype = "F16";
  o.n_shards = 3;
  check_three_ways(sm, s, "qwen2", o);
}

TEST(Hf, Qwen3QkNormHeadDim) {
  SynthSpec s;
  s.arch = "qwen3";
  s.seed = 16;
  s.n_head = 4;
  s.key_length = 24;  // head_dim not n_embd / n_head
  s.freq_base = 1e6;
  s.rms_eps = 1e-6f;
  s.tied_output = true;
  SyntheticModel sm = make_synthetic(s);
  ThreeWay r = check_three_ways(sm, s, "qwen3");
  ASSERT_TRUE(r.model);
  EXPECT_EQ(r.model->hparams().head_dim, 24);
}

SynthSpec gemma_spec(const char* arch, uint32_t seed) {
  SynthSpec s;
  s.arch = arch;
  s.n_layer = 4;
  s.n_head = 4;
  s.n_head_kv = 2;
  s.tied_output = true;
  s.rms_eps = 1e-6f;
  s.sliding_window = 4;
  s.seed = seed;
  return s;
}

TEST(Hf, Gemma2NormsPlusOneSoftcapsWindow) {
  SynthSpec s = gemma_spec("gemma2", 17);
  s.attn_softcap = 1.5;
  s.final_softcap = 2.5;
  SyntheticModel sm = make_synthetic(s);
  ThreeWay r = check_three_ways(sm, s, "gemma2");
  ASSERT_TRUE(r.model);
  EXPECT_EQ(r.model->hparams().layers[0].sliding_window, 4);
  EXPECT_EQ(r.model->hparams().layers[1].sliding_window, 0);
  // Switched off: norms taken as stored (w, not 1 + w).
  SyntheticModel sm2 = make_synthetic(s);
  const std::string dir = fresh_dir("gemma2_plain_norms");
  HfDirOptions o;
  o.gemma_minus_one = false;
  write_hf_dir(sm2, s, dir, o);
  auto wrong = load_ok(dir);
  ASSERT_TRUE(wrong);
  const auto tokens = random_tokens(20, s.n_vocab, s.seed);
  expect_sensitive(run(*wrong, tokens, {tokens.size()}, 1), reference_of(sm), tokens, "Gemma 1 + w");
}

TEST(Hf, Gemma3QkNormLocalBaseNestedTextConfig) {
  SynthSpec s = gemma_spec("gemma3", 18);
  s.window_pattern = 2;
  s.freq_base = 1e6;
  s.freq_base_swa = 1000.0;
  SyntheticModel sm = make_synthetic(s);
  check_three_ways(sm, s, "gemma3");
  // The multimodal layout: settings under text_config, tensors under language_model.
  SyntheticModel sm2 = make_synthetic(s);
  const std::string dir = fresh_dir("gemma3_nested");
  const json flat = write_hf_dir(sm2, s, dir);
  json nested = {{"model_type", "gemma3"}, {"text_config", flat}, {"vision_config", {{"hidden_size", 8}}}};
  nested["text_config"]["model_type"] = "gemma3_text";
  std::ofstream(dir + "/config.json") << nested.dump();
  // Rename the tensors as Gemma3ForConditionalGeneration stores them, plus a vision tensor to skip.
  auto st = safetensors::SafetensorsFile::open(dir + "/model.safetensors");
  ASSERT_TRUE(st.is_ok());
  std::vector<StTensor> renamed;
  for (const auto& t : st->tensors())
    renamed.push_back({"language_model." + t.name, t.dtype, t.shape, {t.bytes.begin(), t.bytes.end()}});
  renamed.push_back({"vision_tower.vision_model.post_layernorm.weight", "F32", {2}, std::vector<uint8_t>(8)});
  write_bytes(dir + "/model.safetensors", safetensors_bytes(renamed));
  auto m = load_ok(dir);
  ASSERT_TRUE(m);
  const auto tokens = random_tokens(20, s.n_vocab, s.seed);
  expect_matches(*m, reference_of(sm2), tokens);
}

TEST(Hf, Phi3FusedLongRope) {
  SynthSpec s;
  s.arch = "phi3";
  s.seed = 19;
  s.n_ctx_train = 512;
  s.yarn_orig_ctx = 128;  // the tests' contexts (<= 20) take the short factors
  const int half = s.head_dim() / 2;
  for (int i = 0; i < half; ++i) {
    s.rope_long.push_back(1.0f + 0.5f * i);
    s.rope_short.push_back(1.0f + 0.05f * i);
  }
  s.attn_factor = static_cast<float>(std::sqrt(1 + std::log(512.0 / 128) / std::log(128.0)));
  SyntheticModel sm = make_synthetic(s);
  ThreeWay r = check_three_ways(sm, s, "phi3");
  ASSERT_TRUE(r.model);
  // The factors as config.json lists them (this short context uses the short ones).
  for (const auto& [name, want] : {std::pair{"rope_factors_long.weight", s.rope_long}, {"rope_factors_short.weight", s.rope_short}}) {
    const gguf::TensorInfo* t = r.model->file().find_tensor(name);
    ASSERT_NE(t, nullptr) << name;
    ASSERT_EQ(t->n_elements, want.size());
    for (size_t i = 0; i < want.size(); ++i) EXPECT_EQ(reinterpret_cast<const float*>(t->data)[i], want[i]) << name << i;
  }

}

// ---- mixture of experts: per-expert matrices stacked (12 experts, so that
// the names' text order, 0 1 10 11 2 ..., differs from the experts' order),
// the shared expert, and transformers 5's fused 3-D experts.

SynthSpec moe_spec(const std::string& arch, int n_expert, uint32_t seed) {
  SynthSpec s;
  s.arch = arch;
  s.n_expert = n_expert;
  s.n_expert_used = 2;
  s.n_ff = 64;
  if (arch != "llama") s.n_ff_exp = 32;
  if (arch == "qwen2moe") s.qkv_bias = true;
  s.seed = seed;
  return s;
}

TEST(Hf, MixtralExpertsStackedInTheirOrder) {
  SynthSpec s = moe_spec("llama", 12, 31);
  SyntheticModel sm = make_synthetic(s);
  ThreeWay r = check_three_ways(sm, s, "mixtral");
  ASSERT_TRUE(r.model);
  EXPECT_EQ(r.model->hparams().arch, "llama");
  EXPECT_EQ(r.model->hparams().n_expert, 12);
  EXPECT_EQ(r.model->hparams().n_expert_used, 2);
  // Switched off: experts 0 and 1 exchanged in the checkpoint compute another model.
  SyntheticModel sm2 = make_synthetic(s);
  for (SynthTensor& t : sm2.tensors)
    if (t.name.find("_exps.") != std::string::npos) {
      const size_t per = t.dims[0] * t.dims[1];
      std::swap_ranges(t.data.begin(), t.data.begin() + static_cast<ptrdiff_t>(per), t.data.begin() + static_cast<ptrdiff_t>(per));
    }
  const std::string dir = fresh_dir("mixtral_swapped");
  write_hf_dir(sm2, s, dir);
  auto wrong = load_ok(dir);
  ASSERT_TRUE(wrong);
  const auto tokens = random_tokens(20, s.n_vocab, s.seed);
  expect_sensitive(run(*wrong, tokens, {tokens.size()}, 1), reference_of(sm), tokens, "expert order");
  std::filesystem::remove_all(dir);
}

TEST(Hf, Qwen2MoeSharedExpertBf16Sharded) {
  SynthSpec s = moe_spec("qwen2moe", 4, 32);
  s.n_ff_shexp = 48;
  SyntheticModel sm = make_synthetic(s);
  HfDirOptions o;
  o.dtype = "BF16";
  o.n_shards = 3;
  ThreeWay r = check_three_ways(sm, s, "qwen2moe", o);
  ASSERT_TRUE(r.model);
  EXPECT_EQ(r.model->hparams().arch, "qwen2moe");
  EXPECT_EQ(r.model->hparams().n_ff_shexp, 48);
  EXPECT_EQ(r.model->hparams().n_ff_exp, 32);
}

TEST(Hf, Qwen3MoeFusedExpertsF16) {
  SynthSpec s = moe_spec("qwen3moe", 4, 33);
  SyntheticModel sm = make_synthetic(s);
  HfDirOptions o;
  o.dtype = "F16";
  o.fused_experts = true;
  ThreeWay r = check_three_ways(sm, s, "qwen3moe_fused", o);
  ASSERT_TRUE(r.model);
  EXPECT_EQ(r.model->hparams().arch, "qwen3moe");
  // The fused gate_up's halves are the gate and the up exactly (same bytes).
  const gguf::TensorInfo* gate = r.model->file().find_tensor("blk.0.ffn_gate_exps.weight");
  ASSERT_NE(gate, nullptr);
  EXPECT_EQ(gate->type, gguf::GgmlType::F16);
  EXPECT_EQ(gate->dims[2], 4u);
}

// Converting straight to Q8_0 writes what converting to F32 and then running
// tern quantize writes (the 3-D expert rules; routers left F32), byte for byte.
TEST(Hf, MoeConvertsToQ8_0AsQuantizeDoes) {
  SynthSpec s = moe_spec("qwen2moe", 4, 34);
  s.n_embd = 64;
  SyntheticModel sm = make_synthetic(s);
  const std::string dir = fresh_dir("moe_q8");
  HfDirOptions o;
  o.dtype = "BF16";
  write_hf_dir(sm, s, dir, o);
  ASSERT_TRUE(convert(dir, dir + ".q8.gguf", "Q8_0").is_ok());
  ASSERT_TRUE(convert(dir, dir + ".f32.gguf", "F32").is_ok());
  QuantizeOptions q;
  q.in_path = dir + ".f32.gguf";
  q.out_path = dir + ".f32.q8.gguf";
  q.scheme = *find_quant_scheme("Q8_0");
  ThreadPool pool(2);
  ASSERT_TRUE(quantize_gguf(q, pool).is_ok());
  auto a = gguf::GgufFile::open(dir + ".q8.gguf"), b = gguf::GgufFile::open(q.out_path);
  ASSERT_TRUE(a.is_ok() && b.is_ok());
  ASSERT_EQ(a->tensors().size(), b->tensors().size());
  for (const gguf::TensorInfo& t : a->tensors()) {
    const gguf::TensorInfo* u = b->find_tensor(t.name);
    ASSERT_NE(u, nullptr) << t.name;
    EXPECT_EQ(t.type, u->type) << t.name;
    ASSERT_EQ(t.n_bytes, u->n_bytes) << t.name;
    EXPECT_EQ(std::memcmp(t.data, u->data, t.n_bytes), 0) << t.name;
  }
  EXPECT_EQ(a->find_tensor("blk.0.ffn_up_exps.weight")->type, gguf::GgmlType::Q8_0);
  EXPECT_EQ(a->find_tensor("blk.0.ffn_gate_inp.weight")->type, gguf::GgmlType::F32);
  EXPECT_EQ(a->find_tensor("blk.0.ffn_gate_inp_shexp.weight")->type, gguf::GgmlType::F32);
  std::filesystem::remove_all(dir);
  for (const char* ext : {".q8.gguf", ".f32.gguf", ".f32.q8.gguf"}) std::filesystem::remove(dir + ext);
}

TEST(Hf, ConvertQuantizesWithTheRules) {
  SynthSpec s;
  s.seed = 20;
  s.n_embd = 64;
  SyntheticModel sm = make_synthetic(s);
  const std::string dir = fresh_dir("q8");
  write_hf_dir(sm, s, dir);
  ASSERT_TRUE(convert(dir, dir + ".gguf", "Q8_0").is_ok());
  auto m = load_ok(dir + ".gguf");
  ASSERT_TRUE(m);
  EXPECT_EQ(m->file().find_tensor("blk.0.attn_q.weight")->type, gguf::GgmlType::Q8_0);
  EXPECT_EQ(m->file().find_tensor("blk.0.attn_norm.weight")->type, gguf::GgmlType::F32);
  EXPECT_EQ(m->file().get_string("general.architecture").value(), "llama");
  const auto tokens = random_tokens(16, s.n_vocab, s.seed);
  expect_matches(*m, reference_of(sm), tokens, 0.3);  // Q8_0 rounding (test_archs.cpp, WeightTypes)
  std::filesystem::remove(dir + ".gguf");
}

}  // namespace
}  // namespace tern
