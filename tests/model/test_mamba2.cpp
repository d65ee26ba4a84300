// Mamba-2 (model/archs/mamba.cpp, written by tern synth --arch mamba2)
// against an independent double-precision reference (ssm_test_util.h) from the
// paper's equations (Dao & Gu 2024, the SSD layer's recurrent form), reading
// the file's tensors itself, one token at a time: [z, xBC, dt] = W_in x;
// xBC = silu(conv(xBC) + bias); per head h of group g,
//   H_h = exp(dt_h A_h) H_h + dt_h x_h B_g^T,  y_h = H_h C_g + D_h x_h,
// y = groupnorm(y * silu(z)) and out = W_out y. Each term can be switched off
// in the reference (and the groups merged); the model must match the full
// reference and be far from each variant. Then the serving properties: any
// chunking of a prompt gives one-token-at-a-time decode's logits bit for bit,
// and sequences batched together give what each gives alone.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "model/batch_runner.h"
#include "model/gguf_names.h"
#include "model/model.h"
#include "model/synth.h"
#include "one_by_one.h"
#include "ssm_test_util.h"

namespace tern {
namespace {

using gguf_names::Tensor;
using gguf_names::tensor_name;
using test::DecodedGguf;
using test::rel_diff;
using test::ScratchModel;

struct Shape {
  int d_state, head_dim, n_group;
};

// dim 48 (d_inner 96); weights of std 0.1 so that every term moves the
// logits well past float rounding.
Status synth_mamba2(const std::string& out, const Shape& sh, const char* scheme = "F32") {
  SynthOptions o;
  o.arch = "mamba2";
  o.n_embd = 48;
  o.n_layer = 2;
  o.d_state = sh.d_state;
  o.head_dim = sh.head_dim;
  o.n_group = sh.n_group;
  o.n_ctx = 512;
  o.seed = 5;
  o.weight_std = 0.1f;
  o.vocab_path = test::ssm_vocab_path();
  o.out_path = out;
  o.scheme = *find_quant_scheme(scheme);
  ThreadPool pool(2);
  auto r = synth_model(o, pool);
  return r.is_ok() ? Status::ok() : r.status();
}

using Terms = test::Mamba2Terms;

class Reference {
 public:
  explicit Reference(const std::string& path) : g_(path), z_(g_.sizes("mamba2")) {}

  // Logits after each token of `tokens`, from a zero state.
  std::vector<std::vector<double>> logits(const std::vector<TokenId>& tokens, const Terms& terms) {
    std::vector<test::Mamba2State> st(static_cast<size_t>(z_.n_layer), test::Mamba2State(z_));
    const std::vector<double>& embd = g_.tensor(tensor_name(Tensor::TokenEmbd));
    std::vector<std::vector<double>> out;
    for (TokenId tok : tokens) {
      std::vector<double> x(embd.begin() + tok * z_.n_embd, embd.begin() + (tok + 1) * z_.n_embd);
      for (int il = 0; il < z_.n_layer; ++il) {
        const std::vector<double> xn =
            DecodedGguf::rms_norm(x, g_.tensor(tensor_name(Tensor::AttnNorm, il)).data(), z_.eps);
        const std::vector<double> o = test::mamba2_step(g_, z_, il, st[static_cast<size_t>(il)], xn, terms);
        for (size_t i = 0; i < x.size(); ++i) x[i] += o[i];
      }
      out.push_back(g_.head_logits(x, z_.eps));
    }
    return out;
  }

