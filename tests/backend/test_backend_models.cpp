// Whole models through both backends: the reference backend must produce the
// CPU backend's greedy tokens on stories260K (and the golden ids) and on every
// synthetic architecture case of tests/model/test_archs.cpp, with logits
// within a stated budget; and a reference with one op broken must fail the
// same comparison (tests/backend/faulty_backend.h), so the comparison can fail.
//
// Budgets (largest |logit difference| over every step; values read from the
// test's XML report). F32 and F16 weights: both backends multiply the same
// numbers; the CPU sums in f32 where the reference sums in double, and
// rotates, exps and softmaxes in f32: on these O(1..10) logits that measured
// <= 1.2e-5 over the synthetic cases and 2.4e-5 on stories260K;
// kLogitsF32 = 2e-4 (as tests/model uses against its double reference) is
// 8x that. The reference's smallest top-2 gap over the decoded steps is
// >= 1e-3 in every one of these runs, more than twice the budget, so equal
// greedy tokens follow from the budget rather than from luck (asserted:
// no step is a near tie).
// BF16 and the block types: the CPU kernels also round the activations
// (bf16: measured 0.028, kLogitsBf16 = 0.1; Q8_0 / Q8_K blocks: measured
// 0.08..0.15, kLogitsBlocks = 0.4); see SyntheticQuantizedWeightsOnTheSameTokens
// for why their greedy tokens are compared on the same token stream.
// A broken op moves logits by whole units (measured 1.9 for a dropped matmul
// row on Q4_K, 3.9..5.8 for the others), over 3x the budget of its case.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <string>

#include "backend/cpu/cpu_backend.h"
#include "backend/ref/ref_backend.h"
#include "faulty_backend.h"
#include "model/batch_runner.h"
#include "model/model.h"
#include "model/model_fixture.h"
#include "model/synthetic_model.h"

