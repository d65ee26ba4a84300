// Nemotron-H (model/archs/nemotron_h.cpp, written by tern synth --arch
// nemotron_h) against an independent double-precision reference written here,
// reading the file's tensors and per-layer arrays itself, one token at a time:
// each layer adds one pre-normed sub-layer to the residual stream, chosen by
// head_count_kv[N] and feed_forward_length[N]: the Mamba-2 mixer
// (ssm_test_util.h), causal attention over every earlier token without RoPE
// (GQA), or W_down relu(W_up x)^2. Variants of the reference (RoPE applied,
// relu instead of relu^2, attention to the current token only, the mixer's
// groups merged) must each be far from the model. Then: a prompt in chunks
// and batched with another sequence gives one-token decode's logits bit for
// bit, the model keeps one KV group for its attention layers and one state
// group for its mixers, and bad layer arrays are refused with the layer named.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "model/batch_runner.h"
#include "model/model.h"
#include "model/synth.h"
#include "one_by_one.h"
#include "ssm_test_util.h"

namespace tern {
namespace {

using test::DecodedGguf;
using test::rel_diff;
using test::ScratchModel;

constexpr const char* kPattern = "M*-M*-";

// dim 48, 4 query heads of 12 over 2 K/V heads, FFN 80; mixer heads of 24 in
// 2 groups, d_state 16; weights of std 0.1 so that every term moves the logits.
Status synth_nemotron(const std::string& out, const char* scheme = "F32", const char* pattern = kPattern) {
  SynthOptions o;
  o.arch = "nemotron_h";
  o.n_embd = 48;
  o.layer_pattern = pattern;
  o.n_layer = static_cast<int>(o.layer_pattern.size());
  o.n_head = 4;
  o.n_head_kv = 2;
  o.n_ff = 80;
  o.ssm_head_dim = 24;
  o.n_group = 2;
  o.d_state = 16;
  o.n_ctx = 512;
  o.seed = 9;
  o.weight_std = 0.1f;
  o.vocab_path = test::ssm_vocab_path();
  o.out_path = out;
  o.scheme = *find_quant_scheme(scheme);
  ThreadPool pool(2);
  auto r = synth_model(o, pool);
  return r.is_ok() ? Status::ok() : r.status();
}

struct Terms {
  bool rope = false;    // rotate q and k (Nemotron-H has no RoPE)
  bool relu2 = true;    // off: relu
  bool history = true;  // off: each token attends to itself only
  test::Mamba2Terms mixer;
};

class Reference {
 public:
  explicit Reference(const std::string& path) : g_(path), z_(g_.sizes("nemotron_h")) {
    const gguf::GgufFile& f = g_.file();
    n_head_ = g_.key("nemotron_h.attention.head_count");
    head_dim_ = g_.key("nemotron_h.attention.key_length");
    auto per_layer = [&](const char* key, std::vector<int>& out) {
      for (const gguf::Value& v : f.find(key)->as_array()->items)
        out.push_back(static_cast<int>(*v.as_u64()));
    };
    per_layer("nemotron_h.attention.head_count_kv", n_kv_);
    per_layer("nemotron_h.feed_forward_length", n_ff_);
  }

  std::vector<std::vector<double>> logits(const std::vector<TokenId>& tokens, const Terms& terms) {
    std::vector<test::Mamba2State> st(static_cast<size_t>(z_.n_layer), test::Mamba2State(z_));
    std::vector<std::vector<std::vector<double>>> keys(static_cast<size_t>(z_.n_layer)), values = keys;
    const std::vector<double>& embd = g_.tensor("token_embd.weight");
    std::vector<std::vector<double>> out;
    for (size_t pos = 0; pos < tokens.size(); ++pos) {
      const TokenId tok = tokens[pos];
      std::vector<double> x(embd.begin() + tok * z_.n_embd, embd.begin() + (tok + 1) * z_.n_embd);
      for (int il = 0; il < z_.n_layer; ++il) {
        const size_t l = static_cast<size_t>(il);
        const std::vector<double> xn = DecodedGguf::rms_norm(x, w(il, "attn_norm.weight").data(), z_.eps);
        std::vector<double> o;
        if (n_kv_[l] == 0 && n_ff_[l] == 0)
          o = test::mamba2_step(g_, z_, il, st[l], xn, terms.mixer);
        else if (n_kv_[l] > 0)
          o = attention(il, xn, static_cast<int>(pos), keys[l], values[l], terms);
        else
          o = ffn(il, xn, terms);
        for (size_t i = 0; i < x.size(); ++i) x[i] += o[i];
      }
      out.push_back(g_.head_logits(x, z_.eps));
    }
    return out;
  }

 private:
  const std::vector<double>& w(int il, const std::string& name) {
    return g_.tensor("blk." + std::to_string(il) + "." + name);
  }