 private:
  DecodedGguf g_;
  DecodedGguf::Sizes z_;
};

// Float arithmetic (polynomial exp, float state) against double: measured
// 1.3e-7 to 3.6e-7 (CPU and reference backends, both shapes); each
// switched-off term must move the logits by more than 100 budgets.
constexpr double kBudget = 2e-6;

TEST(Mamba2, MatchesTheDoubleReferenceAndEachTermIsNeeded) {
  if (!std::filesystem::exists(test::ssm_vocab_path())) GTEST_SKIP() << "tokenizer test data absent";
  // 4 heads of 24 channels in 2 groups, d_state 20 (partial vectors); 3 heads
  // of 32 in one group, d_state 16.
  for (const Shape sh : {Shape{20, 24, 2}, Shape{16, 32, 1}}) {
    SCOPED_TRACE("head_dim " + std::to_string(sh.head_dim) + ", groups " + std::to_string(sh.n_group));
    ScratchModel file("mamba2_ref" + std::to_string(sh.head_dim));
    ASSERT_TRUE(synth_mamba2(file.path, sh));
    for (BackendKind kind : {BackendKind::Cpu, BackendKind::Ref}) {
      SCOPED_TRACE(backend::backend_kind_name(kind));
      auto model = Model::load(file.path, backend::make_backend(kind, 2));
      ASSERT_TRUE(model.is_ok()) << model.status().message();
      const SsmHParams& hs = (*model)->hparams().ssm;
      EXPECT_TRUE(hs.mamba2());
      EXPECT_EQ(hs.head_dim(), sh.head_dim);
      EXPECT_EQ(hs.n_group, sh.n_group);
      const std::vector<TokenId> tokens = test::ssm_prompt(10);
      const auto got = test::logits_one_by_one(**model, tokens);
      Reference ref(file.path);
      const double err = rel_diff(got, ref.logits(tokens, {}));
      char buf[32];
      std::snprintf(buf, sizeof buf, "%.3g", err);
      RecordProperty("rel_err_" + std::string(backend::backend_kind_name(kind)) + "_h" + std::to_string(sh.head_dim), buf);
      EXPECT_LT(err, kBudget);
      if (kind != BackendKind::Cpu) continue;
      struct Off {
        const char* what;
        Terms terms;
      };
      std::vector<Off> offs = {{"conv bias", {.conv_bias = false}},
                               {"D skip", {.d_skip = false}},
                               {"dt bias", {.dt_bias = false}},
                               {"gate", {.gate = false}},
                               {"grouped norm", {.norm = false}}};
      if (sh.n_group > 1) offs.push_back({"groups", {.groups = false}});
      for (const Off& off : offs)
        EXPECT_GT(rel_diff(got, ref.logits(tokens, off.terms)), 100 * kBudget) << off.what << " off is not detected";
    }
  }
}

TEST(Mamba2, ChunkedAndBatchedPromptsGiveDecodeLogitsBitForBit) {
  if (!std::filesystem::exists(test::ssm_vocab_path())) GTEST_SKIP() << "tokenizer test data absent";
  ScratchModel file("mamba2_chunks");
  ASSERT_TRUE(synth_mamba2(file.path, {20, 24, 2}));
  auto model = Model::load(file.path, backend::make_backend(BackendKind::Cpu, 2));
  ASSERT_TRUE(model.is_ok()) << model.status().message();
  auto runner = BatchRunner::create(**model, 2, 64);
  ASSERT_TRUE(runner.is_ok());
  test::expect_chunked_pairs_match_decode(**model, **runner);
}

TEST(Mamba2, QuantizedFilesKeepTheTablesAndBadShapesAreRefused) {
  if (!std::filesystem::exists(test::ssm_vocab_path())) GTEST_SKIP() << "tokenizer test data absent";
  ScratchModel file("mamba2_q8");
  ASSERT_TRUE(synth_mamba2(file.path, {16, 32, 1}, "Q8_0"));
  auto model = Model::load(file.path);
  ASSERT_TRUE(model.is_ok()) << model.status().message();
  const gguf::GgufFile& f = (*model)->file();
  EXPECT_EQ(f.find_tensor("blk.0.ssm_out.weight")->type, gguf::GgmlType::Q8_0);  // rows of d_inner = 96
  for (const char* name : {"blk.0.ssm_conv1d.weight", "blk.0.ssm_a", "blk.0.ssm_d", "blk.0.ssm_norm.weight"})
    EXPECT_EQ(f.find_tensor(name)->type, gguf::GgmlType::F32) << name;
  SynthOptions o;
  o.arch = "mamba2";
  o.n_embd = 48;
  o.n_layer = 2;
  o.head_dim = 40;  // does not divide d_inner 96
  o.vocab_path = test::ssm_vocab_path();
  o.out_path = file.path;
  Status s = validate_synth_options(o);
  EXPECT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("--head-dim"), std::string::npos) << s.message();
  o.head_dim = 24;
  o.n_group = 3;  // 4 heads in 3 groups
  s = validate_synth_options(o);
  EXPECT_FALSE(s.is_ok());
  o.arch = "mamba";
  o.n_group = 0;
  s = validate_synth_options(o);  // Mamba-1 has no heads
  EXPECT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("mamba2"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace tern
