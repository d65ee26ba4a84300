// quantize_gguf on the converted stories260K (dim 64, ffn 172, 5 layers, 8
// heads / 4 KV heads, tied embeddings): exact tensor types per the rules,
// metadata copied, file_type set, the outputs load and generate, and quality
// ordered as the types' bits say.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>

#include "core/input_file.h"
#include "engine/generate.h"
#include "engine/perplexity.h"
#include "model/quantize.h"
#include "tokenizer/tokenizer.h"
#include "model_fixture.h"

namespace tern {
namespace {

using gguf::GgmlType;

std::string scratch(const std::string& name) {
  const std::string dir = std::string(TERN_BINARY_DIR) + "/test_models";
  std::filesystem::create_directories(dir);
  return dir + "/" + name + "." + std::to_string(::getpid()) + ".gguf";
}

// Quantizes `in` under `scheme` into a scratch file (removed at exit).
std::string quantize_to(const std::string& in, const std::string& scheme, int n_threads = 2, bool pure = false) {
  const std::string out = scratch("q_" + scheme + (pure ? "_pure" : "") + "_t" + std::to_string(n_threads) + "_" +
                                  std::filesystem::path(in).stem().string());
  const QuantScheme* s = find_quant_scheme(scheme);
  EXPECT_NE(s, nullptr);
  ThreadPool pool(n_threads);
  auto r = quantize_gguf({in, out, pure ? pure_scheme(*s) : *s}, pool);
  EXPECT_TRUE(r.is_ok()) << r.status().message();
  static std::vector<std::string> created;
  if (created.empty()) std::atexit([] {
      for (const auto& p : created) std::filesystem::remove(p);
    });
  created.push_back(out);
  return out;
}

// Quantized stories260K per scheme, made once.
const std::string& stories_as(const std::string& scheme) {
  static std::map<std::string, std::string> done;
  auto it = done.find(scheme);
  if (it == done.end()) it = done.emplace(scheme, quantize_to(test::stories_gguf(), scheme)).first;
  return it->second;
}

std::map<std::string, GgmlType> types_of(const gguf::GgufFile& f) {
  std::map<std::string, GgmlType> out;
  for (const auto& t : f.tensors()) out[t.name] = t.type;
  return out;
}

// Expected type per tensor: `per` maps a tensor kind (the name without "blk.N.")
// to its type, `layer` overrides single layers.
std::map<std::string, GgmlType> expected_types(std::map<std::string, GgmlType> per,
                                               const std::map<std::string, GgmlType>& layer = {}) {
  std::map<std::string, GgmlType> out;
  out["token_embd.weight"] = per.at("token_embd");
  out["output_norm.weight"] = GgmlType::F32;
  for (int i = 0; i < 5; ++i) {
    const std::string b = "blk." + std::to_string(i) + ".";
    for (const char* norm : {"attn_norm", "ffn_norm"}) out[b + norm + ".weight"] = GgmlType::F32;
    for (const char* t : {"attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down"}) {
      out[b + t + ".weight"] = per.at(t);
      if (auto it = layer.find(b + t); it != layer.end()) out[b + t + ".weight"] = it->second;
    }
  }
  return out;
}

bool same_value(const gguf::Value& a, const gguf::Value& b) {
  if (a.type() != b.type()) return false;
  if (const auto* aa = a.as_array()) {
    const auto* bb = b.as_array();
    if (aa->elem_type != bb->elem_type || aa->items.size() != bb->items.size()) return false;
    for (size_t i = 0; i < aa->items.size(); ++i)
      if (!same_value(aa->items[i], bb->items[i])) return false;
    return true;
  }
  if (a.as_string()) return *a.as_string() == *b.as_string();
  if (a.is_float()) return *a.as_f64() == *b.as_f64() || (std::isnan(*a.as_f64()) && std::isnan(*b.as_f64()));
  if (a.type() == gguf::ValueType::Bool) return *a.as_bool() == *b.as_bool();
  return a.is_integer() && (a.as_i64() == b.as_i64()) && (a.as_u64() == b.as_u64());
}

struct Case {
  const char* scheme;
  uint32_t file_type;
  std::map<std::string, GgmlType> types;
};

std::vector<Case> stories_cases() {
  using T = GgmlType;
  // Rows: 64 for every matrix but ffn_down (172, not a multiple of 32). The
  // embeddings are tied, so token_embd follows the output rule.
  return {
      {"F16", 1,
       expected_types({{"token_embd", T::F16}, {"attn_q", T::F16}, {"attn_k", T::F16}, {"attn_v", T::F16},
                       {"attn_output", T::F16}, {"ffn_gate", T::F16}, {"ffn_up", T::F16}, {"ffn_down", T::F16}})},
      // Q8_0: output rule keeps Q8_0; ffn_down has no 32-element fit: F16.
      {"Q8_0", 7,
       expected_types({{"token_embd", T::Q8_0}, {"attn_q", T::Q8_0}, {"attn_k", T::Q8_0}, {"attn_v", T::Q8_0},
                       {"attn_output", T::Q8_0}, {"ffn_gate", T::Q8_0}, {"ffn_up", T::Q8_0}, {"ffn_down", T::F16}})},
      // Q4_0: token_embd wants Q6_K (output rule), rows of 64 fall back to Q8_0.
      {"Q4_0", 2,
       expected_types({{"token_embd", T::Q8_0}, {"attn_q", T::Q4_0}, {"attn_k", T::Q4_0}, {"attn_v", T::Q4_0},
                       {"attn_output", T::Q4_0}, {"ffn_gate", T::Q4_0}, {"ffn_up", T::Q4_0}, {"ffn_down", T::F16}})},
      // Q4_K_M: token_embd Q8_0 (64 % 256 != 0 in the output rule); Q4_K -> Q5_0 for rows of 64;
      // use_more_bits(i, 5) = layers 2 and 4: attn_v Q6_K -> Q8_0; ffn_down Q6_K/Q4_K -> F16 (172).
      {"Q4_K_M", 15,
       expected_types({{"token_embd", T::Q8_0}, {"attn_q", T::Q5_0}, {"attn_k", T::Q5_0}, {"attn_v", T::Q5_0},
                       {"attn_output", T::Q5_0}, {"ffn_gate", T::Q5_0}, {"ffn_up", T::Q5_0}, {"ffn_down", T::F16}},
                      {{"blk.2.attn_v", T::Q8_0}, {"blk.4.attn_v", T::Q8_0}})},
  };
}

TEST(Quantize, StoriesTypesMetadataAndLoad) {
  TERN_REQUIRE_STORIES();
  auto in = gguf::GgufFile::open(test::stories_gguf());
  ASSERT_TRUE(in.is_ok());
  for (const Case& c : stories_cases()) {
    SCOPED_TRACE(c.scheme);
    const std::string& path = stories_as(c.scheme);
    auto out = gguf::GgufFile::open(path);
    ASSERT_TRUE(out.is_ok()) << out.status().message();
    EXPECT_EQ(types_of(*out), c.types);
    // Same tensors in the same order and shapes.
    ASSERT_EQ(out->tensors().size(), in->tensors().size());
    for (size_t i = 0; i < in->tensors().size(); ++i) {
      EXPECT_EQ(out->tensors()[i].name, in->tensors()[i].name);
      EXPECT_EQ(out->tensors()[i].dims, in->tensors()[i].dims);
    }
    // Every key copied with its value and in its place; file_type and quantization_version set.
    for (size_t i = 0; i < in->metadata().size(); ++i) {
      const auto& [key, value] = in->metadata()[i];
      ASSERT_LT(i, out->metadata().size());
      EXPECT_EQ(out->metadata()[i].first, key);
      if (key != "general.file_type") {
        EXPECT_TRUE(same_value(out->metadata()[i].second, value)) << key;
      }
    }
    EXPECT_EQ(*out->get_u64("general.file_type"), c.file_type);
    EXPECT_EQ(*out->get_u64("general.quantization_version"), 2u);
    EXPECT_EQ(out->find("general.quantization_version")->type(), gguf::ValueType::U32);
    EXPECT_EQ(out->metadata().size(), in->metadata().size() + (in->find("general.quantization_version") ? 0 : 1));
    // Norms are copied byte for byte.
    const auto* norm_in = in->find_tensor("blk.3.ffn_norm.weight");
    const auto* norm_out = out->find_tensor("blk.3.ffn_norm.weight");
    EXPECT_EQ(std::memcmp(norm_in->data, norm_out->data, norm_in->n_bytes), 0);
    auto model = Model::load(path);
    ASSERT_TRUE(model.is_ok()) << model.status().message();
    EXPECT_EQ(model->get()->hparams().n_layer, 5);
  }
}

struct Loaded {
  std::unique_ptr<Model> model;
  std::unique_ptr<Tokenizer> tokenizer;
};

Loaded load(const std::string& path) {
  Loaded l;
  auto m = Model::load(path);
  EXPECT_TRUE(m.is_ok()) << m.status().message();
  l.model = std::move(m).value();
  auto t = Tokenizer::from_gguf(l.model->file());
  EXPECT_TRUE(t.is_ok()) << t.status().message();
  l.tokenizer = std::move(t).value();
  return l;
}

std::vector<TokenId> greedy_tokens(const std::string& path, int n) {
  auto engine = Engine::create(single_sequence_config(path, 0, 2));
  EXPECT_TRUE(engine.is_ok()) << engine.status().message();
  if (!engine) return {};
  GenerateOptions o;
  o.sampling.temperature = 0.0f;
  o.max_tokens = n;
  auto r = generate(**engine, {1}, o);
  EXPECT_TRUE(r.is_ok()) << r.status().message();
  return r.is_ok() ? r->tokens : std::vector<TokenId>{};
}

double perplexity_of(const std::string& path) {
  auto l = load(path);
  auto text = read_file(std::string(TERN_SHARED_DIR) + "/data/text/tinystories_val.txt");
  EXPECT_TRUE(text.is_ok());
  if (!text) return 0;
  // The first ~40 KB give eight windows of 256 tokens.
  const std::vector<TokenId> tokens = l.tokenizer->encode(text->substr(0, 40000), true, false);
  PerplexityOptions o;
  o.n_ctx = 256;
  o.max_windows = 8;
  o.add_bos = l.tokenizer->add_bos();
  o.bos = l.tokenizer->bos_id();
  auto r = compute_perplexity(*l.model, tokens, o);
  EXPECT_TRUE(r.is_ok()) << r.status().message();
  EXPECT_EQ(r->n_windows, 8);
  return r.is_ok() ? r->perplexity : 0.0;
}

TEST(Quantize, GreedyQ8_0AndF16FollowF32) {
  TERN_REQUIRE_STORIES();
  // Assertion: the first 20 greedy tokens from BOS are identical. 8-bit weights
  // with per-32 scales move logits by ~1e-3 of their spread, far below the
  // top-2 gaps of a model this confident on its own training domain.
  const auto f32 = greedy_tokens(test::stories_gguf(), 20);
  ASSERT_EQ(f32.size(), 20u);
  EXPECT_EQ(greedy_tokens(stories_as("Q8_0"), 20), f32);
  EXPECT_EQ(greedy_tokens(stories_as("F16"), 20), f32);
}

TEST(Quantize, PerplexityOrderFollowsBits) {
  TERN_REQUIRE_STORIES();
  if (!std::filesystem::exists(std::string(TERN_SHARED_DIR) + "/data/text/tinystories_val.txt"))
    GTEST_SKIP() << "tinystories_val.txt absent";
  const double f32 = perplexity_of(test::stories_gguf());
  const double f16 = perplexity_of(stories_as("F16"));
  const double q8 = perplexity_of(stories_as("Q8_0"));
  const double q4km = perplexity_of(stories_as("Q4_K_M"));
  const double q4 = perplexity_of(stories_as("Q4_0"));
  std::printf("perplexity (8 x 256 tokens): F32 %.4f F16 %.4f Q8_0 %.4f Q4_K_M %.4f Q4_0 %.4f\n", f32, f16, q8, q4km, q4);
  // Assertions (measured: F32 3.580, F16 3.579, Q8_0 3.582, Q4_K_M 3.566, Q4_0 3.838):
  // F16 and Q8_0 within 0.5% / 1% of F32. Q4_K_M within 3%: on this model most
  // of its matrices fall back to Q5_0 / Q8_0 / F16, so it is ~6 bits and can
  // land on either side of F32. Q4_0 is measurably worse (> 2%) but within 25%.
  EXPECT_NEAR(f16 / f32, 1.0, 0.005);
  EXPECT_NEAR(q8 / f32, 1.0, 0.01);
  EXPECT_NEAR(q4km / f32, 1.0, 0.03);
  EXPECT_GT(q4 / f32, 1.02) << "4-bit weights must cost something";
  EXPECT_LT(q4 / f32, 1.25);
  // The order F16 <= Q8_0 <= Q4_0, with slack for noise between nearly equal figures.
  EXPECT_LE(f16, q8 * 1.005);
  EXPECT_LT(q8, q4);
}

TEST(Quantize, BytesDoNotDependOnThreads) {
  TERN_REQUIRE_STORIES();
  const std::string a = quantize_to(test::stories_gguf(), "Q4_K_M", 1);
  const std::string b = quantize_to(test::stories_gguf(), "Q4_K_M", 3);
  auto ra = read_file(a), rb = read_file(b);
  ASSERT_TRUE(ra.is_ok() && rb.is_ok());
  EXPECT_TRUE(*ra == *rb);
}

TEST(Quantize, RequantizeFromQuantizedAndFloatInputs) {
  TERN_REQUIRE_STORIES();
  // Q8_0 -> Q4_0: quantized input is decoded then re-encoded; types follow the
  // rules for Q4_0 exactly as from F32 (ffn_down is F16 in both: copied).
  const std::string q4_from_q8 = quantize_to(stories_as("Q8_0"), "Q4_0");
  auto f = gguf::GgufFile::open(q4_from_q8);
  ASSERT_TRUE(f.is_ok());
  EXPECT_EQ(types_of(*f), stories_cases()[2].types);
  EXPECT_TRUE(Model::load(q4_from_q8).is_ok());
  // Q4_K_M -> F32: every decoder involved (Q8_0, Q5_0, F16).
  const std::string back = quantize_to(stories_as("Q4_K_M"), "F32");
  auto g = gguf::GgufFile::open(back);
  ASSERT_TRUE(g.is_ok());
  for (const auto& t : g->tensors()) EXPECT_EQ(t.type, GgmlType::F32) << t.name;
  EXPECT_EQ(*g->get_u64("general.file_type"), 0u);
  EXPECT_EQ(greedy_tokens(back, 20), greedy_tokens(stories_as("Q4_K_M"), 20));
  // F16 -> F16 copies every tensor byte for byte.
  const std::string again = quantize_to(stories_as("F16"), "F16");
  auto x = read_file(again), y = read_file(stories_as("F16"));
  ASSERT_TRUE(x.is_ok() && y.is_ok());
  EXPECT_TRUE(*x == *y);
}

TEST(Quantize, PureKeepsOneTypeUpToTheFallback) {
  TERN_REQUIRE_STORIES();
  auto f = gguf::GgufFile::open(quantize_to(test::stories_gguf(), "Q8_0", 2, true));
  ASSERT_TRUE(f.is_ok());
  for (const auto& t : f->tensors()) {
    const GgmlType want = t.n_dims == 1 ? GgmlType::F32 : t.dims[0] == 172 ? GgmlType::F16 : GgmlType::Q8_0;
    EXPECT_EQ(t.type, want) << t.name;
  }
}

TEST(Quantize, Errors) {
  ThreadPool pool(1);
  const QuantScheme& q8 = *find_quant_scheme("Q8_0");
  auto missing = quantize_gguf({"/nonexistent/in.gguf", scratch("never"), q8}, pool);
  ASSERT_FALSE(missing.is_ok());
  EXPECT_NE(missing.status().message().find("cannot open"), std::string::npos) << missing.status().message();
  TERN_REQUIRE_STORIES();
  auto bad_out = quantize_gguf({test::stories_gguf(), "/nonexistent-dir/out.gguf", q8}, pool);
  ASSERT_FALSE(bad_out.is_ok());
  EXPECT_EQ(bad_out.status().kind(), ErrorKind::IoError);
}

}  // namespace
}  // namespace tern
