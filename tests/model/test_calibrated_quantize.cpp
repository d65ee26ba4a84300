// Calibration (engine/calibrate.h, model/calibration.h) and calibrated
// quantization (quantize_gguf --method imatrix|gptq) on stories260K, with
// calibration and evaluation on the two disjoint halves of TinyStories text.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <optional>
#include <set>
#include <filesystem>
#include <fstream>

#include "core/input_file.h"
#include "engine/auto_mix.h"
#include "engine/calibrate.h"
#include "engine/perplexity.h"
#include "gguf/reader.h"
#include "model/awq.h"
#include "model/model.h"
#include "model/quantize.h"
#include "quant/quant.h"
#include "tokenizer/tokenizer.h"
#include "model_fixture.h"
#include "split_text.h"

namespace tern {
namespace {

std::string scratch_path(const std::string& name) {
  const std::string dir = std::string(TERN_BINARY_DIR) + "/test_models";
  std::filesystem::create_directories(dir);
  return dir + "/" + name + "." + std::to_string(::getpid());
}

const test::SplitText& split() {
  static const test::SplitText s("calibrated_quantize");
  return s;
}

constexpr int kCtx = 64;
constexpr int kChunks = 16;

CalibrationOptions options(std::set<std::string> hessians = {}) {
  CalibrationOptions o;
  o.model_path = test::stories_gguf();
  o.text_path = split().calib_path;
  o.n_ctx = kCtx;
  o.n_chunks = kChunks;
  o.n_threads = 2;
  o.hessians = std::move(hessians);
  return o;
}

TEST(Calibrate, Layer0InputStatisticsMatchAnIndependentComputation) {
  TERN_REQUIRE_STORIES();
  ASSERT_FALSE(split().calib.empty());
  auto run = calibrate(options({"blk.0.attn_q.weight"}));
  ASSERT_TRUE(run) << run.status().message();
  const Calibration& c = run->calibration;
  EXPECT_EQ(c.text.n_chunks, kChunks);
  EXPECT_EQ(c.text.n_tokens, kCtx * kChunks);
  // One record per distinct input: Q/K/V share theirs, gate/up theirs.
  ASSERT_NE(c.find("blk.0.attn_q.weight"), nullptr);
  EXPECT_EQ(c.find("blk.0.attn_q.weight"), c.find("blk.0.attn_k.weight"));
  EXPECT_EQ(c.find("blk.0.attn_q.weight"), c.find("blk.0.attn_v.weight"));
  EXPECT_EQ(c.find("blk.4.ffn_gate.weight"), c.find("blk.4.ffn_up.weight"));
  EXPECT_NE(c.find("blk.4.ffn_gate.weight"), c.find("blk.4.ffn_down.weight"));
  ASSERT_NE(c.find("blk.4.ffn_down.weight"), nullptr);
  EXPECT_EQ(c.find("blk.4.ffn_down.weight")->n_cols, 172);
  ASSERT_NE(c.find("token_embd.weight"), nullptr);  // tied: the output matmul
  EXPECT_GT(c.find("token_embd.weight")->count, 0);
  EXPECT_LT(c.find("token_embd.weight")->count, kCtx * kChunks);  // only the scored rows
  EXPECT_TRUE(c.find("blk.1.attn_q.weight")->h.empty());           // H only where asked

  // Layer 0's attention input is rmsnorm(embedding) * attn_norm: recompute it in double.
  auto file = gguf::GgufFile::open(test::stories_gguf());
  ASSERT_TRUE(file);
  auto tok = Tokenizer::from_gguf(*file);
  ASSERT_TRUE(tok);
  std::vector<TokenId> tokens = (*tok)->encode(split().calib, true, false);
  const gguf::TensorInfo* emb = file->find_tensor("token_embd.weight");
  const gguf::TensorInfo* norm = file->find_tensor("blk.0.attn_norm.weight");
  ASSERT_TRUE(emb && norm);
  const int n = static_cast<int>(emb->dims[0]);
  std::vector<float> g(n), e(n);
  quant::traits(norm->type)->to_float(norm->data, g.data(), n);
  const double eps = *file->get_f64("llama.attention.layer_norm_rms_epsilon");
  std::vector<double> sum_x2(n, 0.0);
  for (int w = 0; w < kChunks; ++w)
    for (int j = 0; j < kCtx; ++j) {
      const TokenId t = j == 0 ? (*tok)->bos_id() : tokens[static_cast<size_t>(w) * kCtx + j];
      const size_t row = quant::row_bytes(*quant::traits(emb->type), n);
      quant::traits(emb->type)->to_float(emb->data + static_cast<size_t>(t) * row, e.data(), n);
      double ms = 0;
      for (float v : e) ms += static_cast<double>(v) * v / n;
      const double inv = 1.0 / std::sqrt(ms + eps);
      for (int i = 0; i < n; ++i) {
        const double x = e[i] * inv * g[i];
        sum_x2[i] += x * x;
      }
    }
  const InputStats& s = *c.find("blk.0.attn_q.weight");
  ASSERT_EQ(s.count, kCtx * kChunks);
  ASSERT_EQ(s.h.size(), static_cast<size_t>(n * n));
  for (int i = 0; i < n; ++i) {
    EXPECT_NEAR(s.sum_x2[i], sum_x2[i], 1e-4 * sum_x2[i]) << "column " << i;
    EXPECT_DOUBLE_EQ(s.h[static_cast<size_t>(i) * n + i], s.sum_x2[i]);
    for (int j = 0; j < i; ++j) EXPECT_EQ(s.h[static_cast<size_t>(i) * n + j], s.h[static_cast<size_t>(j) * n + i]);
    EXPECT_LE(s.sum_abs[i] * s.sum_abs[i], s.sum_x2[i] * s.count * (1 + 1e-9));  // Cauchy-Schwarz
    EXPECT_GE(static_cast<double>(s.max_abs[i]) * s.max_abs[i] * s.count, s.sum_x2[i] * (1 - 1e-6));
  }
}

TEST(Calibrate, FileRoundTripsAndOtherFilesAreRefused) {
  TERN_REQUIRE_STORIES();
  auto run = calibrate(options());
  ASSERT_TRUE(run) << run.status().message();
  const std::string path = scratch_path("calib") + ".gguf";
  ASSERT_TRUE(write_calibration(run->calibration, path));
  auto back = read_calibration(path);
  ASSERT_TRUE(back) << back.status().message();
  std::filesystem::remove(path);
  EXPECT_EQ(back->text.path, split().calib_path);
  EXPECT_EQ(back->text.hash, fnv1a64(split().calib));
  EXPECT_EQ(back->text.bytes, split().calib.size());
  EXPECT_EQ(back->text.n_tokens, kCtx * kChunks);
  EXPECT_EQ(back->fingerprints, run->calibration.fingerprints);
  ASSERT_EQ(back->inputs.size(), run->calibration.inputs.size());
  for (const auto& [key, s] : run->calibration.inputs) {
    const InputStats* b = back->find(key);
    ASSERT_NE(b, nullptr) << key;
    EXPECT_EQ(b->count, s->count);
    for (int64_t i = 0; i < s->n_cols; ++i) EXPECT_EQ(b->sum_x2[i], static_cast<float>(s->sum_x2[i])) << key;
  }
  auto not_calib = read_calibration(test::stories_gguf());
  ASSERT_FALSE(not_calib);
  EXPECT_NE(not_calib.status().message().find("not a tern calibration file"), std::string::npos);
}

TEST(Calibrate, EvaluationTextOverlappingTheCalibrationIsRefused) {
  TERN_REQUIRE_STORIES();
  Calibration c;
  c.text.path = split().calib_path;
  c.fingerprints = text_fingerprints(split().calib);
  // The halves share no long runs of text (TinyStories' repeated phrases are short).
  EXPECT_TRUE(check_disjoint(c, split().eval, split().eval_path));
  EXPECT_LT(overlap_bytes(c, split().eval), split().eval.size() / 1000);
  // Evaluation text that contains a slice of the calibration text is refused, naming both.
  const std::string mixed = split().eval.substr(0, 100000) + split().calib.substr(5000, 20000);
  const Status s = check_disjoint(c, mixed, "mixed.txt");
  ASSERT_FALSE(s);
  EXPECT_NE(s.message().find("mixed.txt"), std::string::npos);
  EXPECT_NE(s.message().find(split().calib_path), std::string::npos);
  EXPECT_GT(overlap_bytes(c, mixed), 15000u);
}

// KL(base || quantized) over the scored rows of the held-out text.
double mean_kl(const Model& base, const Model& q, const std::vector<TokenId>& tokens, const PerplexityOptions& po) {
  std::vector<std::vector<double>> base_p;
  auto softmax = [](std::span<const float> l) {
    double m = l[0];
    for (float v : l) m = std::max(m, static_cast<double>(v));
    std::vector<double> p(l.size());
    double z = 0;
    for (size_t i = 0; i < l.size(); ++i) z += p[i] = std::exp(l[i] - m);
    for (double& v : p) v /= z;
    return p;
  };
  EXPECT_TRUE(compute_perplexity(base, tokens, po, {}, [&](std::span<const float> l, TokenId) {
    base_p.push_back(softmax(l));
    return Status::ok();
  }));
  size_t row = 0;
  double kl = 0;
  EXPECT_TRUE(compute_perplexity(q, tokens, po, {}, [&](std::span<const float> l, TokenId) {
    const auto p = softmax(l);
    for (size_t i = 0; i < p.size(); ++i)
      if (base_p[row][i] > 0) kl += base_p[row][i] * std::log(base_p[row][i] / std::max(p[i], 1e-300));
    ++row;
    return Status::ok();
  }));
  return kl / static_cast<double>(row);
}

// Mean KL of the model at `path` from `base` over 24 windows of 128 tokens of the evaluation half.
double held_out_kl(const Model& base, const std::string& path) {
  auto q = Model::load(path);
  EXPECT_TRUE(q) << path;
  if (!q) return INFINITY;
  auto tok = Tokenizer::from_gguf(base.file());
  const std::vector<TokenId> tokens = (*tok)->encode(split().eval, true, false);
  PerplexityOptions po;
  po.n_ctx = 128;
  po.max_windows = 24;
  po.bos = (*tok)->bos_id();
  return mean_kl(base, **q, tokens, po);
}

TEST(QuantizeCalibrated, ImatrixAndGptqBeatRoundToNearestOnHeldOutText) {
  TERN_REQUIRE_STORIES();
  auto run = calibrate(options());
  ASSERT_TRUE(run) << run.status().message();
  const std::string calib_path = scratch_path("calib_q") + ".gguf";
  ASSERT_TRUE(write_calibration(run->calibration, calib_path));
  const std::string in = test::stories_gguf();
  auto file = gguf::GgufFile::open(in);
  ASSERT_TRUE(file);
  const QuantScheme q4 = *find_quant_scheme("Q4_0");
  auto plan = gptq_plan(*file, q4);
  ASSERT_TRUE(plan);
  // Q/K/V/O and gate/up of 5 layers; ffn_down (rows of 172) falls back to F16;
  // the tied embedding gets importance weighting, not GPTQ.
  EXPECT_EQ(plan->size(), 30u);

  ThreadPool pool(2);
  std::map<std::string, std::string> out;
  std::map<std::string, uint64_t> sizes;
  for (QuantMethod m : {QuantMethod::Rtn, QuantMethod::Imatrix, QuantMethod::Gptq}) {
    QuantizeOptions o{in, scratch_path(std::string("q4_") + quant_method_name(m)) + ".gguf", q4, m};
    std::unique_ptr<CalibrationSource> src;
    if (m != QuantMethod::Rtn) {
      auto s = CalibrationSource::open(calib_path, in, m == QuantMethod::Gptq, *plan, "", 1ull << 30, 2);
      ASSERT_TRUE(s) << s.status().message();
      src = std::move(*s);
      o.inputs = [&](const std::string& key) { return src->get(key); };
    }
    auto r = quantize_gguf(o, pool);
    ASSERT_TRUE(r) << r.status().message();
    EXPECT_EQ(r->n_calibrated, m == QuantMethod::Rtn ? 0u : 31u) << quant_method_name(m);
    if (m == QuantMethod::Gptq) {
      EXPECT_EQ(src->passes(), 1);
    }
    out[quant_method_name(m)] = o.out_path;
    sizes[quant_method_name(m)] = std::filesystem::file_size(o.out_path);
  }
  std::filesystem::remove(calib_path);
  EXPECT_EQ(sizes["imatrix"], sizes["rtn"]);
  EXPECT_EQ(sizes["gptq"], sizes["rtn"]);

  auto base = Model::load(in);
  ASSERT_TRUE(base);
  std::map<std::string, double> kl;
  for (const auto& [name, path] : out) {
    kl[name] = held_out_kl(**base, path);
    std::filesystem::remove(path);
  }
  std::printf("mean KL on held-out text: rtn %.5f, imatrix %.5f, gptq %.5f\n", kl["rtn"], kl["imatrix"], kl["gptq"]);
  EXPECT_LT(kl["imatrix"], kl["rtn"]);
  EXPECT_LT(kl["gptq"], kl["imatrix"]);
}

// Runs `method` on stories260K with the calibration of options(); returns the written path.
std::string quantize_with(QuantMethod method, const QuantScheme& scheme, std::optional<QuantScheme> search_as,
                          size_t* n_calibrated = nullptr) {
  auto run = calibrate(options());
  EXPECT_TRUE(run);
  const std::string calib_path = scratch_path("calib_awq") + ".gguf";
  EXPECT_TRUE(write_calibration(run->calibration, calib_path));
  auto file = gguf::GgufFile::open(test::stories_gguf());
  auto src = CalibrationSource::open(calib_path, test::stories_gguf(), true, awq_plan(*file), "", 1ull << 30, 2);
  EXPECT_TRUE(src);
  QuantizeOptions o{test::stories_gguf(), scratch_path(std::string("awq_") + std::string(scheme.name)) + ".gguf", scheme,
                    method};
  o.inputs = [&](const std::string& key) { return (*src)->get(key); };
  o.awq_search_as = search_as;
  ThreadPool pool(2);
  auto r = quantize_gguf(o, pool);
  EXPECT_TRUE(r) << r.status().message();
  if (n_calibrated && r) *n_calibrated = r->n_calibrated;
  std::filesystem::remove(calib_path);
  return o.out_path;
}

TEST(QuantizeAwq, FoldedModelBeforeRoundingComputesTheSameLogits) {
  TERN_REQUIRE_STORIES();
  auto file = gguf::GgufFile::open(test::stories_gguf());
  ASSERT_TRUE(file);
  // stories260K has 4 KV heads for 8 query heads, so no v -> o group: per
  // layer Q/K/V, gate/up and up -> down (ffn_down, rows of 172, stays F16 in
  // Q4_0, so the search leaves that group unscaled).
  const auto groups = awq_groups(*file);
  ASSERT_EQ(groups.size(), 15u);
  EXPECT_EQ(groups[0].producer, "blk.0.attn_norm.weight");
  EXPECT_EQ(groups[0].linears.size(), 3u);
  EXPECT_EQ(groups[1].producer, "blk.0.ffn_norm.weight");
  EXPECT_EQ(groups[1].linears.size(), 2u);
  EXPECT_EQ(groups[2].producer, "blk.0.ffn_up.weight");

  size_t n_scaled = 0;
  const std::string folded = quantize_with(QuantMethod::Awq, *find_quant_scheme("F32"), *find_quant_scheme("Q4_0"), &n_scaled);
  EXPECT_GT(n_scaled, 0u);  // some group chose alpha > 0: norms and matrices really changed
  auto a = Model::load(test::stories_gguf());
  auto b = Model::load(folded);
  ASSERT_TRUE(a && b);
  auto changed = [&](const std::string& name) {
    const gguf::TensorInfo* x = (*a)->file().find_tensor(name);
    const gguf::TensorInfo* y = (*b)->file().find_tensor(name);
    return std::memcmp(x->data, y->data, x->n_bytes) != 0;
  };
  int n_changed = 0;
  for (const auto& g : groups) n_changed += changed(g.producer);
  EXPECT_GT(n_changed, 0);
  auto tok = Tokenizer::from_gguf((*a)->file());
  const std::vector<TokenId> tokens = (*tok)->encode(split().eval, true, false);
  PerplexityOptions po;
  po.n_ctx = 128;
  po.max_windows = 4;
  po.bos = (*tok)->bos_id();
  std::vector<std::vector<float>> la;
  ASSERT_TRUE(compute_perplexity(**a, tokens, po, {}, [&](std::span<const float> l, TokenId) {
    la.emplace_back(l.begin(), l.end());
    return Status::ok();
  }));
  size_t row = 0;
  double max_diff = 0;
  ASSERT_TRUE(compute_perplexity(**b, tokens, po, {}, [&](std::span<const float> l, TokenId) {
    for (size_t i = 0; i < l.size(); ++i) max_diff = std::max(max_diff, std::fabs(static_cast<double>(l[i]) - la[row][i]));
    ++row;
    return Status::ok();
  }));
  EXPECT_EQ(row, la.size());
  EXPECT_LT(max_diff, 2e-3);  // f32 rounding of x/s*s through five layers; a wrong fold moves logits by whole units
  std::filesystem::remove(folded);
}

TEST(QuantizeAwq, ScaledQuantizationWritesTheSchemeTypes) {
  TERN_REQUIRE_STORIES();
  const std::string q = quantize_with(QuantMethod::Awq, *find_quant_scheme("Q4_0"), std::nullopt);
  auto f = gguf::GgufFile::open(q);
  ASSERT_TRUE(f);
  EXPECT_EQ(f->find_tensor("blk.0.attn_q.weight")->type, gguf::GgmlType::Q4_0);
  EXPECT_EQ(f->find_tensor("blk.0.attn_norm.weight")->type, gguf::GgmlType::F32);
  EXPECT_EQ(f->find_tensor("blk.0.ffn_down.weight")->type, gguf::GgmlType::F16);
  std::filesystem::remove(q);
}

// The calibration of options(), written to a scratch file (the caller removes it).
std::string write_test_calibration(const std::string& name) {
  auto run = calibrate(options());
  EXPECT_TRUE(run) << run.status().message();
  const std::string path = scratch_path(name) + ".gguf";
  EXPECT_TRUE(run && write_calibration(run->calibration, path));
  return path;
}

TEST(QuantizeCalibrated, GptqRefusesAChangedCalibrationText) {
  TERN_REQUIRE_STORIES();
  const std::string calib_path = write_test_calibration("calib_t");
  auto file = gguf::GgufFile::open(test::stories_gguf());
  auto plan = gptq_plan(*file, *find_quant_scheme("Q4_0"));
  auto src = CalibrationSource::open(calib_path, test::stories_gguf(), true, *plan, split().eval_path, 1ull << 30, 2);
  std::filesystem::remove(calib_path);
  ASSERT_TRUE(src);
  auto got = (*src)->get("blk.0.attn_q.weight");
  ASSERT_FALSE(got);
  EXPECT_NE(got.status().message().find("is not the text the calibration file was made from"), std::string::npos);
}

// --auto: the mix chosen by measured sensitivity on the calibration half stays
// inside its budget (the size of the fixed Q4_0 mix) and is at least as good on
// the held-out half; the file holds the chosen types; the measured KL of the
// mix is near the sum the choice predicted; the work directory is removed.
TEST(QuantizeAuto, WithinBudgetAndBetterThanTheFixedMixOfTheSameSize) {
  TERN_REQUIRE_STORIES();
  const std::string calib_path = write_test_calibration("calib_auto");
  const std::string in = test::stories_gguf();
  ThreadPool pool(2);
  QuantizeOptions fo{in, scratch_path("fixed_q4") + ".gguf", *find_quant_scheme("Q4_0")};
  auto fixed = quantize_gguf(fo, pool);
  ASSERT_TRUE(fixed);

  AutoMixOptions ao;
  ao.in_path = in;
  ao.out_path = scratch_path("auto") + ".gguf";
  for (const char* t : {"Q4_0", "Q5_0", "Q8_0", "F16"}) ao.candidates.push_back(find_quant_scheme(t));
  ao.target_bpw = fixed->bits_per_weight();
  ao.method = QuantMethod::Rtn;
  ao.calib_path = calib_path;
  ao.n_chunks = 8;
  auto r = quantize_auto(ao, pool);
  std::filesystem::remove(calib_path);
  ASSERT_TRUE(r) << r.status().message();
  EXPECT_LE(r->written.n_bytes_out, static_cast<uint64_t>(ao.target_bpw * static_cast<double>(fixed->n_elements) / 8.0));
  EXPECT_EQ(r->written.n_elements, fixed->n_elements);
  EXPECT_EQ(r->tensors.size(), 36u);  // 35 layer matrices and the tied embedding
  EXPECT_GT(r->n_passes, 100);
  auto f = gguf::GgufFile::open(ao.out_path);
  ASSERT_TRUE(f);
  std::set<gguf::GgmlType> used;
  for (const auto& t : r->tensors) {
    EXPECT_EQ(f->find_tensor(t.name)->type, t.types[t.chosen]) << t.name;
    used.insert(t.types[t.chosen]);
    // More bits never measured worse by much: F16 is the base's own rounding.
    EXPECT_GE(t.kl.front() + 1e-9, t.kl.back()) << t.name;
  }
  EXPECT_GE(used.size(), 2u);  // a mix, not one type
  EXPECT_NEAR(r->measured_kl, r->predicted_kl, 0.25 * r->predicted_kl);
  EXPECT_FALSE(std::filesystem::exists(ao.out_path + ".auto-" + std::to_string(::getpid())));

  auto base = Model::load(in);
  ASSERT_TRUE(base);
  const double kl_auto = held_out_kl(**base, ao.out_path), kl_fixed = held_out_kl(**base, fo.out_path);
  std::printf("held-out KL at %.3f bits/weight: auto %.5f, fixed Q4_0 %.5f\n", ao.target_bpw, kl_auto, kl_fixed);
  EXPECT_LE(kl_auto, kl_fixed);
  std::filesystem::remove(ao.out_path);
  std::filesystem::remove(fo.out_path);
}

// What --auto refuses, before any work: AWQ, a budget below the smallest mix.
TEST(QuantizeAuto, RefusesAwqAndABudgetNothingFits) {
  TERN_REQUIRE_STORIES();
  const std::string calib_path = write_test_calibration("calib_auto2");
  ThreadPool pool(2);
  AutoMixOptions ao;
  ao.in_path = test::stories_gguf();
  ao.out_path = scratch_path("auto_refused") + ".gguf";
  ao.candidates = {find_quant_scheme("Q8_0")};
  ao.calib_path = calib_path;
  ao.target_bpw = 4.0;
  auto tight = quantize_auto(ao, pool);
  ASSERT_FALSE(tight);
  EXPECT_NE(tight.status().message().find("the smallest mix takes"), std::string::npos) << tight.status().message();
  ao.method = QuantMethod::Awq;
  auto awq = quantize_auto(ao, pool);
  ASSERT_FALSE(awq);
  EXPECT_NE(awq.status().message().find("awq"), std::string::npos);
  ao.method = QuantMethod::Gptq;
  ao.candidates = {find_quant_scheme("Q2_K")};  // GPTQ writes Q4_K, Q5_K, Q6_K but not Q2_K
  ao.target_bpw = 16.0;
  auto k = quantize_auto(ao, pool);
  ASSERT_FALSE(k);
  EXPECT_NE(k.status().message().find("is not a type gptq writes"), std::string::npos) << k.status().message();
  EXPECT_FALSE(std::filesystem::exists(ao.out_path));
  std::filesystem::remove(calib_path);
}

}  // namespace
}  // namespace tern
