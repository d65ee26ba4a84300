// Mamba-1 (model/archs/mamba.cpp, written by tern synth --arch mamba) against
// an independent double-precision reference written here from the paper's
// equations (Gu & Dao 2023, Algorithm 2), reading the file's tensors itself:
// one token at a time, the convolution as a dot product over the last d_conv
// inputs, the discretised recurrence h = exp(dt A) h + dt B x, y = C h + D x,
// gated by silu(z). Each term can be switched off in the reference; the model
// must match the full reference and be far from every switched-off one, so a
// model that forgot that term would fail. Then the properties the serving
// engine relies on: a prompt in any chunking gives the logits of one-token-at-
// a-time decoding bit for bit, sequences batched together give what each gives
// alone, and a state slot reused from position 0 forgets its last sequence.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "gguf/reader.h"
#include "model/batch_runner.h"
#include "model/gguf_names.h"
#include "model/model.h"
#include "model/quantize.h"
#include "model/synth.h"
#include "one_by_one.h"
#include "ssm_test_util.h"
#include "quant/quant.h"

namespace tern {
namespace {

using gguf_names::Tensor;
using gguf_names::tensor_name;

using test::DecodedGguf;
using test::rel_diff;
using test::ScratchModel;

std::string vocab_path() { return test::ssm_vocab_path(); }
std::vector<TokenId> prompt_tokens(size_t n) { return test::ssm_prompt(n); }

// dim 48 (d_inner 96, dt_rank 3), 2 layers; weights of std 0.1 so that every
// term moves the logits well past float rounding.
Status synth_mamba(const std::string& out, int d_state, const char* scheme = "F32") {
  SynthOptions o;
  o.arch = "mamba";
  o.n_embd = 48;
  o.n_layer = 2;
  o.d_state = d_state;
  o.n_ctx = 512;
  o.seed = 11;
  o.weight_std = 0.1f;
  o.vocab_path = vocab_path();
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
  bool dt_b_c_rms = false;  // falcon-mamba: dt_in, B and C RMS-normed (no weight)
};

class Reference {
 public:
  explicit Reference(const std::string& path) : g_(path), z_(g_.sizes("mamba")) {}

