// W8A8 files (docs/quantize.md): what tern quantize writes (I8 quants and
// per-row scales that follow the definition), the SmoothQuant fold (the
// smoothed model before rounding computes what the original does), the whole
// model against F32 on held-out text, and the errors for files that cannot be
// W8A8 or lack their scales. FP8 files (F8_E4M3, F8_E5M2) share the layout
// (codes plus row scales) and get the same checks.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "core/fp8.h"
#include "core/input_file.h"
#include "engine/calibrate.h"
#include "engine/perplexity.h"
#include "gguf/reader.h"
#include "gguf/writer.h"
#include "model/awq.h"
#include "model/model.h"
#include "model/quantize.h"
#include "quant/quant.h"
#include "tokenizer/tokenizer.h"
#include "model_fixture.h"

namespace tern {
namespace {

std::string scratch(const std::string& name) {
  const std::string dir = std::string(TERN_BINARY_DIR) + "/test_models";
  std::filesystem::create_directories(dir);
  return dir + "/w8a8_" + name + "." + std::to_string(::getpid()) + ".gguf";
}

// Calibration on the first half of the TinyStories text (the evaluation below reads the second).
std::string calibration_file() {
  static const std::string path = [] {
    auto all = read_file(std::string(TERN_SHARED_DIR) + "/data/text/tinystories_val.txt");
    const std::string text_path = scratch("calib_text") + ".txt";
    std::ofstream(text_path, std::ios::binary) << all->substr(0, all->find("\n\n", all->size() / 2) + 2);
    CalibrationOptions o;
    o.model_path = test::stories_gguf();
    o.text_path = text_path;
    o.n_ctx = 64;
    o.n_chunks = 16;
    o.n_threads = 2;
    auto run = calibrate(o);
    EXPECT_TRUE(run) << run.status().message();
    const std::string p = scratch("calib");
    EXPECT_TRUE(run && write_calibration(run->calibration, p));
    std::filesystem::remove(text_path);
    return p;
  }();
  return path;
}

std::vector<TokenId> eval_tokens(const Model& m) {
  auto all = read_file(std::string(TERN_SHARED_DIR) + "/data/text/tinystories_val.txt");
  auto tok = Tokenizer::from_gguf(m.file());
  return (*tok)->encode(all->substr(all->find("\n\n", all->size() / 2) + 2), true, false);
}

std::vector<std::vector<float>> logits(const Model& m, const std::vector<TokenId>& tokens) {
  PerplexityOptions po;
  po.n_ctx = 128;
  po.max_windows = 4;
  po.bos = 1;
  std::vector<std::vector<float>> out;
  EXPECT_TRUE(compute_perplexity(m, tokens, po, {}, [&](std::span<const float> l, TokenId) {
    out.emplace_back(l.begin(), l.end());
    return Status::ok();
  }));
  return out;
}

Result<QuantizeReport> quantize(const std::string& out, const char* scheme, QuantMethod method,
                                std::optional<float> alpha = 0.5f, const std::string& in = test::stories_gguf()) {
  QuantizeOptions o{in, out, *find_quant_scheme(scheme), method};
  std::unique_ptr<CalibrationSource> src;
  if (method != QuantMethod::Rtn) {
    auto s = CalibrationSource::for_method(method, o.scheme, calibration_file(), in, "", 1ull << 30, 2);
    if (!s) return s.status();
    src = std::move(*s);
    o.inputs = [&](const std::string& key) { return src->get(key); };
  }
  o.sq_alpha = alpha;
  ThreadPool pool(2);
  return quantize_gguf(o, pool);
}

TEST(W8a8Quantize, QuantsAndScalesFollowTheDefinition) {
  TERN_REQUIRE_STORIES();
  const std::string path = scratch("rtn");
  ASSERT_TRUE(quantize(path, "W8A8", QuantMethod::Rtn));
  auto q = gguf::GgufFile::open(path);
  auto f = gguf::GgufFile::open(test::stories_gguf());
  ASSERT_TRUE(q && f);
  EXPECT_EQ(q->find_tensor("token_embd.weight")->type, gguf::GgmlType::Q8_0);  // embeddings and head: Q8_0
  EXPECT_EQ(q->find_tensor("blk.0.attn_norm.weight")->type, gguf::GgmlType::F32);
  int n_checked = 0;
  for (const char* name : {"blk.0.attn_q.weight", "blk.2.attn_v.weight", "blk.4.ffn_down.weight", "blk.3.ffn_up.weight"}) {
    const gguf::TensorInfo* w = q->find_tensor(name);
    const std::string base = std::string(name).substr(0, std::strlen(name) - 7);
    const gguf::TensorInfo* s = q->find_tensor(base + ".scale");
    const gguf::TensorInfo* orig = f->find_tensor(name);
    ASSERT_TRUE(w && s && orig) << name;
    ASSERT_EQ(w->type, gguf::GgmlType::I8);
    ASSERT_EQ(s->type, gguf::GgmlType::F32);
    ASSERT_EQ(s->n_dims, 1u);
    ASSERT_EQ(s->dims[0], w->dims[1]);
    const int64_t n = static_cast<int64_t>(w->dims[0]);
    std::vector<float> row(static_cast<size_t>(n));
    for (int64_t r = 0; r < static_cast<int64_t>(w->dims[1]); ++r) {
      quant::traits(orig->type)->to_float(orig->data + quant::row_bytes(*quant::traits(orig->type), n) * r, row.data(), n);
      float amax = 0;
      for (float v : row) amax = std::max(amax, std::fabs(v));
      float d;
      std::memcpy(&d, s->data + 4 * r, 4);
      ASSERT_EQ(d, amax / 127.0f) << name << " row " << r;
      for (int64_t i = 0; i < n; ++i) {
        const auto qi = static_cast<int8_t>(w->data[r * n + i]);
        ASSERT_EQ(qi, static_cast<int>(std::nearbyint(row[i] * (1.0f / d)))) << name << " row " << r << " col " << i;
        ASSERT_LE(std::fabs(qi * d - row[i]), d * 0.5f + 1e-7f);
      }
      ++n_checked;
    }
  }
  EXPECT_GT(n_checked, 100);
  std::filesystem::remove(path);
}

TEST(W8a8Quantize, SmoothQuantFoldBeforeRoundingComputesTheSameLogits) {
  TERN_REQUIRE_STORIES();
  const std::string path = scratch("fold");
  ASSERT_TRUE(quantize(path, "F32", QuantMethod::SmoothQuant, 0.8f));
  auto a = Model::load(test::stories_gguf());
  auto b = Model::load(path);
  ASSERT_TRUE(a && b);
  int n_changed = 0;
  for (const auto& g : awq_groups((*a)->file())) {
    const gguf::TensorInfo* x = (*a)->file().find_tensor(g.producer);
    const gguf::TensorInfo* y = (*b)->file().find_tensor(g.producer);
    n_changed += std::memcmp(x->data, y->data, x->n_bytes) != 0;
  }
  EXPECT_EQ(n_changed, 15);  // every group of every layer was smoothed
  const auto tokens = eval_tokens(**a);
  const auto la = logits(**a, tokens), lb = logits(**b, tokens);
  ASSERT_EQ(la.size(), lb.size());
  double max_diff = 0;
  for (size_t r = 0; r < la.size(); ++r)
    for (size_t i = 0; i < la[r].size(); ++i) max_diff = std::max(max_diff, std::fabs(static_cast<double>(la[r][i]) - lb[r][i]));
  EXPECT_LT(max_diff, 2e-3);  // f32 rounding of x/s*s; a wrong fold moves logits by whole units
  std::filesystem::remove(path);
}

// Mean KL(F32 || model) and top-1 agreement over the evaluation rows.
std::pair<double, double> kl_top1(const std::vector<std::vector<float>>& base, const std::vector<std::vector<float>>& m) {
  double kl = 0, agree = 0;
  for (size_t r = 0; r < base.size(); ++r) {
    auto logp = [](const std::vector<float>& l) {
      double mx = *std::max_element(l.begin(), l.end()), z = 0;
      for (float v : l) z += std::exp(v - mx);
      std::vector<double> out(l.size());
      for (size_t i = 0; i < l.size(); ++i) out[i] = l[i] - mx - std::log(z);
      return out;
    };
    const auto p = logp(base[r]), q = logp(m[r]);
    for (size_t i = 0; i < p.size(); ++i) kl += std::exp(p[i]) * (p[i] - q[i]);
    agree += std::max_element(base[r].begin(), base[r].end()) - base[r].begin() ==
             std::max_element(m[r].begin(), m[r].end()) - m[r].begin();
  }
  return {kl / base.size(), agree / base.size()};
}

// The first window's rows of `lm` (logits() of m: 128-token windows) equal
// the same rows computed one token at a time.
void expect_rows_as_decoded_alone(const Model& m, const std::vector<TokenId>& tokens,
                                  const std::vector<std::vector<float>>& lm, const std::string& what) {
  PerplexityOptions po;
  po.n_ctx = 128;
  po.max_windows = 1;
  po.bos = 1;
  po.n_batch = 1;
  size_t row = 0;
  ASSERT_TRUE(compute_perplexity(m, tokens, po, {}, [&](std::span<const float> l, TokenId) {
    for (size_t i = 0; i < l.size(); ++i) EXPECT_EQ(l[i], lm[row][i]) << what << " row " << row;
    ++row;
    return Status::ok();
  }));
  EXPECT_EQ(row, lm.size() / 4);
}

TEST(W8a8Model, CloseToF32OnHeldOutTextAndIndependentOfTheBatch) {
  TERN_REQUIRE_STORIES();
  const std::string rtn = scratch("model_rtn"), sq = scratch("model_sq");
  ASSERT_TRUE(quantize(rtn, "W8A8", QuantMethod::Rtn));
  ASSERT_TRUE(quantize(sq, "W8A8", QuantMethod::SmoothQuant));
  auto base = Model::load(test::stories_gguf());
  ASSERT_TRUE(base);
  const auto tokens = eval_tokens(**base);
  const auto lb = logits(**base, tokens);
  for (const std::string& path : {rtn, sq}) {
    auto m = Model::load(path);
    ASSERT_TRUE(m) << m.status().message();
    const auto lm = logits(**m, tokens);
    ASSERT_EQ(lm.size(), lb.size());
    const auto [kl, top1] = kl_top1(lb, lm);
    // Q8_0 on these rows: KL ~0.0008; W8A8 ~0.002 (per-token activations are coarser than Q8_0's blocks of 32).
    EXPECT_GT(kl, 1e-5) << path;  // the activations really are rounded
    EXPECT_LT(kl, 0.006) << path;
    EXPECT_GT(top1, 0.95) << path;
    // A row of a 128-token window equals the same row decoded alone (per-token activation scales).
    expect_rows_as_decoded_alone(**m, tokens, lm, path);
    // The reference backend: the same weights (quants times row scales) against f32 activations.
    auto r = Model::load(path, backend::make_backend(backend::BackendKind::Ref, 1));
    ASSERT_TRUE(r);
    const auto lr = logits(**r, tokens);
    const auto [kl_ref, top1_ref] = kl_top1(lr, lm);
    EXPECT_LT(kl_ref, 0.004) << path;  // only the activations' rounding differs
    EXPECT_GT(top1_ref, 0.95) << path;
  }
  std::filesystem::remove(rtn);
  std::filesystem::remove(sq);
}

TEST(W8a8Errors, MissingScalesRequantizingAndOtherSchemesAreRefused) {
  TERN_REQUIRE_STORIES();
  const std::string w8 = scratch("err_src");
  ASSERT_TRUE(quantize(w8, "W8A8", QuantMethod::Rtn));
  // The same file without one scale tensor.
  auto f = gguf::GgufFile::open(w8);
  ASSERT_TRUE(f);
  const std::string broken = scratch("err_noscale");
  {
    gguf::GgufStreamWriter wr;
    for (const auto& [k, v] : f->metadata()) wr.set(k, v);
    for (const auto& t : f->tensors()) {
      if (t.name == "blk.1.attn_k.scale") continue;
      ASSERT_TRUE(wr.declare_tensor(t.name, t.type, std::vector<uint64_t>(t.dims.begin(), t.dims.begin() + t.n_dims)));
    }
    ASSERT_TRUE(wr.open(broken));
    for (const auto& t : f->tensors()) {
      if (t.name == "blk.1.attn_k.scale") continue;
      ASSERT_TRUE(wr.write_tensor({t.data, t.n_bytes}));
    }
    ASSERT_TRUE(wr.commit());
  }
  auto m = Model::load(broken);
  ASSERT_FALSE(m);
  EXPECT_NE(m.status().message().find("blk.1.attn_k.scale"), std::string::npos) << m.status().message();
  // Re-quantizing W8A8 would read quants without their scales.
  auto r = quantize(scratch("err_requant"), "Q4_0", QuantMethod::Rtn, 0.5f, w8);
  ASSERT_FALSE(r);
  EXPECT_NE(r.status().message().find("already W8A8"), std::string::npos) << r.status().message();
  auto s = quantize(scratch("err_sq_q4"), "Q4_0", QuantMethod::SmoothQuant);
  ASSERT_FALSE(s);
  EXPECT_NE(s.status().message().find("W8A8"), std::string::npos);
  auto g = quantize(scratch("err_gptq"), "W8A8", QuantMethod::Gptq);
  ASSERT_FALSE(g);
  std::filesystem::remove(w8);
  std::filesystem::remove(broken);
}

// FP8: per row d = max|w| / the format's largest finite value, codes the
// nearest-even FP8 of w / d; embeddings and head Q8_0 as for W8A8.
TEST(Fp8Quantize, CodesAndScalesFollowTheDefinition) {
  TERN_REQUIRE_STORIES();
  auto f = gguf::GgufFile::open(test::stories_gguf());
  ASSERT_TRUE(f);
  for (const char* scheme : {"F8_E4M3", "F8_E5M2"}) {
    const bool e4m3 = std::string(scheme) == "F8_E4M3";
    const std::string path = scratch(scheme);
    ASSERT_TRUE(quantize(path, scheme, QuantMethod::Rtn));
    auto q = gguf::GgufFile::open(path);
    ASSERT_TRUE(q);
    EXPECT_EQ(q->find_tensor("token_embd.weight")->type, gguf::GgmlType::Q8_0);
    int n_checked = 0;
    for (const char* name : {"blk.0.attn_q.weight", "blk.4.ffn_down.weight", "blk.3.ffn_up.weight"}) {
      const gguf::TensorInfo* w = q->find_tensor(name);
      const gguf::TensorInfo* s = q->find_tensor(std::string(name).substr(0, std::strlen(name) - 7) + ".scale");
      const gguf::TensorInfo* orig = f->find_tensor(name);
      ASSERT_TRUE(w && s && orig) << name;
      ASSERT_EQ(w->type, e4m3 ? gguf::GgmlType::F8_E4M3 : gguf::GgmlType::F8_E5M2);
      ASSERT_EQ(s->dims[0], w->dims[1]);
      const int64_t n = static_cast<int64_t>(w->dims[0]);
      std::vector<float> row(static_cast<size_t>(n));
      for (int64_t r = 0; r < static_cast<int64_t>(w->dims[1]); ++r, ++n_checked) {
        quant::traits(orig->type)->to_float(orig->data + quant::row_bytes(*quant::traits(orig->type), n) * r, row.data(), n);
        float amax = 0;
        for (float v : row) amax = std::max(amax, std::fabs(v));
        float d;
        std::memcpy(&d, s->data + 4 * r, 4);
        ASSERT_EQ(d, amax / (e4m3 ? 448.0f : 57344.0f)) << name << " row " << r;
        for (int64_t i = 0; i < n; ++i) {
          const uint8_t c = w->data[r * n + i];
          ASSERT_EQ(c, e4m3 ? float_to_fp8_e4m3(row[i] / d) : float_to_fp8_e5m2(row[i] / d)) << name << " " << r << " " << i;
          const float v = (e4m3 ? fp8_e4m3_to_float(c) : fp8_e5m2_to_float(c)) * d;
          // Relative error at most half a unit in the last place: 2^-4 (E4M3) or 2^-3 (E5M2), above the subnormals.
          ASSERT_LE(std::fabs(v - row[i]), std::fabs(row[i]) * (e4m3 ? 0.0625f : 0.125f) + d * 0.01f) << name;
        }
      }
    }
    EXPECT_GT(n_checked, 100);
    std::filesystem::remove(path);
  }
}

TEST(Fp8Model, CloseToF32OnHeldOutTextAcrossLevelsAndBatches) {
  TERN_REQUIRE_STORIES();
  auto base = Model::load(test::stories_gguf());
  ASSERT_TRUE(base);
  const auto tokens = eval_tokens(**base);
  const auto lb = logits(**base, tokens);
  // KL against F32 measured on these windows: E4M3 0.0071, E5M2 0.028 (a mantissa bit less); Q8_0 ~0.0008
  // (3 mantissa bits per weight against Q8_0's 7 bits in blocks of 32). Top-1: 0.95, 0.92.
  struct Bound {
    const char* scheme;
    double max_kl, min_top1;
  };
  for (const auto& [scheme, max_kl, min_top1] : {Bound{"F8_E4M3", 0.012, 0.93}, Bound{"F8_E5M2", 0.045, 0.88}}) {
    const std::string path = scratch(std::string("model_") + scheme);
    ASSERT_TRUE(quantize(path, scheme, QuantMethod::Rtn));
    auto m = Model::load(path);
    ASSERT_TRUE(m) << m.status().message();
    const auto lm = logits(**m, tokens);
    ASSERT_EQ(lm.size(), lb.size());
    const auto [kl, top1] = kl_top1(lb, lm);
    EXPECT_GT(kl, 1e-6) << scheme;  // the weights really are rounded
    EXPECT_LT(kl, max_kl) << scheme;
    EXPECT_GT(top1, min_top1) << scheme;
    // The reference backend (codes decoded by the traits, times the row scales) computes the same model;
    // what differs is the Q8_0 head's activations (Q8_0 blocks here, f32 there): KL 1.7e-4.
    auto r = Model::load(path, backend::make_backend(backend::BackendKind::Ref, 1));
    ASSERT_TRUE(r);
    const auto [kl_ref, top1_ref] = kl_top1(logits(**r, tokens), lm);
    EXPECT_LT(kl_ref, 1e-3) << scheme;
    EXPECT_GT(top1_ref, 0.99) << scheme;
    // A row of a 128-token window equals the same row decoded alone.
    expect_rows_as_decoded_alone(**m, tokens, lm, scheme);
    // Re-quantizing FP8 would read codes without their scales; calibrated methods are refused.
    auto again = quantize(scratch("fp8_requant"), "Q4_0", QuantMethod::Rtn, 0.5f, path);
    ASSERT_FALSE(again);
    EXPECT_NE(again.status().message().find(std::string("already ") + scheme), std::string::npos)
        << again.status().message();
    auto g = quantize(scratch("fp8_gptq"), scheme, QuantMethod::Gptq);
    ASSERT_FALSE(g);
    EXPECT_NE(g.status().message().find("rtn only"), std::string::npos) << g.status().message();
    std::filesystem::remove(path);
  }
}

}  // namespace
}  // namespace tern
