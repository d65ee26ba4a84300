// Mamba-2 (model/archs/mamba2.cpp, written by tern synth --arch mamba2)
// against an independent double-precision reference written here from the
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

// Which terms of the mixer the reference computes.
struct Terms {
  bool conv_bias = true;
  bool d_skip = true;
  bool dt_bias = true;
  bool gate = true;
  bool norm = true;
  bool groups = true;  // off: every head reads group 0's B and C
};

class Reference {
 public:
  explicit Reference(const std::string& path) : g_(path), z_(g_.sizes("mamba2")) {}

  // Logits after each token of `tokens`, from a zero state.
  std::vector<std::vector<double>> logits(const std::vector<TokenId>& tokens, const Terms& terms) {
    const int n_embd_ = z_.n_embd, n_layer_ = z_.n_layer;
    const double eps_ = z_.eps;
    const size_t di = static_cast<size_t>(z_.d_inner), ds = static_cast<size_t>(z_.d_state),
                 dc = static_cast<size_t>(z_.d_conv), nh = static_cast<size_t>(z_.dt_rank),
                 ng = static_cast<size_t>(z_.n_group), hd = di / nh, nch = di + 2 * ng * ds;
    std::vector<std::vector<double>> conv(static_cast<size_t>(n_layer_), std::vector<double>((dc - 1) * nch, 0.0));
    // H[layer][head][channel in head][state]
    std::vector<std::vector<double>> h(static_cast<size_t>(n_layer_), std::vector<double>(di * ds, 0.0));
    const std::vector<double>& embd = g_.tensor(tensor_name(Tensor::TokenEmbd));
    std::vector<std::vector<double>> out;
    for (TokenId tok : tokens) {
      std::vector<double> x(embd.begin() + tok * n_embd_, embd.begin() + (tok + 1) * n_embd_);
      for (int il = 0; il < n_layer_; ++il) {
        auto w = [&](Tensor t) -> const std::vector<double>& { return g_.tensor(tensor_name(t, il)); };
        const std::vector<double> xn = DecodedGguf::rms_norm(x, w(Tensor::AttnNorm).data(), eps_);
        const std::vector<double> proj = DecodedGguf::matvec(w(Tensor::SsmIn), xn, di + nch + nh);
        const double* z = proj.data();
        const double* dt_raw = proj.data() + di + nch;
        // Causal depthwise convolution of x, B and C over (kept inputs, this input).
        const std::vector<double> u = DecodedGguf::conv_step(conv[static_cast<size_t>(il)], w(Tensor::SsmConv1d),
                                                             terms.conv_bias ? &w(Tensor::SsmConv1dBias) : nullptr,
                                                             proj.data() + di, nch, dc);
        const std::vector<double>&dt_bias = w(Tensor::SsmDtBias), &a = w(Tensor::SsmA), &d = w(Tensor::SsmD);
        std::vector<double>& hl = h[static_cast<size_t>(il)];
        std::vector<double> y(di);
        for (size_t head = 0; head < nh; ++head) {
          const size_t g = terms.groups ? head / (nh / ng) : 0;
          const double* bv = u.data() + di + g * ds;
          const double* cv = u.data() + di + ng * ds + g * ds;
          const double delta = std::log1p(std::exp(dt_raw[head] + (terms.dt_bias ? dt_bias[head] : 0.0)));
          const double decay = std::exp(delta * a[head]);
          for (size_t i = 0; i < hd; ++i) {
            const size_t c = head * hd + i;
            double acc = 0.0;
            for (size_t s = 0; s < ds; ++s) {
              double& hs = hl[c * ds + s];
              hs = decay * hs + delta * u[c] * bv[s];
              acc += hs * cv[s];
            }
            if (terms.d_skip) acc += d[head] * u[c];
            y[c] = terms.gate ? acc * DecodedGguf::silu(z[c]) : acc;
          }
        }
        if (terms.norm) {
          const std::vector<double>& nw = w(Tensor::SsmNorm);
          const size_t gs = di / ng;
          for (size_t g = 0; g < ng; ++g) {
            const std::vector<double> part(y.begin() + static_cast<std::ptrdiff_t>(g * gs),
                                           y.begin() + static_cast<std::ptrdiff_t>((g + 1) * gs));
            const std::vector<double> normed = DecodedGguf::rms_norm(part, nw.data() + g * gs, eps_);
            std::copy(normed.begin(), normed.end(), y.begin() + static_cast<std::ptrdiff_t>(g * gs));
          }
        }
        const std::vector<double> o = DecodedGguf::matvec(w(Tensor::SsmOut), y, static_cast<size_t>(n_embd_));
        for (size_t i = 0; i < x.size(); ++i) x[i] += o[i];
      }
      out.push_back(g_.head_logits(x, eps_));
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
  const std::vector<TokenId> a = test::ssm_prompt(30);
  std::vector<TokenId> b = test::ssm_prompt(17);
  std::reverse(b.begin(), b.end());
  const auto alone_a = test::logits_one_by_one(**model, a);
  const auto alone_b = test::logits_one_by_one(**model, b);
  // Chunks of a (7, 1, 22) with b's tokens in the same passes (6, 1, 10).
  auto runner = BatchRunner::create(**model, 2, 64);
  ASSERT_TRUE(runner.is_ok());
  int32_t pa = 0, pb = 0;
  for (const auto& [na, nb] : {std::pair{7, 6}, std::pair{1, 1}, std::pair{22, 10}}) {
    Batch batch;
    for (int i = 0; i < na; ++i, ++pa) batch.add(a[static_cast<size_t>(pa)], pa, SeqId(0), true);
    for (int i = 0; i < nb; ++i, ++pb) batch.add(b[static_cast<size_t>(pb)], pb, SeqId(1), true);
    std::vector<float> logits;
    ASSERT_TRUE((*runner)->forward(batch, logits).is_ok());
    const size_t n_vocab = logits.size() / static_cast<size_t>(na + nb);
    auto row = [&](int i) {
      return std::vector<float>(logits.begin() + static_cast<std::ptrdiff_t>(i * n_vocab),
                                logits.begin() + static_cast<std::ptrdiff_t>((i + 1) * n_vocab));
    };
    for (int i = 0; i < na; ++i) EXPECT_EQ(row(i), alone_a[static_cast<size_t>(pa - na + i)]) << "a " << pa - na + i;
    for (int i = 0; i < nb; ++i) EXPECT_EQ(row(na + i), alone_b[static_cast<size_t>(pb - nb + i)]) << "b " << pb - nb + i;
  }
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
