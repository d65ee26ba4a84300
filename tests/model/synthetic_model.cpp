#include "synthetic_model.h"

#include <algorithm>
#include <random>

#include "gguf/writer.h"
#include "quant/quant.h"

namespace tern::test {
namespace {

using gguf::GgmlType;
using gguf::Value;

class Filler {
 public:
  explicit Filler(uint32_t seed) : rng_(seed) {}
  std::vector<float> normal(size_t n, float mean, float std) {
    std::normal_distribution<float> d(mean, std);
    std::vector<float> v(n);
    for (float& x : v) x = d(rng_);
    return v;
  }

 private:
  std::mt19937 rng_;
};

void add_metadata(SyntheticModel& m, const SynthSpec& s) {
  const std::string p = s.arch + ".";
  m.set("general.architecture", Value::of_string(s.arch));
  m.set("general.name", Value::of_string("synthetic-" + s.arch));
  m.set(p + "context_length", Value::of_u32(s.n_ctx_train));
  m.set(p + "embedding_length", Value::of_u32(s.n_embd));
  m.set(p + "block_count", Value::of_u32(s.n_layer));
  m.set(p + "feed_forward_length", Value::of_u32(s.n_ff));
  m.set(p + "attention.head_count", Value::of_u32(s.n_head));
  if (s.layer_n_head_kv.empty())
    m.set(p + "attention.head_count_kv", Value::of_u32(s.n_head_kv));
  else
    m.set(p + "attention.head_count_kv", Value::of_i32s(s.layer_n_head_kv));
  m.set(p + "attention.layer_norm_rms_epsilon", Value::of_f32(s.rms_eps));
  if (s.key_length > 0) {
    m.set(p + "attention.key_length", Value::of_u32(s.key_length));
    m.set(p + "attention.value_length", Value::of_u32(s.key_length));
  }
  if (s.n_rot > 0) m.set(p + "rope.dimension_count", Value::of_u32(s.n_rot));
  if (s.freq_base > 0.0) m.set(p + "rope.freq_base", Value::of_f32(static_cast<float>(s.freq_base)));
  if (!s.scaling_type.empty()) {
    m.set(p + "rope.scaling.type", Value::of_string(s.scaling_type));
    m.set(p + "rope.scaling.factor", Value::of_f32(static_cast<float>(s.scaling_factor)));
  }
  if (s.yarn_orig_ctx > 0) m.set(p + "rope.scaling.original_context_length", Value::of_u32(s.yarn_orig_ctx));
  if (s.attn_factor > 0.0f) m.set(p + "rope.scaling.attn_factor", Value::of_f32(s.attn_factor));
  if (!s.layer_sliding_window.empty())
    m.set(p + "attention.sliding_window", Value::of_i32s(s.layer_sliding_window));
  else if (s.sliding_window > 0)
    m.set(p + "attention.sliding_window", Value::of_u32(s.sliding_window));
  if (s.attn_softcap > 0.0) m.set(p + "attn_logit_softcapping", Value::of_f32(static_cast<float>(s.attn_softcap)));
  if (s.final_softcap > 0.0) m.set(p + "final_logit_softcapping", Value::of_f32(static_cast<float>(s.final_softcap)));
  if (s.window_pattern > 0) m.set(p + "attention.sliding_window_pattern", Value::of_u32(s.window_pattern));
  if (s.freq_base_swa > 0.0) m.set(p + "rope.freq_base_swa", Value::of_f32(static_cast<float>(s.freq_base_swa)));
  if (s.is_moe()) {
    m.set(p + "expert_count", Value::of_u32(s.n_expert));
    m.set(p + "expert_used_count", Value::of_u32(s.n_expert_used));
    if (s.n_ff_exp > 0) m.set(p + "expert_feed_forward_length", Value::of_u32(s.n_ff_exp));
    if (s.n_ff_shexp > 0) m.set(p + "expert_shared_feed_forward_length", Value::of_u32(s.n_ff_shexp));
  }
}

}  // namespace

SynthTensor* SyntheticModel::find_tensor(const std::string& name) {
  for (auto& t : tensors)
    if (t.name == name) return &t;
  return nullptr;
}

void SyntheticModel::remove_tensor(const std::string& name) {
  std::erase_if(tensors, [&](const SynthTensor& t) { return t.name == name; });
}

void SyntheticModel::set(const std::string& key, gguf::Value value) {
  for (auto& [k, v] : metadata)
    if (k == key) {
      v = std::move(value);
      return;
    }
  metadata.emplace_back(key, std::move(value));
}

SyntheticModel make_synthetic(const SynthSpec& s) {
  SyntheticModel m;
  add_metadata(m, s);
  Filler fill(s.seed);
  const uint64_t n_embd = s.n_embd, n_ff = s.n_ff, n_vocab = s.n_vocab;
  const uint64_t q_dim = uint64_t(s.n_head) * s.head_dim();
  auto matrix = [&](std::string name, uint64_t n_cols, uint64_t n_rows) {
    m.tensors.push_back({std::move(name), {n_cols, n_rows}, fill.normal(n_cols * n_rows, 0.0f, s.weight_std), {}});
  };
  auto vector = [&](std::string name, uint64_t n, float mean, float std) {
    m.tensors.push_back({std::move(name), {n}, fill.normal(n, mean, std), {}});
  };
  const bool fused = s.arch == "phi3", qk_norm = s.arch == "qwen3" || s.arch == "qwen3moe";
  matrix("token_embd.weight", n_embd, n_vocab);
  for (auto [name, values] : {std::pair{"rope_freqs.weight", &s.rope_freqs}, std::pair{"rope_factors_long.weight", &s.rope_long},
                              std::pair{"rope_factors_short.weight", &s.rope_short}})
    if (!values->empty()) m.tensors.push_back({name, {values->size()}, *values, {}});
  for (int il = 0; il < s.n_layer; ++il) {
    const std::string p = "blk." + std::to_string(il) + ".";
    const uint64_t kv_dim = uint64_t(s.n_head_kv_of(il)) * s.head_dim();
    vector(p + "attn_norm.weight", n_embd, 1.0f, 0.1f);
    if (fused) {
      matrix(p + "attn_qkv.weight", n_embd, q_dim + 2 * kv_dim);
    } else {
      matrix(p + "attn_q.weight", n_embd, q_dim);
      matrix(p + "attn_k.weight", n_embd, kv_dim);
      matrix(p + "attn_v.weight", n_embd, kv_dim);
    }
    if (qk_norm) {
      vector(p + "attn_q_norm.weight", static_cast<uint64_t>(s.head_dim()), 1.0f, 0.3f);
      vector(p + "attn_k_norm.weight", static_cast<uint64_t>(s.head_dim()), 1.0f, 0.3f);
    }
    if (s.qkv_bias) {
      vector(p + "attn_q.bias", q_dim, 0.0f, s.bias_std);
      vector(p + "attn_k.bias", kv_dim, 0.0f, s.bias_std);
      vector(p + "attn_v.bias", kv_dim, 0.0f, s.bias_std);
    }
    matrix(p + "attn_output.weight", q_dim, n_embd);
    vector(p + "ffn_norm.weight", n_embd, 1.0f, 0.1f);
    if (s.is_moe()) {
      const uint64_t n_exp = s.n_expert, rows = s.expert_rows();
      matrix(p + "ffn_gate_inp.weight", n_embd, n_exp);
      auto experts = [&](std::string name, uint64_t n_cols, uint64_t n_rows) {
        m.tensors.push_back({std::move(name), {n_cols, n_rows, n_exp},
                             fill.normal(n_cols * n_rows * n_exp, 0.0f, s.weight_std), {}});
      };
      experts(p + "ffn_gate_exps.weight", n_embd, rows);
      experts(p + "ffn_up_exps.weight", n_embd, rows);
      experts(p + "ffn_down_exps.weight", rows, n_embd);
      if (s.arch == "qwen2moe") {
        const uint64_t sh = s.n_ff_shexp > 0 ? s.n_ff_shexp : n_ff;
        vector(p + "ffn_gate_inp_shexp.weight", n_embd, 0.0f, s.weight_std);
        matrix(p + "ffn_gate_shexp.weight", n_embd, sh);
        matrix(p + "ffn_up_shexp.weight", n_embd, sh);
        matrix(p + "ffn_down_shexp.weight", sh, n_embd);
      }
    } else if (fused) {
      matrix(p + "ffn_up.weight", n_embd, 2 * n_ff);
    } else {
      matrix(p + "ffn_gate.weight", n_embd, n_ff);
      matrix(p + "ffn_up.weight", n_embd, n_ff);
    }
    if (!s.is_moe()) matrix(p + "ffn_down.weight", n_ff, n_embd);
    if (s.arch == "gemma2" || s.arch == "gemma3") {
      vector(p + "post_attention_norm.weight", n_embd, 1.0f, 0.1f);
      vector(p + "post_ffw_norm.weight", n_embd, 1.0f, 0.1f);
    }
    if (s.arch == "gemma3") {
      vector(p + "attn_q_norm.weight", s.head_dim(), 1.0f, 0.1f);
      vector(p + "attn_k_norm.weight", s.head_dim(), 1.0f, 0.1f);
    }
  }
  vector("output_norm.weight", n_embd, 1.0f, 0.1f);
  if (!s.tied_output) matrix("output.weight", n_embd, n_vocab);
  return m;
}

Result<std::vector<uint8_t>> to_gguf_bytes(const SyntheticModel& m, gguf::GgmlType matrix_type) {
  gguf::GgufWriter w;
  for (const auto& [k, v] : m.metadata) w.set(k, v);
  for (const auto& t : m.tensors) {
    const GgmlType type = t.type ? *t.type : (t.dims.size() >= 2 ? matrix_type : GgmlType::F32);
    auto size = gguf::type_size(static_cast<uint32_t>(type));
    if (!size) return error(ErrorKind::InvalidArgument, "no size for the type of " + t.name);
    uint64_t n = 1;
    for (uint64_t d : t.dims) n *= d;
    std::vector<uint8_t> bytes(n / size->block_elems * size->block_bytes, 0);
    if (const quant::TypeTraits* tr = quant::traits(type)) {
      // Row by row: a block never spans two rows.
      const uint64_t n_cols = t.dims[0];
      const size_t row_bytes = quant::row_bytes(*tr, static_cast<int64_t>(n_cols));
      for (uint64_t r = 0; r < n / n_cols; ++r)
        tr->from_float(t.data.data() + r * n_cols, bytes.data() + r * row_bytes, static_cast<int64_t>(n_cols));
    }
    TERN_RETURN_IF_ERROR(w.add_tensor(t.name, type, t.dims, bytes));
  }
  return w.to_bytes();
}

Result<gguf::GgufFile> to_gguf(const SyntheticModel& m, gguf::GgmlType matrix_type) {
  auto bytes = to_gguf_bytes(m, matrix_type);
  if (!bytes) return bytes.status();
  return gguf::GgufFile::from_bytes(std::move(bytes).value());
}

}  // namespace tern::test