  // Logits after each token of `tokens`, from a zero state.
  std::vector<std::vector<double>> logits(const std::vector<TokenId>& tokens, const Terms& terms) {
    const int n_embd_ = z_.n_embd, n_layer_ = z_.n_layer, dt_rank_ = z_.dt_rank;
    const double eps_ = z_.eps;
    const size_t di = static_cast<size_t>(z_.d_inner), ds = static_cast<size_t>(z_.d_state),
                 dc = static_cast<size_t>(z_.d_conv);
    std::vector<std::vector<double>> conv(static_cast<size_t>(n_layer_),
                                          std::vector<double>((dc - 1) * di, 0.0));
    std::vector<std::vector<double>> h(static_cast<size_t>(n_layer_), std::vector<double>(di * ds, 0.0));
    const std::vector<double>& embd = g_.tensor(tensor_name(Tensor::TokenEmbd));
    std::vector<std::vector<double>> out;
    for (TokenId tok : tokens) {
      std::vector<double> x(embd.begin() + tok * n_embd_, embd.begin() + (tok + 1) * n_embd_);
      for (int il = 0; il < n_layer_; ++il) {
        auto w = [&](Tensor t) -> const std::vector<double>& { return g_.tensor(tensor_name(t, il)); };
        const std::vector<double> xn = DecodedGguf::rms_norm(x, w(Tensor::AttnNorm).data(), eps_);
        const std::vector<double> xz = DecodedGguf::matvec(w(Tensor::SsmIn), xn, 2 * di);
        // Causal depthwise convolution over (kept inputs, this input), oldest first.
        const std::vector<double> u = DecodedGguf::conv_step(conv[static_cast<size_t>(il)], w(Tensor::SsmConv1d),
                                                             terms.conv_bias ? &w(Tensor::SsmConv1dBias) : nullptr,
                                                             xz.data(), di, dc);
        std::vector<double> xdb = DecodedGguf::matvec(w(Tensor::SsmX), u, static_cast<size_t>(dt_rank_) + 2 * ds);
        if (terms.dt_b_c_rms) {  // each of dt_in, B and C normed on its own
          const std::vector<double> ones(std::max(static_cast<size_t>(dt_rank_), ds), 1.0);
          size_t at = 0;
          for (size_t len : {static_cast<size_t>(dt_rank_), ds, ds}) {
            const std::vector<double> part(xdb.begin() + static_cast<std::ptrdiff_t>(at),
                                           xdb.begin() + static_cast<std::ptrdiff_t>(at + len));
            const std::vector<double> normed = DecodedGguf::rms_norm(part, ones.data(), eps_);
            std::copy(normed.begin(), normed.end(), xdb.begin() + static_cast<std::ptrdiff_t>(at));
            at += len;
          }
        }
        const std::vector<double> dt_in(xdb.begin(), xdb.begin() + dt_rank_);
        std::vector<double> dt = DecodedGguf::matvec(w(Tensor::SsmDt), dt_in, di);
        const std::vector<double>&dt_bias = w(Tensor::SsmDtBias), &a = w(Tensor::SsmA), &d = w(Tensor::SsmD);
        std::vector<double>& hl = h[static_cast<size_t>(il)];
        std::vector<double> y(di);
        for (size_t c = 0; c < di; ++c) {
          const double delta = std::log1p(std::exp(dt[c] + (terms.dt_bias ? dt_bias[c] : 0.0)));
          double acc = 0.0;
          for (size_t s = 0; s < ds; ++s) {
            const double b = xdb[static_cast<size_t>(dt_rank_) + s],
                         cc = xdb[static_cast<size_t>(dt_rank_) + ds + s];
            double& hs = hl[c * ds + s];
            hs = std::exp(delta * a[c * ds + s]) * hs + delta * b * u[c];
            acc += cc * hs;
          }
          if (terms.d_skip) acc += d[c] * u[c];
          y[c] = terms.gate ? acc * DecodedGguf::silu(xz[di + c]) : acc;
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
// 0.9e-7 to 2.5e-7 (CPU and reference backends, d_state 16 and 20); each
// switched-off term moves the logits by 0.19 to 1.3.
constexpr double kBudget = 2e-6;

TEST(Mamba, MatchesTheDoubleReferenceAndEachTermIsNeeded) {
  if (!std::filesystem::exists(vocab_path())) GTEST_SKIP() << "tokenizer test data absent";
  // d_state 16 (one vector of lanes) and 20 (a partial second one).
  for (int d_state : {16, 20}) {
    SCOPED_TRACE("d_state " + std::to_string(d_state));
    ScratchModel file("mamba_ref" + std::to_string(d_state));
    ASSERT_TRUE(synth_mamba(file.path, d_state));
    for (BackendKind kind : {BackendKind::Cpu, BackendKind::Ref}) {
      SCOPED_TRACE(backend::backend_kind_name(kind));
      auto model = Model::load(file.path, backend::make_backend(kind, 2));
      ASSERT_TRUE(model.is_ok()) << model.status().message();
      EXPECT_EQ((*model)->hparams().ssm.d_state, d_state);
      const std::vector<TokenId> tokens = prompt_tokens(12);
      const auto got = test::logits_one_by_one(**model, tokens);
      Reference ref(file.path);
      const double err = rel_diff(got, ref.logits(tokens, {}));
      EXPECT_LT(err, kBudget);
      if (kind != BackendKind::Cpu) continue;
      struct Off {
        const char* what;
        Terms terms;
      };
      const Off offs[] = {{"conv bias", {.conv_bias = false}},
                          {"D skip", {.d_skip = false}},
                          {"dt bias", {.dt_bias = false}},
                          {"gate", {.gate = false}}};
      for (const Off& off : offs)
        EXPECT_GT(rel_diff(got, ref.logits(tokens, off.terms)), 100 * kBudget)
            << off.what << " off is not detected";
    }
  }
}

// falcon-mamba: the same layers with mamba.ssm.dt_b_c_rms = true, which RMS-
// normalises dt's input, B and C (no weight) before they are used.
TEST(Mamba, FalconMambasNormedDtBAndCMatchTheReference) {
  if (!std::filesystem::exists(vocab_path())) GTEST_SKIP() << "tokenizer test data absent";
  ScratchModel plain("mamba_plain"), falcon("mamba_falcon");
  ASSERT_TRUE(synth_mamba(plain.path, 16));
  ASSERT_TRUE(test::rewrite_key(plain.path, falcon.path, "mamba.ssm.dt_b_c_rms", gguf::Value::of_bool(true)));
  const std::vector<TokenId> tokens = prompt_tokens(12);
  Reference ref(falcon.path);
  const auto want = ref.logits(tokens, {.dt_b_c_rms = true});
  for (BackendKind kind : {BackendKind::Cpu, BackendKind::Ref}) {
    SCOPED_TRACE(backend::backend_kind_name(kind));
    auto model = Model::load(falcon.path, backend::make_backend(kind, 2));
    ASSERT_TRUE(model.is_ok()) << model.status().message();
    EXPECT_TRUE((*model)->hparams().ssm.dt_b_c_rms);
    const auto got = test::logits_one_by_one(**model, tokens);
    EXPECT_LT(rel_diff(got, want), kBudget);
    EXPECT_GT(rel_diff(got, ref.logits(tokens, {})), 100 * kBudget) << "the norms are not applied";
  }
  // The file without the key: the norms are not applied there.
  auto model = Model::load(plain.path);
  ASSERT_TRUE(model.is_ok());
  EXPECT_GT(rel_diff(test::logits_one_by_one(**model, tokens), want), 100 * kBudget);
}

TEST(Mamba, AnyChunkingOfAPromptGivesDecodeLogitsBitForBit) {
  if (!std::filesystem::exists(vocab_path())) GTEST_SKIP() << "tokenizer test data absent";
  ScratchModel file("mamba_chunks");
  ASSERT_TRUE(synth_mamba(file.path, 16));
  auto model = Model::load(file.path, backend::make_backend(BackendKind::Cpu, 2));
  ASSERT_TRUE(model.is_ok()) << model.status().message();
  const std::vector<TokenId> tokens = prompt_tokens(40);  // long enough for the pool to split the scan
  const auto one_by_one = test::logits_one_by_one(**model, tokens);
  for (const std::vector<int>& chunks : {std::vector<int>{40}, {7, 1, 25, 7}, {16, 16, 8}}) {
    auto runner = BatchRunner::create(**model, 1, 64);
    ASSERT_TRUE(runner.is_ok());
    std::vector<std::vector<float>> rows;
    int32_t p = 0;
    for (int n : chunks) {
      Batch b;
      for (int i = 0; i < n; ++i, ++p) b.add(tokens[static_cast<size_t>(p)], p, SeqId(0), true);
      std::vector<float> logits;
      ASSERT_TRUE((*runner)->forward(b, logits).is_ok());
      const size_t n_vocab = logits.size() / static_cast<size_t>(n);
      for (int i = 0; i < n; ++i)
        rows.emplace_back(logits.begin() + static_cast<std::ptrdiff_t>(i * n_vocab),
                          logits.begin() + static_cast<std::ptrdiff_t>((i + 1) * n_vocab));
    }
    EXPECT_EQ(rows, one_by_one) << "chunks of " << ::testing::PrintToString(chunks);
  }
}

TEST(Mamba, BatchedSequencesGiveWhatEachGivesAloneAndSlotsForgetOnReuse) {
  if (!std::filesystem::exists(vocab_path())) GTEST_SKIP() << "tokenizer test data absent";
  ScratchModel file("mamba_batch");
  ASSERT_TRUE(synth_mamba(file.path, 16));
  auto model = Model::load(file.path, backend::make_backend(BackendKind::Cpu, 2));
  ASSERT_TRUE(model.is_ok()) << model.status().message();
  const std::vector<TokenId> a = prompt_tokens(9);
  std::vector<TokenId> b = prompt_tokens(14);
  std::reverse(b.begin(), b.end());
  const auto alone_a = test::logits_one_by_one(**model, a);
  const auto alone_b = test::logits_one_by_one(**model, b);
  auto runner = BatchRunner::create(**model, 3, 64);
  ASSERT_TRUE(runner.is_ok());
  // Slot 2 first runs something else, so that b starts from a used slot.
  Batch warm;
  for (int32_t p = 0; p < 5; ++p) warm.add(a[static_cast<size_t>(p)], p, SeqId(2), false);
  std::vector<float> logits;
  ASSERT_TRUE((*runner)->forward(warm, logits).is_ok());
  (*runner)->truncate(SeqId(2), 0);
  // One pass: a's first 4 tokens and b's first 6; then one token of each per pass.
  Batch first;
  for (int32_t p = 0; p < 4; ++p) first.add(a[static_cast<size_t>(p)], p, SeqId(0), p == 3);
  for (int32_t p = 0; p < 6; ++p) first.add(b[static_cast<size_t>(p)], p, SeqId(2), p == 5);
  ASSERT_TRUE((*runner)->forward(first, logits).is_ok());
  const size_t n_vocab = logits.size() / 2;
  EXPECT_EQ(std::vector<float>(logits.begin(), logits.begin() + static_cast<std::ptrdiff_t>(n_vocab)),
            alone_a[3]);
  EXPECT_EQ(std::vector<float>(logits.begin() + static_cast<std::ptrdiff_t>(n_vocab), logits.end()),
            alone_b[5]);
  for (int32_t p = 4, q = 6; p < 9; ++p, ++q) {
    Batch step;
    step.add(a[static_cast<size_t>(p)], p, SeqId(0), true);
    step.add(b[static_cast<size_t>(q)], q, SeqId(2), true);
    ASSERT_TRUE((*runner)->forward(step, logits).is_ok());
    EXPECT_EQ(std::vector<float>(logits.begin(), logits.begin() + static_cast<std::ptrdiff_t>(n_vocab)),
              alone_a[static_cast<size_t>(p)]);
    EXPECT_EQ(std::vector<float>(logits.begin() + static_cast<std::ptrdiff_t>(n_vocab), logits.end()),
              alone_b[static_cast<size_t>(q)]);
  }
}

TEST(Mamba, FileErrorsNameWhatIsWrong) {
  if (!std::filesystem::exists(vocab_path())) GTEST_SKIP() << "tokenizer test data absent";
  ScratchModel file("mamba_errors");
  ASSERT_TRUE(synth_mamba(file.path, 16, "Q8_0"));
  auto model = Model::load(file.path);
  ASSERT_TRUE(model.is_ok()) << model.status().message();
  // Matrices quantized, the conv taps, A and D kept F32 as llama.cpp keeps them.
  const gguf::GgufFile& f = (*model)->file();
  EXPECT_EQ(f.find_tensor("blk.0.ssm_out.weight")->type, gguf::GgmlType::Q8_0);  // rows of d_inner = 96
  for (const char* name : {"blk.0.ssm_conv1d.weight", "blk.0.ssm_a", "blk.0.ssm_d"})
    EXPECT_EQ(f.find_tensor(name)->type, gguf::GgmlType::F32) << name;
  // Bad options of tern synth are refused before anything is written.
  SynthOptions o;
  o.arch = "mamba";
  o.n_embd = 48;
  o.n_layer = 2;
  o.n_head = 4;
  o.vocab_path = vocab_path();
  o.out_path = file.path;
  const Status s = validate_synth_options(o);
  EXPECT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("--heads"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace tern
