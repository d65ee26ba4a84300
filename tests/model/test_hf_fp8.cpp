// FP8 Hugging Face checkpoints (model/hf_model.h): a random llama written by
// the test's own writer, its q/k/v/o/gate/up/down matrices then replaced by
// E4M3 codes and weight_scale tensors — one scale per tensor, per row, or per
// 32 x 32 block — against the same checkpoint holding the values those codes
// stand for (code x scale) in F32. Loaded directly and converted, the two give
// the same logits; a per-row or per-tensor FP8 matrix keeps its codes byte for
// byte; MoE experts the same, stacked; bad scales and other quantization
// methods are refused by name.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "arch_checks.h"
#include "core/fp8.h"
#include "gguf/safetensors.h"
#include "hf_writer.h"
#include "model/hf_model.h"
#include "model/quant_rules.h"

namespace tern {
namespace {

using namespace test;  // arch_checks.h, hf_writer.h
using json = nlohmann::json;

enum class ScaleKind { Tensor, Row, Block };
constexpr int kBlock = 32;

std::vector<uint8_t> f32_bytes(const std::vector<float>& v) {
  std::vector<uint8_t> b(v.size() * 4);
  std::memcpy(b.data(), v.data(), b.size());
  return b;
}

struct Fp8Dirs {
  std::string fp8, values;  // the FP8 checkpoint, and the F32 one of its values
  std::map<std::string, std::vector<uint8_t>> codes;  // each FP8 matrix's codes, as written
};

// Writes `sm` twice (F32), then rewrites each *_proj.weight of the first as E4M3
// codes plus scales of `kind`, and the second with code x scale in F32.
Fp8Dirs write_fp8_dirs(SyntheticModel& sm, const SynthSpec& spec, const std::string& name, ScaleKind kind,
                       const std::string& method = "fp8") {
  Fp8Dirs d{fresh_dir(name + "_fp8"), fresh_dir(name + "_values"), {}};
  HfDirOptions o;
  o.extra_config["quantization_config"] = {{"quant_method", method}, {"activation_scheme", "dynamic"}};
  if (kind == ScaleKind::Block) o.extra_config["quantization_config"]["weight_block_size"] = {kBlock, kBlock};
  write_hf_dir(sm, spec, d.fp8, o);
  write_hf_dir(sm, spec, d.values);
  auto ck = safetensors::SafetensorsCheckpoint::open(d.fp8);
  EXPECT_TRUE(ck) << ck.status().message();
  std::vector<StTensor> fp8, values;
  for (const std::string& n : ck->names()) {
    const safetensors::Tensor& t = *ck->find(n);
    StTensor plain{n, t.dtype, t.shape, std::vector<uint8_t>(t.bytes.begin(), t.bytes.end())};
    if (!n.ends_with("_proj.weight")) {
      fp8.push_back(plain);
      values.push_back(plain);
      continue;
    }
    const size_t rows = t.shape[0], cols = t.shape[1];
    std::vector<float> w(rows * cols);
    std::memcpy(w.data(), t.bytes.data(), w.size() * 4);
    const size_t gr = (rows + kBlock - 1) / kBlock, gc = (cols + kBlock - 1) / kBlock;
    std::vector<float> scale(kind == ScaleKind::Tensor ? 1 : kind == ScaleKind::Row ? rows : gr * gc, 0.0f);
    auto slot = [&](size_t r, size_t c) -> float& {
      return kind == ScaleKind::Tensor ? scale[0] : kind == ScaleKind::Row ? scale[r] : scale[r / kBlock * gc + c / kBlock];
    };
    for (size_t r = 0; r < rows; ++r)
      for (size_t c = 0; c < cols; ++c) slot(r, c) = std::max(slot(r, c), std::fabs(w[r * cols + c]) / 448.0f);
    std::vector<uint8_t> codes(rows * cols);
    std::vector<float> dequant(rows * cols);
    for (size_t r = 0; r < rows; ++r)
      for (size_t c = 0; c < cols; ++c) {
        const float s = slot(r, c);
        codes[r * cols + c] = float_to_fp8_e4m3(w[r * cols + c] / s);
        dequant[r * cols + c] = fp8_e4m3_to_float(codes[r * cols + c]) * s;
      }
    const std::string base = n.substr(0, n.size() - 7);
    d.codes[n] = codes;
    fp8.push_back({n, "F8_E4M3", t.shape, codes});
    const std::vector<uint64_t> sshape = kind == ScaleKind::Tensor ? std::vector<uint64_t>{}
                                         : kind == ScaleKind::Row  ? std::vector<uint64_t>{rows, 1}
                                                                   : std::vector<uint64_t>{gr, gc};
    // DeepSeek's block checkpoints call the multiplier weight_scale_inv.
    fp8.push_back({base + (kind == ScaleKind::Block ? ".weight_scale_inv" : ".weight_scale"), "F32", sshape, f32_bytes(scale)});
    fp8.push_back({base + ".input_scale", "F32", {}, f32_bytes({1.0f})});  // static activation scale: not needed
    values.push_back({n, "F32", t.shape, f32_bytes(dequant)});
  }
  write_bytes(d.fp8 + "/model.safetensors", safetensors_bytes(fp8));
  write_bytes(d.values + "/model.safetensors", safetensors_bytes(values));
  return d;
}

Rows logits_of(const std::string& path, const std::vector<int>& tokens) {
  auto m = Model::load(path);
  EXPECT_TRUE(m) << m.status().message();
  return m ? run(**m, tokens, {tokens.size()}, 1) : Rows{};
}

Status convert(const std::string& dir, const std::string& out, const char* scheme) {
  ThreadPool pool(2);
  auto r = hf::convert_hf_model(dir, out, *find_quant_scheme(scheme), {}, pool);
  return r.is_ok() ? Status::ok() : r.status();
}

// The logits of `dir` converted to F8_E4M3 at `out` (each row re-quantized
// from its decoded values when the scales are block-wise) and of the values'
// checkpoint converted the same way: equal for block scales.
void expect_block_conversion_as_values(const Fp8Dirs& d, const Rows& converted, const std::vector<int>& tokens) {
  const std::string vf8 = d.values + "-F8.gguf";
  ASSERT_TRUE(convert(d.values, vf8, "F8_E4M3"));
  EXPECT_EQ(max_diff(converted, logits_of(vf8, tokens)), 0.0);
  std::filesystem::remove(vf8);
}

// Loaded directly, the FP8 checkpoint gives its values' logits (the FP8
// kernels multiply the row scale after the sum: f32 rounding only).
Rows expect_direct_as_values(const Fp8Dirs& d, const std::vector<int>& tokens) {
  const Rows want = logits_of(d.values, tokens);
  const Rows direct = logits_of(d.fp8, tokens);
  EXPECT_EQ(direct.size(), want.size());
  EXPECT_LT(max_diff(direct, want), kTol);
  return want;
}

TEST(HfFp8, LoadsAndConvertsAsTheValuesItStandsFor) {
  for (ScaleKind kind : {ScaleKind::Tensor, ScaleKind::Row, ScaleKind::Block}) {
    const char* label = kind == ScaleKind::Tensor ? "per tensor" : kind == ScaleKind::Row ? "per row" : "per block";
    SCOPED_TRACE(label);
    SynthSpec s;
    s.seed = 31 + static_cast<uint32_t>(kind);
    SyntheticModel sm = make_synthetic(s);
    const Fp8Dirs d = write_fp8_dirs(sm, s, std::string("fp8_") + std::to_string(static_cast<int>(kind)), kind);
    const auto tokens = random_tokens(20, s.n_vocab, s.seed);
    const Rows want = expect_direct_as_values(d, tokens);
    auto view = hf::open_model_file(d.fp8);
    ASSERT_TRUE(view) << view.status().message();
    const gguf::TensorInfo* q = view->find_tensor("blk.0.attn_q.weight");
    ASSERT_TRUE(q);
    EXPECT_EQ(q->type, kind == ScaleKind::Block ? gguf::GgmlType::F32 : gguf::GgmlType::F8_E4M3);
    EXPECT_EQ(view->find_tensor("blk.0.attn_q.scale") != nullptr, kind != ScaleKind::Block);

    // Converted keeping FP8: a per-tensor or per-row matrix's codes pass through (v: no permutation);
    // block scales are decoded and each row re-quantized with its own scale.
    const std::string f8 = d.fp8 + "-F8.gguf";
    const Status cs = convert(d.fp8, f8, "F8_E4M3");
    ASSERT_TRUE(cs) << cs.message();
    const Rows converted = logits_of(f8, tokens);
    if (kind == ScaleKind::Block) {
      expect_block_conversion_as_values(d, converted, tokens);
    } else {
      // The F8 scheme's embeddings and head are Q8_0 (the view keeps them F32): the logits differ by that.
      EXPECT_LT(max_diff(converted, want), 0.25);
      auto g = gguf::GgufFile::open(f8);
      ASSERT_TRUE(g);
      const gguf::TensorInfo* v = g->find_tensor("blk.1.attn_v.weight");
      const auto& v_codes = d.codes.at("model.layers.1.self_attn.v_proj.weight");
      ASSERT_TRUE(v && v->type == gguf::GgmlType::F8_E4M3);
      ASSERT_EQ(v->n_bytes, v_codes.size());
      EXPECT_EQ(std::memcmp(v->data, v_codes.data(), v_codes.size()), 0);
      // attn_q: the checkpoint's rows in llama.cpp's order (within a head, HF row j * hd/2 + m is GGUF row 2m + j).
      const gguf::TensorInfo* gq = g->find_tensor("blk.0.attn_q.weight");
      const gguf::TensorInfo* gs = g->find_tensor("blk.0.attn_q.scale");
      const auto& q_codes = d.codes.at("model.layers.0.self_attn.q_proj.weight");
      ASSERT_TRUE(gq && gs && gq->type == gguf::GgmlType::F8_E4M3);
      const int64_t cols = static_cast<int64_t>(gq->dims[0]), rows = static_cast<int64_t>(gq->dims[1]);
      const int64_t hd = rows / s.n_head;
      for (int64_t r = 0; r < rows; ++r) {
        const int64_t h = r / hd, i = r % hd, src = h * hd + (i % 2) * (hd / 2) + i / 2;
        ASSERT_EQ(std::memcmp(gq->data + r * cols, q_codes.data() + src * cols, static_cast<size_t>(cols)), 0) << r;
      }
      EXPECT_EQ(gs->dims[0], static_cast<uint64_t>(rows));
    }
    // Converted to F16: the values, rounded to half.
    const std::string f16 = d.fp8 + "-F16.gguf";
    const Status hs = convert(d.fp8, f16, "F16");
    ASSERT_TRUE(hs) << hs.message();
    EXPECT_LT(max_diff(logits_of(f16, tokens), want), 0.02);  // every matrix rounded to half
    std::filesystem::remove_all(d.fp8);
    std::filesystem::remove_all(d.values);
    std::filesystem::remove(f8);
    std::filesystem::remove(f16);
  }
}

// An FP8 MoE checkpoint (qwen3_moe; every expert's gate/up/down FP8 with its
// own scales, as Qwen3-MoE-FP8 and DeepSeek ship them): the stacked experts
// give the values' logits loaded directly and converted; per-tensor and
// per-row scales keep the experts' codes (stacked, scales as [rows, experts]),
// block scales decode to f32.
TEST(HfFp8, MoeExpertsLoadAndConvertAsTheirValues) {
  for (ScaleKind kind : {ScaleKind::Tensor, ScaleKind::Row, ScaleKind::Block}) {
    const char* label = kind == ScaleKind::Tensor ? "per tensor" : kind == ScaleKind::Row ? "per row" : "per block";
    SCOPED_TRACE(label);
    SynthSpec s;
    s.arch = "qwen3moe";
    s.n_expert = 4;
    s.n_expert_used = 2;
    s.n_ff = 64;
    s.n_ff_exp = 32;
    s.seed = 51 + static_cast<uint32_t>(kind);
    SyntheticModel sm = make_synthetic(s);
    for (SynthTensor& t : sm.tensors)
      if (t.name.find("ffn_gate_inp.weight") != std::string::npos)
        for (float& v : t.data) v *= 4.0f;  // clear routing margins: f32 rounding order never flips an expert
    const Fp8Dirs d = write_fp8_dirs(sm, s, std::string("fp8_moe_") + std::to_string(static_cast<int>(kind)), kind);
    const auto tokens = random_tokens(20, s.n_vocab, s.seed);
    const Rows want = expect_direct_as_values(d, tokens);
    auto view = hf::open_model_file(d.fp8);
    ASSERT_TRUE(view) << view.status().message();
    const gguf::TensorInfo* e = view->find_tensor("blk.1.ffn_down_exps.weight");
    ASSERT_TRUE(e);
    EXPECT_EQ(e->type, kind == ScaleKind::Block ? gguf::GgmlType::F32 : gguf::GgmlType::F8_E4M3);
    if (kind != ScaleKind::Block) {
      const gguf::TensorInfo* es = view->find_tensor("blk.1.ffn_down_exps.scale");
      ASSERT_TRUE(es);
      EXPECT_EQ(es->n_dims, 2u);
      EXPECT_EQ(es->dims[0], e->dims[1]);
      EXPECT_EQ(es->dims[1], e->dims[2]);
    }
    const std::string f8 = d.fp8 + "-F8.gguf";
    const Status cs = convert(d.fp8, f8, "F8_E4M3");
    ASSERT_TRUE(cs) << cs.message();
    const Rows converted = logits_of(f8, tokens);
    if (kind == ScaleKind::Block) {
      expect_block_conversion_as_values(d, converted, tokens);
    } else {
      EXPECT_LT(max_diff(converted, want), 0.25);  // the F8 scheme's embeddings and head are Q8_0
      auto g = gguf::GgufFile::open(f8);
      ASSERT_TRUE(g);
      const gguf::TensorInfo* gd = g->find_tensor("blk.1.ffn_down_exps.weight");
      ASSERT_TRUE(gd && gd->type == gguf::GgmlType::F8_E4M3);
      const size_t per_expert = gd->dims[0] * gd->dims[1];
      for (int x = 0; x < s.n_expert; ++x) {
        const auto& codes = d.codes.at("model.layers.1.mlp.experts." + std::to_string(x) + ".down_proj.weight");
        ASSERT_EQ(codes.size(), per_expert);
        EXPECT_EQ(std::memcmp(gd->data + x * per_expert, codes.data(), per_expert), 0) << "expert " << x;
      }
    }
    std::filesystem::remove_all(d.fp8);
    std::filesystem::remove_all(d.values);
    std::filesystem::remove(f8);
  }
}

TEST(HfFp8, BadScalesAndOtherMethodsAreRefusedByName) {
  SynthSpec s;
  s.seed = 41;
  SyntheticModel sm = make_synthetic(s);
  const Fp8Dirs d = write_fp8_dirs(sm, s, "fp8_bad", ScaleKind::Row);
  // One scale of the wrong shape.
  auto ck = safetensors::SafetensorsCheckpoint::open(d.fp8);
  ASSERT_TRUE(ck);
  std::vector<StTensor> ts;
  for (const std::string& n : ck->names()) {
    const safetensors::Tensor& t = *ck->find(n);
    ts.push_back({n, t.dtype, t.shape, std::vector<uint8_t>(t.bytes.begin(), t.bytes.end())});
    if (n == "model.layers.0.mlp.up_proj.weight_scale") {
      ts.back().shape = {2, 3};
      ts.back().bytes = f32_bytes({1, 1, 1, 1, 1, 1});
    }
  }
  write_bytes(d.fp8 + "/model.safetensors", safetensors_bytes(ts));
  auto m = Model::load(d.fp8);
  ASSERT_FALSE(m);
  EXPECT_NE(m.status().message().find("model.layers.0.mlp.up_proj.weight_scale"), std::string::npos) << m.status().message();
  // Another quantization method is refused by its name.
  const Fp8Dirs g = write_fp8_dirs(sm, s, "fp8_gptq", ScaleKind::Row, "gptq");
  auto mg = Model::load(g.fp8);
  ASSERT_FALSE(mg);
  EXPECT_NE(mg.status().message().find("'gptq'"), std::string::npos) << mg.status().message();
  for (const auto* dir : {&d.fp8, &d.values, &g.fp8, &g.values}) std::filesystem::remove_all(*dir);
}

}  // namespace
}  // namespace tern