  // Pairs (2i, 2i+1) of every head turned by pos * 10000^(-2i/head_dim).
  void rotate(std::vector<double>& v, int pos) const {
    for (size_t h = 0; h < v.size() / static_cast<size_t>(head_dim_); ++h)
      for (int i = 0; i < head_dim_ / 2; ++i) {
        const double th = pos * std::pow(10000.0, -2.0 * i / head_dim_);
        double& a = v[h * static_cast<size_t>(head_dim_) + 2 * static_cast<size_t>(i)];
        double& b = v[h * static_cast<size_t>(head_dim_) + 2 * static_cast<size_t>(i) + 1];
        const double ra = a * std::cos(th) - b * std::sin(th), rb = a * std::sin(th) + b * std::cos(th);
        a = ra;
        b = rb;
      }
  }

  std::vector<double> attention(int il, const std::vector<double>& xn, int pos,
                                std::vector<std::vector<double>>& keys,
                                std::vector<std::vector<double>>& values, const Terms& terms) {
    const size_t hd = static_cast<size_t>(head_dim_), nh = static_cast<size_t>(n_head_),
                 nkv = static_cast<size_t>(n_kv_[static_cast<size_t>(il)]);
    std::vector<double> q = DecodedGguf::matvec(w(il, "attn_q.weight"), xn, nh * hd);
    std::vector<double> k = DecodedGguf::matvec(w(il, "attn_k.weight"), xn, nkv * hd);
    if (terms.rope) {
      rotate(q, pos);
      rotate(k, pos);
    }
    if (!terms.history) keys.clear(), values.clear();
    keys.push_back(k);
    values.push_back(DecodedGguf::matvec(w(il, "attn_v.weight"), xn, nkv * hd));
    std::vector<double> att(nh * hd, 0.0);
    for (size_t h = 0; h < nh; ++h) {
      const size_t kvh = h / (nh / nkv);
      std::vector<double> s(keys.size());
      double mx = -1e300, sum = 0.0;
      for (size_t j = 0; j < keys.size(); ++j) {
        double dot = 0.0;
        for (size_t i = 0; i < hd; ++i) dot += q[h * hd + i] * keys[j][kvh * hd + i];
        s[j] = dot / std::sqrt(static_cast<double>(hd));
        mx = std::max(mx, s[j]);
      }
      for (double& v : s) sum += v = std::exp(v - mx);
      for (size_t j = 0; j < keys.size(); ++j)
        for (size_t i = 0; i < hd; ++i) att[h * hd + i] += s[j] / sum * values[j][kvh * hd + i];
    }
    return DecodedGguf::matvec(w(il, "attn_output.weight"), att, static_cast<size_t>(z_.n_embd));
  }

  std::vector<double> ffn(int il, const std::vector<double>& xn, const Terms& terms) {
    std::vector<double> up =
        DecodedGguf::matvec(w(il, "ffn_up.weight"), xn, static_cast<size_t>(n_ff_[static_cast<size_t>(il)]));
    for (double& v : up) v = std::max(v, 0.0) * (terms.relu2 ? std::max(v, 0.0) : 1.0);
    return DecodedGguf::matvec(w(il, "ffn_down.weight"), up, static_cast<size_t>(z_.n_embd));
  }

