// synth_model: small shapes give a loadable model with the requested
// hyper-parameters, types and vocabulary; the same seed gives the same bytes.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>

#include "core/input_file.h"
#include "engine/generate.h"
#include "engine/inline_engine.h"
#include "model/batch_runner.h"
#include "model/model.h"
#include "model/synth.h"
#include "tokenizer/tokenizer.h"
#include "quant/quant.h"

namespace tern {
namespace {

using gguf::GgmlType;

std::string vocab_path() { return std::string(TERN_SHARED_DIR) + "/testdata/tokenizers/ggml-vocab-llama-spm.gguf"; }

#define REQUIRE_VOCAB()                                                                      \
  do {                                                                                       \
    if (!std::filesystem::exists(vocab_path())) GTEST_SKIP() << "tokenizer test data absent"; \
  } while (0)

std::string scratch(const std::string& name) {
  const std::string dir = std::string(TERN_BINARY_DIR) + "/test_models";
  std::filesystem::create_directories(dir);
  return dir + "/synth_" + name + "." + std::to_string(::getpid()) + ".gguf";
}

struct Scratch {
  std::string path;
  explicit Scratch(const std::string& name) : path(scratch(name)) {}
  ~Scratch() { std::filesystem::remove(path); }
};

// dim 64, 2 layers, 4 heads (head size 16), 2 KV heads, ffn 96.
SynthOptions small(const std::string& out, const char* scheme, uint64_t seed = 7) {
  SynthOptions o;
  o.n_embd = 64;
  o.n_layer = 2;
  o.n_head = 4;
  o.n_head_kv = 2;
  o.n_ff = 96;
  o.n_ctx = 512;
  o.seed = seed;
  o.vocab_path = vocab_path();
  o.out_path = out;
  o.scheme = *find_quant_scheme(scheme);
  return o;
}

Status synth(const SynthOptions& o, int n_threads = 2) {
  ThreadPool pool(n_threads);
  auto r = synth_model(o, pool);
  return r.is_ok() ? Status::ok() : r.status();
}

// A few greedy tokens through the file's own tokenizer and the engine.
void expect_generates(const std::string& path, const gguf::GgufFile& f) {
  auto tok = Tokenizer::from_gguf(f);
  ASSERT_TRUE(tok.is_ok()) << tok.status().message();
  GenerateOptions g;
  g.sampling.temperature = 0.0f;
  g.max_tokens = 4;
  g.ignore_eos = true;
  auto engine = Engine::create(single_sequence_config(path, 0, 2));
  ASSERT_TRUE(engine.is_ok()) << engine.status().message();
  auto r = generate(**engine, (*tok)->encode("Hello", true, false), g);
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  EXPECT_EQ(r->tokens.size(), 4u);
}

TEST(Synth, LoadsWithRequestedShapesAndVocabulary) {
  REQUIRE_VOCAB();
  Scratch out("shapes");
  ASSERT_TRUE(synth(small(out.path, "Q8_0")));
  auto model = Model::load(out.path);
  ASSERT_TRUE(model.is_ok()) << model.status().message();
  const HParams& hp = (*model)->hparams();
  EXPECT_EQ(hp.arch, "llama");
  EXPECT_EQ(hp.n_embd, 64);
  EXPECT_EQ(hp.n_layer, 2);
  EXPECT_EQ(hp.n_head, 4);
  EXPECT_EQ(hp.n_head_kv, 2);
  EXPECT_EQ(hp.head_dim, 16);
  EXPECT_EQ(hp.n_ff, 96);
  EXPECT_EQ(hp.n_ctx_train, 512);
  EXPECT_EQ(hp.n_vocab, 32000);
  EXPECT_FLOAT_EQ(hp.rms_eps, 1e-5f);
  EXPECT_FLOAT_EQ(hp.rope.freq_base, 10000.0f);
  EXPECT_EQ(hp.rope.n_rot, 16);

  const gguf::GgufFile& f = (*model)->file();
  EXPECT_EQ(*f.get_u64("general.file_type"), 7u);
  EXPECT_EQ(*f.get_u64("general.quantization_version"), 2u);
  // Every tokenizer.* key copied, and nothing else from the vocabulary file.
  auto vocab = gguf::GgufFile::open(vocab_path());
  ASSERT_TRUE(vocab.is_ok());
  size_t n_tokenizer_keys = 0;
  for (const auto& [key, value] : vocab->metadata()) {
    if (key.rfind("tokenizer.", 0) != 0) continue;
    ++n_tokenizer_keys;
    const gguf::Value* got = f.find(key);
    ASSERT_NE(got, nullptr) << key;
    EXPECT_EQ(got->type(), value.type()) << key;
    EXPECT_EQ(got->to_display(1 << 20), value.to_display(1 << 20)) << key;
  }
  EXPECT_GT(n_tokenizer_keys, 3u);
  EXPECT_EQ(*f.get_string("general.name"), "synth-llama-64x2");

  // Q8_0 scheme: matrices Q8_0 (rows of 64 and 96 divide into 32), norms F32 and all ones.
  EXPECT_EQ(f.tensors().size(), 3u + 2 * 9);  // token_embd, output_norm, output + 9 per layer
  for (const auto& t : f.tensors()) {
    EXPECT_EQ(t.type, t.n_dims == 1 ? GgmlType::F32 : GgmlType::Q8_0) << t.name;
    if (t.n_dims == 1) {
      const float* v = reinterpret_cast<const float*>(t.data);
      for (uint64_t i = 0; i < t.n_elements; ++i) ASSERT_EQ(v[i], 1.0f) << t.name;
    }
  }
  EXPECT_EQ(f.find_tensor("blk.1.attn_k.weight")->dims[1], 32u);
  EXPECT_EQ(f.find_tensor("blk.1.ffn_down.weight")->dims[0], 96u);
  EXPECT_EQ(f.find_tensor("output.weight")->dims[1], 32000u);

  expect_generates(out.path, f);  // it runs
}

// --arch llama3 / qwen3 / phi3: the names, shapes and keys llama.cpp's
// converter writes for each, loaded by tern as that architecture, and a few
// greedy tokens generated.
TEST(Synth, OtherArchitecturesLoadAndGenerate) {
  REQUIRE_VOCAB();
  struct Case {
    const char* arch;
    const char* file_arch;
    int head_dim, n_ctx;
    std::vector<std::string> has, lacks;
  };
  const Case cases[] = {
      {"llama3", "llama", 0, 512, {"rope_freqs.weight", "blk.1.ffn_gate.weight"}, {"blk.0.attn_q_norm.weight"}},
      {"qwen3", "qwen3", 32, 512, {"blk.1.attn_q_norm.weight", "blk.1.attn_k_norm.weight"}, {"rope_freqs.weight"}},
      {"phi3", "phi3", 0, 8192, {"blk.1.attn_qkv.weight", "rope_factors_long.weight", "rope_factors_short.weight"},
       {"blk.1.attn_q.weight", "blk.1.ffn_gate.weight"}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.arch);
    Scratch out(c.arch);
    SynthOptions o = small(out.path, "Q8_0");
    o.arch = c.arch;
    o.head_dim = c.head_dim;
    o.n_ctx = c.n_ctx;
    ASSERT_TRUE(synth(o));
    auto model = Model::load(out.path);
    ASSERT_TRUE(model.is_ok()) << model.status().message();
    const HParams& hp = (*model)->hparams();
    EXPECT_EQ(hp.arch, c.file_arch);
    const int head_dim = c.head_dim ? c.head_dim : 16;
    EXPECT_EQ(hp.head_dim, head_dim);
    EXPECT_EQ(hp.rope.n_rot, head_dim);
    const gguf::GgufFile& f = (*model)->file();
    EXPECT_EQ(*f.get_string("general.name"), std::string("synth-") + c.arch + "-64x2");
    for (const auto& name : c.has) EXPECT_NE(f.find_tensor(name), nullptr) << name;
    for (const auto& name : c.lacks) EXPECT_EQ(f.find_tensor(name), nullptr) << name;
    EXPECT_EQ(f.find_tensor("blk.0.attn_output.weight")->dims[0], uint64_t(4 * head_dim));

    if (std::string(c.arch) == "llama3") {
      // Meta's formula at base 5e5 over 8 pairs: the fastest pair keeps its
      // frequency, the slowest is divided by 8, the rest no less than 1.
      EXPECT_FLOAT_EQ(hp.rope.freq_base, 500000.0f);
      const gguf::TensorInfo* t = f.find_tensor("rope_freqs.weight");
      ASSERT_EQ(t->n_elements, 8u);
      const float* v = reinterpret_cast<const float*>(t->data);
      EXPECT_EQ(v[0], 1.0f);
      EXPECT_EQ(v[7], 8.0f);
      for (int i = 1; i < 8; ++i) EXPECT_GE(v[i], v[i - 1]);
    }
    if (std::string(c.arch) == "qwen3") {
      EXPECT_EQ(*f.get_u64("qwen3.attention.key_length"), 32u);
      EXPECT_FLOAT_EQ(hp.rms_eps, 1e-6f);
    }
    if (std::string(c.arch) == "phi3") {
      // ctx 8192 over an original 4096: LongRoPE with the converter's attention factor.
      EXPECT_EQ(hp.rope_orig_ctx, 4096);
      EXPECT_NEAR(hp.rope.yarn_attn_factor, std::sqrt(1.0 + std::log(2.0) / std::log(4096.0)), 1e-6);
      EXPECT_EQ(f.find_tensor("blk.0.ffn_up.weight")->dims[1], 2u * 96);
    }
    expect_generates(out.path, f);
  }
}

// The serving engine takes LongRoPE's long or short factors by the context
// one sequence may reach (ModelRunner's n_ctx_seq: the engine's per-sequence
// limit), as BatchRunner does by the positions it is sized for: the engine's
// log-probability of its first token matches BatchRunner sized alike and
// differs from BatchRunner sized for the other side of the original 4096.
TEST(Synth, Phi3EngineChoosesLongRopeByItsContext) {
  REQUIRE_VOCAB();
  Scratch out("phi3_ctx");
  SynthOptions o = small(out.path, "F32");
  o.arch = "phi3";
  o.n_ctx = 8192;
  o.weight_std = 0.3f;  // logits far from flat, so the factors show
  ASSERT_TRUE(synth(o));
  auto model = Model::load(out.path);
  ASSERT_TRUE(model.is_ok()) << model.status().message();
  const std::vector<TokenId> prompt{1, 450, 3290, 1701, 21580, 29871, 13, 306, 4091, 2};
  // log-softmax of the last prompt position from BatchRunner sized for n_positions.
  auto batch_logprobs = [&](int32_t n_positions) {
    auto runner = BatchRunner::create(**model, 1, n_positions, KvType::F32, 0);
    EXPECT_TRUE(runner.is_ok());
    Batch b;
    for (size_t i = 0; i < prompt.size(); ++i) b.add(prompt[i], static_cast<int32_t>(i), SeqId(0), i + 1 == prompt.size());
    std::vector<float> logits;
    EXPECT_TRUE((*runner)->forward(b, logits).is_ok());
    double mx = *std::max_element(logits.begin(), logits.end()), sum = 0.0;
    for (float l : logits) sum += std::exp(l - mx);
    std::vector<double> lp(logits.size());
    for (size_t i = 0; i < logits.size(); ++i) lp[i] = logits[i] - mx - std::log(sum);
    return lp;
  };
  for (int32_t n_ctx : {8192, 2048}) {
    SCOPED_TRACE(n_ctx);
    EngineConfig c = single_sequence_config(out.path, n_ctx, 2);
    auto engine = InlineEngine::create(c);
    ASSERT_TRUE(engine.is_ok()) << engine.status().message();
    GenerationRequest req;
    req.prompt_tokens = prompt;
    req.max_tokens = 1;
    req.sampling.temperature = 0;
    req.n_logprobs = 1;
    auto prepared = (*engine)->prepare(req);
    ASSERT_TRUE(prepared.is_ok()) << prepared.status().message();
    std::optional<RequestOutput> first;
    (*engine)->add(RequestId(1), std::move(prepared).value(), [&](const RequestOutput& r) {
      if (r.has_token && !first) first = r;
    });
    for (int guard = 0; (*engine)->has_work() && guard < 100; ++guard) ASSERT_TRUE((*engine)->step().is_ok());
    ASSERT_TRUE(first);
    const auto same = batch_logprobs(n_ctx), other = batch_logprobs(n_ctx > 4096 ? 2048 : 8192);
    const size_t t = static_cast<size_t>(first->token);
    EXPECT_NEAR(first->logprob, same[t], 1e-4);
    // The two sets move this token's log-probability far more than rounding does.
    double moved = 0.0;
    for (size_t i = 0; i < same.size(); ++i) moved = std::max(moved, std::fabs(same[i] - other[i]));
    EXPECT_GT(moved, 0.1) << "the long and short factors give the same logits: the check could not fail";
  }
}

// gemma2 / gemma3 at Gemma's own head size (head_dim 32 != dim / heads = 16):
// the keys and tensors llama.cpp's converter writes, a load with the Gemma
// hyper-parameters, finite logits, and generation through the engine.
TEST(Synth, GemmaFilesLoadAndGenerate) {
  REQUIRE_VOCAB();
  for (const char* arch : {"gemma2", "gemma3"}) {
    SCOPED_TRACE(arch);
    const bool g2 = std::string(arch) == "gemma2";
    Scratch out(arch);
    SynthOptions o = small(out.path, "Q8_0");
    o.arch = arch;
    o.head_dim = 32;
    o.n_layer = 6;
    o.window = 8;
    ASSERT_TRUE(synth(o));
    auto model = Model::load(out.path);
    ASSERT_TRUE(model.is_ok()) << model.status().message();
    const HParams& hp = (*model)->hparams();
    EXPECT_EQ(hp.arch, arch);
    EXPECT_EQ(hp.head_dim, 32);
    EXPECT_EQ(hp.q_dim(), 128);
    EXPECT_FLOAT_EQ(hp.rms_eps, 1e-6f);
    EXPECT_FLOAT_EQ(hp.embd_scale, 8.0f);
    EXPECT_FLOAT_EQ(hp.attn_softcap, g2 ? 50.0f : 0.0f);
    EXPECT_FLOAT_EQ(hp.final_softcap, g2 ? 30.0f : 0.0f);
    EXPECT_FLOAT_EQ(hp.rope.freq_base, g2 ? 10000.0f : 1e6f);
    EXPECT_FLOAT_EQ(hp.rope_local.freq_base, 10000.0f);
    for (int il = 0; il < 6; ++il)  // gemma2: even layers local; gemma3: all but the 6th
      EXPECT_EQ(hp.layers[il].sliding_window, (g2 ? il % 2 == 0 : il != 5) ? 8 : 0) << il;

    const gguf::GgufFile& f = (*model)->file();
    EXPECT_EQ(f.find_tensor("output.weight"), nullptr) << "Gemma's classifier is token_embd";
    EXPECT_NE(f.find_tensor("blk.5.post_attention_norm.weight"), nullptr);
    EXPECT_NE(f.find_tensor("blk.5.post_ffw_norm.weight"), nullptr);
    EXPECT_EQ(f.find_tensor("blk.0.attn_q_norm.weight") != nullptr, !g2);
    EXPECT_EQ(f.tensors().size(), 2u + 6 * (g2 ? 11 : 13));
    EXPECT_EQ(f.find_tensor("blk.0.attn_output.weight")->dims[0], 128u);
    EXPECT_EQ(*f.get_string("general.name"), std::string("synth-") + arch + "-64x6");

    auto runner = BatchRunner::create(**model, 1, 64, KvType::F32, 16);
    ASSERT_TRUE(runner.is_ok()) << runner.status().message();
    Batch b;
    for (int i = 0; i < 20; ++i) b.add(TokenId(100 + 37 * i), i, SeqId(0), true);
    std::vector<float> logits;
    ASSERT_TRUE((*runner)->forward(b, logits));
    for (float x : logits) ASSERT_TRUE(std::isfinite(x));

    auto tok = Tokenizer::from_gguf(f);
    ASSERT_TRUE(tok.is_ok()) << tok.status().message();
    GenerateOptions g;
    g.sampling.temperature = 0.0f;
    g.max_tokens = 12;  // past the window of 8
    g.ignore_eos = true;
    auto engine = Engine::create(single_sequence_config(out.path, 0, 2));
    ASSERT_TRUE(engine.is_ok()) << engine.status().message();
    auto r = generate(**engine, (*tok)->encode("Hello", true, false), g);
    ASSERT_TRUE(r.is_ok()) << r.status().message();
    EXPECT_EQ(r->tokens.size(), 12u);
  }
}

TEST(Synth, MixRulesApply) {
  REQUIRE_VOCAB();
  Scratch out("q4km");
  SynthOptions o = small(out.path, "Q4_K_M");
  o.n_embd = 256;
  o.n_ff = 512;
  o.n_head = 8;
  o.n_head_kv = 2;
  o.n_layer = 8;
  ASSERT_TRUE(synth(o));
  auto f = gguf::GgufFile::open(out.path);
  ASSERT_TRUE(f.is_ok());
  EXPECT_EQ(*f->get_u64("general.file_type"), 15u);
  EXPECT_EQ(f->find_tensor("output.weight")->type, GgmlType::Q6_K);
  EXPECT_EQ(f->find_tensor("token_embd.weight")->type, GgmlType::Q4_K);
  // use_more_bits(i, 8): i < 1, i >= 7, (i - 1) % 3 == 2 -> layers 0, 3, 6, 7.
  for (int i = 0; i < 8; ++i) {
    const bool more = i == 0 || i == 3 || i == 6 || i == 7;
    const std::string b = "blk." + std::to_string(i) + ".";
    EXPECT_EQ(f->find_tensor(b + "attn_v.weight")->type, more ? GgmlType::Q6_K : GgmlType::Q4_K) << i;
    EXPECT_EQ(f->find_tensor(b + "ffn_down.weight")->type, more ? GgmlType::Q6_K : GgmlType::Q4_K) << i;
    EXPECT_EQ(f->find_tensor(b + "attn_q.weight")->type, GgmlType::Q4_K) << i;
  }
  EXPECT_TRUE(Model::load(out.path).is_ok());
}

TEST(Synth, SameSeedSameBytesOnAnyThreadCount) {
  REQUIRE_VOCAB();
  Scratch a("seed_a"), b("seed_b"), c("seed_c");
  ASSERT_TRUE(synth(small(a.path, "Q4_0", 11), 1));
  ASSERT_TRUE(synth(small(b.path, "Q4_0", 11), 3));
  ASSERT_TRUE(synth(small(c.path, "Q4_0", 12), 2));
  auto ra = read_file(a.path), rb = read_file(b.path), rc = read_file(c.path);
  ASSERT_TRUE(ra.is_ok() && rb.is_ok() && rc.is_ok());
  EXPECT_TRUE(*ra == *rb);
  EXPECT_EQ(ra->size(), rc->size());
  EXPECT_FALSE(*ra == *rc);
}

TEST(Synth, WeightsHaveTheRequestedSpread) {
  REQUIRE_VOCAB();
  Scratch out("f32");
  ASSERT_TRUE(synth(small(out.path, "F32")));
  auto f = gguf::GgufFile::open(out.path);
  ASSERT_TRUE(f.is_ok());
  // token_embd: 2M draws; std within 0.5% of 0.02, mean within a few standard errors of 0.
  for (const char* name : {"token_embd.weight", "blk.0.attn_q.weight", "blk.1.ffn_down.weight"}) {
    const auto* t = f->find_tensor(name);
    ASSERT_EQ(t->type, GgmlType::F32);
    const float* v = reinterpret_cast<const float*>(t->data);
    double sum = 0, sum2 = 0, amax = 0;
    for (uint64_t i = 0; i < t->n_elements; ++i) {
      sum += v[i];
      sum2 += double(v[i]) * v[i];
      amax = std::max(amax, std::fabs(double(v[i])));
    }
    const double n = double(t->n_elements), mean = sum / n, std_dev = std::sqrt(sum2 / n - mean * mean);
    const double tol = 0.02 * 4.0 / std::sqrt(n);  // ~4 standard errors of the mean (and of the std, roughly)
    EXPECT_NEAR(mean, 0.0, tol) << name;
    EXPECT_NEAR(std_dev, 0.02, std::max(4.0 * tol, 1e-4)) << name;
    EXPECT_LE(amax, 0.02 * 3.47) << name;
    EXPECT_GT(amax, 0.02 * 2.5) << name << ": tails reach past 2.5 std";
  }
  // Rows differ from one another (each row has its own stream).
  const auto* q = f->find_tensor("blk.0.attn_q.weight");
  EXPECT_NE(std::memcmp(q->data, q->data + 64 * 4, 64 * 4), 0);
}

TEST(Synth, BadShapesAreRefusedBeforeAnythingIsWritten) {
  Scratch out("bad");
  struct Bad {
    void (*edit)(SynthOptions&);
    const char* needle;
  };
  const Bad cases[] = {
      {[](SynthOptions& o) { o.n_head = 5; }, "does not divide --dim"},
      {[](SynthOptions& o) { o.n_head_kv = 3; }, "does not divide --heads"},
      {[](SynthOptions& o) { o.n_head_kv = 8; }, "does not divide --heads"},
      {[](SynthOptions& o) { o.n_embd = 60; o.n_head = 4; }, "must be even"},  // head size 15
      {[](SynthOptions& o) { o.n_layer = 0; }, "must be positive"},
      {[](SynthOptions& o) { o.arch = "gpt2"; }, "unsupported --arch"},
      {[](SynthOptions& o) { o.head_dim = 15; }, "must be even"},
      {[](SynthOptions& o) { o.window = 32; }, "gemma2/gemma3 only"},
      {[](SynthOptions& o) { o.arch = "gemma2"; o.head_dim = 33; }, "must be even"},
      {[](SynthOptions& o) { o.arch = "gemma3"; o.head_dim = 8192; }, "implausibly large"},
      {[](SynthOptions& o) { o.vocab_path = ""; }, "--vocab-from"},
  };
  for (const auto& c : cases) {
    SynthOptions o = small(out.path, "Q8_0");
    c.edit(o);
    const Status s = validate_synth_options(o);
    ASSERT_FALSE(s.is_ok()) << c.needle;
    EXPECT_EQ(s.kind(), ErrorKind::InvalidArgument);
    EXPECT_NE(s.message().find(c.needle), std::string::npos) << s.message();
    EXPECT_FALSE(synth(o).is_ok());
    EXPECT_FALSE(std::filesystem::exists(out.path));
  }
  SynthOptions o = small(out.path, "Q8_0");
  o.vocab_path = "/nonexistent/vocab.gguf";
  const Status s = synth(o);
  EXPECT_NE(s.message().find("cannot open"), std::string::npos) << s.message();
  EXPECT_FALSE(std::filesystem::exists(out.path));
}

}  // namespace
}  // namespace tern