namespace tern {
namespace {

using gguf::GgmlType;
using test::Fault;
using test::SynthSpec;

// Measured errors go to the test's XML report (--gtest_output=xml).
void record(const std::string& name, double value) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3g", value);
  ::testing::Test::RecordProperty(name, buf);
}

constexpr double kLogitsF32 = 2e-4;
constexpr double kLogitsBf16 = 0.1;
constexpr double kLogitsBlocks = 0.4;

// Logits rows [n_steps][n_vocab] and the greedy choice (argmax) of each.
struct Greedy {
  std::vector<int> tokens;
  std::vector<std::vector<float>> logits;
};

int argmax(const std::vector<float>& v) { return static_cast<int>(std::max_element(v.begin(), v.end()) - v.begin()); }

// Feeds `prompt` as one batch, then n_decode more tokens one at a time through
// a BatchRunner with 16-position blocks (so attention walks a block table):
// its own greedy choices, or those of `forced` when given (both backends then
// see the same tokens). Rows: the prompt's last, then every decode step's.
Greedy decode(const Model& m, const std::vector<int>& prompt, int n_decode, KvType kv = KvType::F32,
              const std::vector<int>* forced = nullptr) {
  Greedy g;
  auto runner = BatchRunner::create(m, 1, static_cast<int32_t>(prompt.size()) + n_decode, kv, 16);
  EXPECT_TRUE(runner.is_ok()) << runner.status().message();
  if (!runner) return g;
  Batch b;
  for (size_t i = 0; i < prompt.size(); ++i) b.add(prompt[i], static_cast<int32_t>(i), SeqId(0), i + 1 == prompt.size());
  std::vector<float> logits;
  for (int step = 0; step <= n_decode; ++step) {
    const Status s = runner.value()->forward(b, logits);
    EXPECT_TRUE(s.is_ok()) << s.message();
    if (!s) return g;
    g.logits.push_back(logits);
    g.tokens.push_back(argmax(logits));
    if (step == n_decode) break;
    b.clear();
    b.add(forced ? (*forced)[static_cast<size_t>(step)] : g.tokens.back(), static_cast<int32_t>(prompt.size()) + step,
          SeqId(0), true);
  }
  return g;
}

struct Comparison {
  bool same_tokens = false;
  double max_logit_diff = 0;   // over every row both runs computed
  double min_top2_gap = 1e30;  // the reference's smallest margin between its top two logits
  // Steps where the reference's top two are within twice the budget: there a
  // backend within budget may pick either, so greedy choices may differ.
  int n_near_ties = 0;
  int n_steps = 0;
  int n_same_choice = 0;            // steps where both chose the same token
};

Comparison compare(const Greedy& a, const Greedy& ref, double budget) {
  Comparison c;
  c.same_tokens = a.tokens == ref.tokens && !a.tokens.empty();
  for (size_t t = 0; t < std::min(a.logits.size(), ref.logits.size()); ++t) {
    for (size_t v = 0; v < a.logits[t].size(); ++v)
      c.max_logit_diff = std::max(c.max_logit_diff, std::fabs(double(a.logits[t][v]) - ref.logits[t][v]));
    std::vector<float> r = ref.logits[t];
    std::partial_sort(r.begin(), r.begin() + 2, r.end(), std::greater<>());
    const double gap = double(r[0]) - r[1];
    ++c.n_steps;
    c.n_same_choice += a.tokens[t] == ref.tokens[t];
    c.min_top2_gap = std::min(c.min_top2_gap, gap);
    if (gap <= 2 * budget) ++c.n_near_ties;
  }
  return c;
}

// ---- stories260K -----------------------------------------------------------------

std::unique_ptr<Model> load_stories(std::shared_ptr<backend::Backend> be) {
  auto m = Model::load(test::stories_gguf(), std::move(be));
  EXPECT_TRUE(m.is_ok()) << m.status().message();
  return m ? std::move(m).value() : nullptr;
}

// 200 greedy tokens from BOS, one forward per token, on each backend: both
// equal the golden ids (shared/models/stories260K).
TEST(BackendModels, Stories260KGreedyGoldenOnBothBackends) {
  TERN_REQUIRE_STORIES();
  const auto golden = test::golden_ids();
  ASSERT_EQ(golden.size(), 201u);
  auto cpu = load_stories(backend::make_cpu_backend(2, true));
  auto ref = load_stories(backend::make_ref_backend());
  ASSERT_TRUE(cpu && ref);
  EXPECT_EQ(ref->backend().kind(), backend::BackendKind::Ref);
  const Greedy g_cpu = decode(*cpu, {golden[0]}, 200), g_ref = decode(*ref, {golden[0]}, 200);
  std::vector<int> ids = {golden[0]};
  ids.insert(ids.end(), g_ref.tokens.begin(), g_ref.tokens.end() - 1);  // the last row's choice was not fed
  EXPECT_EQ(ids, golden) << "reference backend";
  EXPECT_EQ(g_cpu.tokens, g_ref.tokens);
  const Comparison c = compare(g_cpu, g_ref, kLogitsF32);
  EXPECT_LT(c.max_logit_diff, kLogitsF32);
  EXPECT_EQ(c.n_near_ties, 0);
  record("stories_decode_logit_diff", c.max_logit_diff);
  record("stories_min_top2_gap", c.min_top2_gap);
}

// The golden sequence fed as prompt chunks of 64 (prefill tiles, several
// blocks per chunk): every position's logits within budget.
TEST(BackendModels, Stories260KPrefillLogits) {
  TERN_REQUIRE_STORIES();
  const auto golden = test::golden_ids();
  auto cpu = load_stories(backend::make_cpu_backend(2, true));
  auto ref = load_stories(backend::make_ref_backend());
  ASSERT_TRUE(cpu && ref);
  double worst = 0;
  std::vector<std::vector<float>> rows[2];
  int i_model = 0;
  for (const Model* m : {cpu.get(), ref.get()}) {
    auto runner = std::move(BatchRunner::create(*m, 1, 512, KvType::F32, 16)).value();
    const size_t nv = static_cast<size_t>(m->hparams().n_vocab);
    std::vector<float> logits;
    for (size_t i = 0; i < golden.size(); i += 64) {
      Batch b;
      for (size_t j = i; j < std::min(golden.size(), i + 64); ++j) b.add(golden[j], static_cast<int32_t>(j), SeqId(0), true);
      ASSERT_TRUE(runner->forward(b, logits).is_ok());
      for (size_t r = 0; r < b.size(); ++r) rows[i_model].emplace_back(logits.begin() + r * nv, logits.begin() + (r + 1) * nv);
    }
    ++i_model;
  }
  ASSERT_EQ(rows[0].size(), golden.size());
  ASSERT_EQ(rows[1].size(), golden.size());
  for (size_t t = 0; t < golden.size(); ++t)
    for (size_t v = 0; v < rows[0][t].size(); ++v) worst = std::max(worst, std::fabs(double(rows[0][t][v]) - rows[1][t][v]));
  EXPECT_LT(worst, kLogitsF32);
  record("stories_prefill_logit_diff", worst);
}

// ---- synthetic architecture cases (as tests/model/test_archs.cpp builds them) -------

struct ArchCase {
  std::string name;
  SynthSpec spec;
  GgmlType type = GgmlType::F32;
  KvType kv = KvType::F32;
  size_t n_prompt = 8;
};

std::vector<ArchCase> arch_cases() {
  std::vector<ArchCase> cases;
  auto add = [&](std::string name, auto&& edit, GgmlType type = GgmlType::F32, size_t n_prompt = 8) {
    ArchCase c;
    c.name = std::move(name);
    edit(c.spec);
    c.type = type;
    c.n_prompt = n_prompt;
    cases.push_back(c);
  };
  add("llama_gqa_untied_output", [](SynthSpec&) {});
  add("llama_gqa_tied_output", [](SynthSpec& s) { s.tied_output = true; s.seed = 2; });
  add("qwen2_neox_biases_freq_base", [](SynthSpec& s) {
    s.arch = "qwen2"; s.n_head = 4; s.n_head_kv = 2; s.qkv_bias = true; s.freq_base = 1e6; s.rms_eps = 1e-6f; s.seed = 3;
  });
  add("mistral_sliding_window", [](SynthSpec& s) { s.arch = "mistral"; s.sliding_window = 4; s.seed = 4; });
  // Gemma: GeGLU, soft-caps (attention and logits), post-norms, local/global layers (tests/model/test_gemma.cpp).
  add("gemma2_softcaps_local_layers", [](SynthSpec& s) {
    s.arch = "gemma2"; s.n_layer = 4; s.n_head = 4; s.n_head_kv = 2; s.tied_output = true; s.sliding_window = 4;
    s.attn_softcap = 1.5; s.final_softcap = 2.5; s.rms_eps = 1e-6f; s.seed = 31;
  }, GgmlType::F32, 12);
  add("gemma3_qk_norm_local_rope", [](SynthSpec& s) {
    s.arch = "gemma3"; s.n_layer = 7; s.n_head = 4; s.n_head_kv = 2; s.tied_output = true; s.sliding_window = 4;
    s.freq_base = 1e6; s.scaling_type = "linear"; s.scaling_factor = 8.0; s.rms_eps = 1e-6f; s.seed = 35;
  }, GgmlType::F32, 12);
  for (const char* arch : {"llama", "qwen2"})
    add(std::string("partial_rotary_") + arch, [&](SynthSpec& s) { s.arch = arch; s.n_head = 4; s.n_head_kv = 2; s.n_rot = 8; s.seed = 5; });
  add("rope_linear_scaling", [](SynthSpec& s) { s.n_head = 4; s.n_head_kv = 2; s.scaling_type = "linear"; s.scaling_factor = 4.0; s.seed = 6; });
  // YaRN over an original context of 64: the prompt runs past it.
  for (const char* arch : {"llama", "qwen2"})
    add(std::string("rope_yarn_") + arch, [&](SynthSpec& s) {
      s.arch = arch; s.n_head = 4; s.n_head_kv = 2; s.scaling_type = "yarn"; s.scaling_factor = 4.0; s.yarn_orig_ctx = 64; s.seed = 7;
    }, GgmlType::F32, 56);
  add("llama3_rope_freqs", [](SynthSpec& s) {
    s.n_head = 4; s.n_head_kv = 2; s.freq_base = 500000.0; s.rope_freqs = {1, 4, 0.25f, 8, 0.1f, 16, 0.05f, 0.02f}; s.seed = 31;
  });
  add("qwen3_qk_norm", [](SynthSpec& s) { s.arch = "qwen3"; s.key_length = 16; s.freq_base = 1e6; s.seed = 32; });
  add("phi3_fused_long_rope", [](SynthSpec& s) {
    s.arch = "phi3"; s.n_head = 4; s.n_head_kv = 4; s.yarn_orig_ctx = 4; s.attn_factor = 1.25f; s.seed = 33;
    s.rope_long = {1, 4, 0.25f, 8, 0.1f, 16, 0.05f, 0.02f};
    s.rope_short = {1, 0.5f, 2, 0.2f, 6, 0.03f, 1, 0.01f};
  });
  for (int key_length : {24, 8})
    add("key_length_" + std::to_string(key_length), [&](SynthSpec& s) { s.n_head = 4; s.n_head_kv = 2; s.key_length = key_length; s.seed = 8; });
  for (GgmlType t : {GgmlType::F16, GgmlType::BF16, GgmlType::Q8_0, GgmlType::Q4_0, GgmlType::MXFP4})
    add("weights_" + std::string(gguf::type_name(t)), [](SynthSpec& s) { s.seed = 9; }, t);
  // Row lengths of 256 for the super-block types; weights scaled by
  // sqrt(64 / 256) so that dot products, and logits, are as large as in the
  // 64-wide models above.
  for (GgmlType t : {GgmlType::IQ4_NL, GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K})
    add("weights_" + std::string(gguf::type_name(t)), [](SynthSpec& s) {
      s.n_embd = 256; s.n_ff = 512; s.n_vocab = 96; s.seed = 12; s.weight_std = 0.075f;
    }, t);
  for (KvType kv : {KvType::F16, KvType::Q8_0, KvType::Q4_0, KvType::Fp8}) {
    ArchCase c = cases.front();
    c.name = std::string("llama_") + kv_type_name(kv) + "_kv_cache";
    c.kv = kv;
    cases.push_back(c);
  }
  return cases;
}

double logits_budget(GgmlType t) {
  if (t == GgmlType::F32 || t == GgmlType::F16) return kLogitsF32;
  return t == GgmlType::BF16 ? kLogitsBf16 : kLogitsBlocks;
}

std::unique_ptr<Model> load_case(const ArchCase& c, std::shared_ptr<backend::Backend> be) {
  auto file = test::to_gguf(test::make_synthetic(c.spec), c.type);
  EXPECT_TRUE(file.is_ok()) << file.status().message();
  if (!file) return nullptr;
  auto m = Model::from_gguf(std::move(file).value(), std::move(be));
  EXPECT_TRUE(m.is_ok()) << m.status().message();
  return m ? std::move(m).value() : nullptr;
}

constexpr int kDecodeSteps = 24;

// The case's run on `be` next to the reference backend's. Free-running: each
// decodes its own greedy tokens. Forced: `be` is fed the reference's choices.
Comparison run_case(const ArchCase& c, std::shared_ptr<backend::Backend> be, bool forced) {
  auto m = load_case(c, std::move(be));
  auto ref = load_case(c, backend::make_ref_backend());
  if (!m || !ref) return {};
  std::mt19937 rng(c.spec.seed);
  std::uniform_int_distribution<int> tok(0, c.spec.n_vocab - 1);
  std::vector<int> prompt(c.n_prompt);
  for (int& t : prompt) t = tok(rng);
  const Greedy g_ref = decode(*ref, prompt, kDecodeSteps, c.kv);
  const Greedy g = decode(*m, prompt, kDecodeSteps, c.kv, forced ? &g_ref.tokens : nullptr);
  return compare(g, g_ref, logits_budget(c.type));
}

// F32 and F16 weights (every architecture feature): the same greedy tokens,
// free-running, and that by a wide margin (no step is a near tie).
TEST(BackendModels, SyntheticArchitecturesSameGreedyTokens) {
  for (const ArchCase& c : arch_cases()) {
    if (logits_budget(c.type) != kLogitsF32) continue;
    SCOPED_TRACE(c.name);
    const Comparison r = run_case(c, backend::make_cpu_backend(2, true), /*forced=*/false);
    EXPECT_TRUE(r.same_tokens);
    EXPECT_LT(r.max_logit_diff, kLogitsF32);
    EXPECT_EQ(r.n_near_ties, 0) << "equal tokens would be luck, not a consequence of the budget";
    record(c.name + "_logit_diff", r.max_logit_diff);
    record(c.name + "_min_top2_gap", r.min_top2_gap);
  }
}

// BF16 and block types: the CPU kernels round activations (to bf16, or Q8_0 /
// Q8_K blocks) where the reference multiplies exact ones, which moves logits
// by O(0.1); random models have steps whose top two logits are closer than
// that (a third to two thirds of the steps here), where the backends may
// choose differently, after which free-running sequences part (measured: 2
// of 7 cases stay equal for 25 steps). So the CPU is fed the reference's
// greedy tokens, and on the same tokens every step's logits must be within
// the type's budget and the greedy choice the same on at least 4 steps in 5
// (measured 23..25 of 25; a wrong op agrees on few).
TEST(BackendModels, SyntheticQuantizedWeightsOnTheSameTokens) {
  for (const ArchCase& c : arch_cases()) {
    if (logits_budget(c.type) == kLogitsF32) continue;
    SCOPED_TRACE(c.name);
    const Comparison r = run_case(c, backend::make_cpu_backend(2, true), /*forced=*/true);
    EXPECT_LT(r.max_logit_diff, logits_budget(c.type));
    EXPECT_GE(5 * r.n_same_choice, 4 * r.n_steps) << r.n_same_choice << " of " << r.n_steps;
    record(c.name + "_logit_diff", r.max_logit_diff);
    record(c.name + "_min_top2_gap", r.min_top2_gap);
    record(c.name + "_near_ties", r.n_near_ties);
    record(c.name + "_same_choice", r.n_same_choice);
    record(c.name + "_same_free_running", r.same_tokens);
  }
}

// ---- switched off is detected ------------------------------------------------------

const ArchCase& find_case(const std::vector<ArchCase>& cases, const std::string& name) {
  for (const ArchCase& c : cases)
    if (c.name == name) return c;
  ADD_FAILURE() << "no case " << name;
  return cases.front();
}

std::shared_ptr<backend::Backend> faulty(Fault f) {
  return std::make_shared<test::FaultyBackend>(backend::make_ref_backend(), f);
}

// The wrapper itself is faithful: with no fault it passes (bit-identical to the reference).
TEST(BackendModels, FaultFreeWrapperPasses) {
  const auto cases = arch_cases();
  const Comparison r = run_case(find_case(cases, "qwen2_neox_biases_freq_base"), faulty(Fault::None), false);
  EXPECT_TRUE(r.same_tokens);
  EXPECT_EQ(r.max_logit_diff, 0.0);
}

// Each broken op, on a case that uses it, fails the comparison the CPU backend passes.
TEST(BackendModels, BrokenOpIsDetected) {
  const auto cases = arch_cases();
  const struct {
    Fault fault;
    const char* case_name;
  } faults[] = {
      {Fault::RopeNormalPairs, "qwen2_neox_biases_freq_base"},
      {Fault::NoBias, "qwen2_neox_biases_freq_base"},
      {Fault::RopeFullRotary, "partial_rotary_llama"},
      {Fault::NoWindow, "mistral_sliding_window"},
      {Fault::SiluOnly, "llama_gqa_untied_output"},
      {Fault::MatmulDropsRow, "weights_Q4_K"},
  };
  for (const auto& f : faults) {
    const ArchCase& c = find_case(cases, f.case_name);
    SCOPED_TRACE(::testing::Message() << "fault " << static_cast<int>(f.fault) << " on " << c.name);
    // Forced: the logits of the same tokens, so the difference is the op's alone.
    const Comparison r = run_case(c, faulty(f.fault), /*forced=*/true);
    EXPECT_GT(r.max_logit_diff, 3 * logits_budget(c.type)) << "a wrong op stayed within the budget";
    EXPECT_LT(5 * r.n_same_choice, 4 * r.n_steps) << "a wrong op still agreed on most greedy choices";
    record("fault_" + std::to_string(static_cast<int>(f.fault)) + "_logit_diff", r.max_logit_diff);
    record("fault_" + std::to_string(static_cast<int>(f.fault)) + "_same_choice", r.n_same_choice);
  }
}

}  // namespace
}  // namespace tern