  DecodedGguf g_;
  DecodedGguf::Sizes z_;
  int n_head_ = 0, head_dim_ = 0;
  std::vector<int> n_kv_, n_ff_;
};

// Float against double: measured 3.4e-7 (CPU backend) and 1.4e-7 (reference);
// each variant must move the logits by more than 100 budgets.
constexpr double kBudget = 2e-6;

TEST(NemotronH, MatchesTheDoubleReferenceAndEachPartIsNeeded) {
  if (!std::filesystem::exists(test::ssm_vocab_path())) GTEST_SKIP() << "tokenizer test data absent";
  ScratchModel file("nemotron_ref");
  ASSERT_TRUE(synth_nemotron(file.path));
  const std::vector<TokenId> tokens = test::ssm_prompt(12);
  Reference ref(file.path);
  for (BackendKind kind : {BackendKind::Cpu, BackendKind::Ref}) {
    SCOPED_TRACE(backend::backend_kind_name(kind));
    auto model = Model::load(file.path, backend::make_backend(kind, 2));
    ASSERT_TRUE(model.is_ok()) << model.status().message();
    const HParams& hp = (*model)->hparams();
    EXPECT_EQ(hp.rope.n_rot, 0);
    const auto got = test::logits_one_by_one(**model, tokens);
    const double err = rel_diff(got, ref.logits(tokens, {}));
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.3g", err);
    RecordProperty("rel_err_" + std::string(backend::backend_kind_name(kind)), buf);
    EXPECT_LT(err, kBudget);
    if (kind != BackendKind::Cpu) continue;
    struct Off {
      const char* what;
      Terms terms;
    };
    const auto with = [](auto change) {
      Terms t;
      change(t);
      return t;
    };
    const Off offs[] = {{"no RoPE", with([](Terms& t) { t.rope = true; })},
                        {"relu^2", with([](Terms& t) { t.relu2 = false; })},
                        {"attention to earlier tokens", with([](Terms& t) { t.history = false; })},
                        {"the mixer's groups", with([](Terms& t) { t.mixer.groups = false; })},
                        {"the mixer's D skip", with([](Terms& t) { t.mixer.d_skip = false; })}};
    for (const Off& off : offs)
      EXPECT_GT(rel_diff(got, ref.logits(tokens, off.terms)), 100 * kBudget) << off.what << " is not checked";
  }
}

TEST(NemotronH, LayersKeepKvOrStateOrNothingAndBatchesGiveDecodeLogitsBitForBit) {
  if (!std::filesystem::exists(test::ssm_vocab_path())) GTEST_SKIP() << "tokenizer test data absent";
  ScratchModel file("nemotron_chunks");
  ASSERT_TRUE(synth_nemotron(file.path));
  auto model = Model::load(file.path, backend::make_backend(BackendKind::Cpu, 2));
  ASSERT_TRUE(model.is_ok()) << model.status().message();
  // One KV group of the two attention layers, one state group of the two mixers; FFN layers keep nothing.
  const std::vector<KvCacheSpec> specs = (*model)->kv_specs(KvType::F32);
  ASSERT_EQ(specs.size(), 2u);
  EXPECT_EQ(specs[0].kind, CacheKind::Recurrent);
  EXPECT_EQ(specs[0].n_layer, 2);
  EXPECT_EQ(specs[1].kind, CacheKind::FullAttention);
  EXPECT_EQ(specs[1].n_layer, 2);
  EXPECT_EQ(specs[1].n_kv_head, 2);
  auto runner = BatchRunner::create(**model, 2, 64, KvType::F32, 16);
  ASSERT_TRUE(runner.is_ok());
  test::expect_chunked_pairs_match_decode(**model, **runner);
}

// The file with `key` set to `value`, loaded.
Status load_with(const std::string& path, const std::string& out, const std::string& key, gguf::Value value) {
  TERN_RETURN_IF_ERROR(test::rewrite_key(path, out, key, std::move(value)));
  auto m = Model::load(out);
  return m.is_ok() ? Status::ok() : m.status();
}

TEST(NemotronH, BadLayerArraysAndShapesAreRefused) {
  if (!std::filesystem::exists(test::ssm_vocab_path())) GTEST_SKIP() << "tokenizer test data absent";
  ScratchModel file("nemotron_bad"), edited("nemotron_bad_edit");
  ASSERT_TRUE(synth_nemotron(file.path, "Q8_0"));
  auto model = Model::load(file.path);
  ASSERT_TRUE(model.is_ok()) << model.status().message();
  EXPECT_EQ((*model)->file().find_tensor("blk.0.ssm_out.weight")->type, gguf::GgmlType::Q8_0);  // rows of 96
  EXPECT_EQ((*model)->file().find_tensor("blk.2.ffn_down.weight")->type,
            gguf::GgmlType::F16);  // rows of 80: fallback
  EXPECT_EQ((*model)->file().find_tensor("blk.0.ssm_a")->type, gguf::GgmlType::F32);
  auto u32s = [](std::vector<uint32_t> v) {
    std::vector<gguf::Value> items;
    for (uint32_t x : v) items.push_back(gguf::Value::of_u32(x));
    return gguf::Value::of_array(gguf::ValueType::U32, std::move(items));
  };
  // Layer 1 with K/V heads and an FFN width: which one is it?
  Status s = load_with(file.path, edited.path, "nemotron_h.feed_forward_length", u32s({0, 80, 80, 0, 0, 80}));
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("layer 1"), std::string::npos) << s.message();
  // K/V heads that do not divide the query heads.
  s = load_with(file.path, edited.path, "nemotron_h.attention.head_count_kv", u32s({0, 3, 0, 0, 2, 0}));
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("layer 1"), std::string::npos) << s.message();
  // Five values for six layers.
  s = load_with(file.path, edited.path, "nemotron_h.attention.head_count_kv", u32s({0, 2, 0, 0, 2}));
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("one value per layer"), std::string::npos) << s.message();
  SynthOptions o;
  o.arch = "nemotron_h";
  o.n_embd = 48;
  o.n_layer = 5;
  o.n_head = 4;
  o.n_ff = 80;
  o.ssm_head_dim = 24;
  o.layer_pattern = "M*-M";  // four characters for five layers
  o.vocab_path = test::ssm_vocab_path();
  o.out_path = edited.path;
  s = validate_synth_options(o);
  EXPECT_NE(s.message().find("--layer-pattern"), std::string::npos) << s.message();
  o.layer_pattern = "M*-MX";
  s = validate_synth_options(o);
  EXPECT_NE(s.message().find("one character per layer"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace tern
