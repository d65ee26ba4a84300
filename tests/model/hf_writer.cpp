#include "hf_writer.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <stdexcept>

#include "core/fp16.h"
#include "quant/quant.h"

namespace tern::test {
namespace {

using json = nlohmann::json;

// GGUF per-layer suffix → HF suffix (after "model.layers.N.").
std::string hf_layer_suffix(const std::string& arch, const std::string& gguf) {
  const bool gemma = arch == "gemma2" || arch == "gemma3";
  static const std::vector<std::pair<std::string, std::string>> rows = {
      {"attn_norm.weight", "input_layernorm.weight"},     {"attn_q.weight", "self_attn.q_proj.weight"},
      {"attn_k.weight", "self_attn.k_proj.weight"},       {"attn_v.weight", "self_attn.v_proj.weight"},
      {"attn_output.weight", "self_attn.o_proj.weight"},  {"attn_q.bias", "self_attn.q_proj.bias"},
      {"attn_k.bias", "self_attn.k_proj.bias"},           {"attn_v.bias", "self_attn.v_proj.bias"},
      {"attn_qkv.weight", "self_attn.qkv_proj.weight"},   {"attn_q_norm.weight", "self_attn.q_norm.weight"},
      {"attn_k_norm.weight", "self_attn.k_norm.weight"},  {"ffn_gate.weight", "mlp.gate_proj.weight"},
      {"ffn_down.weight", "mlp.down_proj.weight"},        {"post_ffw_norm.weight", "post_feedforward_layernorm.weight"},
      {"post_attention_norm.weight", "post_attention_layernorm.weight"},
  };
  if (gguf == "ffn_norm.weight") return gemma ? "pre_feedforward_layernorm.weight" : "post_attention_layernorm.weight";
  if (gguf == "ffn_gate_inp.weight") return arch == "llama" ? "block_sparse_moe.gate.weight" : "mlp.gate.weight";
  if (gguf == "ffn_gate_inp_shexp.weight") return "mlp.shared_expert_gate.weight";
  if (gguf == "ffn_gate_shexp.weight") return "mlp.shared_expert.gate_proj.weight";
  if (gguf == "ffn_up_shexp.weight") return "mlp.shared_expert.up_proj.weight";
  if (gguf == "ffn_down_shexp.weight") return "mlp.shared_expert.down_proj.weight";
  if (gguf == "ffn_up.weight") return arch == "phi3" ? "mlp.gate_up_proj.weight" : "mlp.up_proj.weight";
  for (const auto& [g, h] : rows)
    if (g == gguf) return h;
  throw std::runtime_error("hf_writer: no HF name for " + gguf);
}

// "" for tensors that go to config.json instead.
std::string hf_name(const std::string& arch, const std::string& gguf) {
  if (gguf == "token_embd.weight") return "model.embed_tokens.weight";
  if (gguf == "output_norm.weight") return "model.norm.weight";
  if (gguf == "output.weight") return "lm_head.weight";
  if (gguf.starts_with("rope_")) return "";
  const size_t dot = gguf.find('.', 4);
  return "model.layers." + gguf.substr(4, dot - 4) + "." + hf_layer_suffix(arch, gguf.substr(dot + 1));
}

// Rows of a GGUF-order (adjacent pairs) Q/K tensor back in HF's rotate-half order.
std::vector<float> unpermute(const std::vector<float>& v, size_t n_rows, size_t n_cols, size_t n_heads) {
  std::vector<float> out(v.size());
  const size_t hd = n_rows / n_heads;
  for (size_t h = 0; h < n_heads; ++h)
    for (size_t m = 0; m < hd / 2; ++m)
      for (size_t j = 0; j < 2; ++j)  // GGUF row h*hd + 2m + j came from HF row h*hd + j*hd/2 + m
        std::memcpy(&out[(h * hd + j * hd / 2 + m) * n_cols], &v[(h * hd + 2 * m + j) * n_cols], n_cols * sizeof(float));
  return out;
}

// Rounds `v` to dtype in place; returns its bytes.
std::vector<uint8_t> encode(std::vector<float>& v, const std::string& dtype) {
  std::vector<uint8_t> out;
  if (dtype == "F32") {
    out.resize(v.size() * 4);
    std::memcpy(out.data(), v.data(), out.size());
    return out;
  }
  out.resize(v.size() * 2);
  for (size_t i = 0; i < v.size(); ++i) {
    const uint16_t h = dtype == "F16" ? float_to_fp16(v[i]) : float_to_bf16(v[i]);
    v[i] = dtype == "F16" ? fp16_to_float(h) : bf16_to_float(h);
    std::memcpy(&out[2 * i], &h, 2);
  }
  return out;
}

// One expert's HF name (after "model.layers.N."), for GGUF's `kind` = gate, up or down.
std::string expert_suffix(bool mixtral, int e, const std::string& kind) {
  const std::string w = kind == "gate" ? "w1" : kind == "up" ? "w3" : "w2";
  return (mixtral ? "block_sparse_moe.experts." : "mlp.experts.") + std::to_string(e) + "." +
         (mixtral ? w : kind + "_proj") + ".weight";
}

std::string hf_model_type(const SynthSpec& s) {
  if (s.arch == "llama" && s.is_moe()) return "mixtral";
  if (s.arch == "qwen2moe") return "qwen2_moe";
  if (s.arch == "qwen3moe") return "qwen3_moe";
  return s.arch;
}

json config_of(const SynthSpec& s, const SyntheticModel& sm, const std::string& model_type) {
  json c;
  c["model_type"] = model_type;
  c["hidden_size"] = s.n_embd;
  c["num_hidden_layers"] = s.n_layer;
  c["intermediate_size"] = s.n_ff;
  c["num_attention_heads"] = s.n_head;
  c["num_key_value_heads"] = s.n_head_kv;
  c["vocab_size"] = s.n_vocab;
  c["max_position_embeddings"] = s.n_ctx_train;
  c["rms_norm_eps"] = s.rms_eps;
  c["rope_theta"] = s.freq_base > 0 ? s.freq_base : 10000.0;
  c["tie_word_embeddings"] = s.tied_output;
  if (s.key_length > 0) c["head_dim"] = s.key_length;
  if (s.arch == "gemma2" || s.arch == "gemma3") {
    c["head_dim"] = s.head_dim();
    c["query_pre_attn_scalar"] = s.head_dim();
    c["sliding_window"] = s.sliding_window > 0 ? s.sliding_window : (s.arch == "gemma2" ? 4096 : 0);
    if (s.window_pattern > 0) c["sliding_window_pattern"] = s.window_pattern;
    if (s.arch == "gemma2") {
      c["attn_logit_softcapping"] = s.attn_softcap > 0 ? s.attn_softcap : 50.0;
      c["final_logit_softcapping"] = s.final_softcap > 0 ? s.final_softcap : 30.0;
    } else {
      c["rope_local_base_freq"] = s.freq_base_swa > 0 ? s.freq_base_swa : 10000.0;
      if (s.final_softcap > 0) c["final_logit_softcapping"] = s.final_softcap;
    }
  }
  if (s.arch == "phi3") {
    c["sliding_window"] = s.sliding_window > 0 ? json(s.sliding_window) : json(nullptr);
    c["original_max_position_embeddings"] = s.yarn_orig_ctx > 0 ? s.yarn_orig_ctx : s.n_ctx_train;
    if (s.n_rot > 0) c["partial_rotary_factor"] = static_cast<double>(s.n_rot) / s.head_dim();
    if (!s.rope_long.empty())
      c["rope_scaling"] = {{"type", "longrope"}, {"long_factor", s.rope_long}, {"short_factor", s.rope_short}};
  }
  if ((model_type == "mistral" || model_type == "mixtral") && s.sliding_window > 0) c["sliding_window"] = s.sliding_window;
  if (s.is_moe()) {
    c[model_type == "mixtral" ? "num_local_experts" : "num_experts"] = s.n_expert;
    c["num_experts_per_tok"] = s.n_expert_used;
    if (model_type != "mixtral") {
      c["moe_intermediate_size"] = s.expert_rows();
      c["norm_topk_prob"] = s.arch == "qwen3moe";
      c["decoder_sparse_step"] = 1;
      c["mlp_only_layers"] = json::array();
    }
    if (s.arch == "qwen2moe") c["shared_expert_intermediate_size"] = s.n_ff_shexp > 0 ? s.n_ff_shexp : s.n_ff;
  }
  (void)sm;
  return c;
}

// blk.N.ffn_{gate,up,down}_exps ([cols, rows, n_expert]) as HF holds them: one
// [rows, cols] matrix per expert, or fused — gate and up as one
// [n_expert, 2 * rows, cols] experts.gate_up_proj (written with the gate
// tensor; the up tensor is skipped), down as [n_expert, cols, rows]. `t` (and
// the up tensor) are rounded to what the directory holds.
void write_experts(SyntheticModel& sm, SynthTensor& t, const SynthSpec& spec, const HfDirOptions& o,
                   std::vector<StTensor>& out) {
  const size_t dot = t.name.find('.', 4);
  const std::string layer = "model.layers." + t.name.substr(4, dot - 4) + ".";
  const std::string kind = t.name.substr(dot + 1, t.name.find("_exps") - dot - 1).substr(4);  // gate, up, down
  const size_t cols = t.dims[0], rows = t.dims[1], n_exp = t.dims[2], per = rows * cols;
  const bool mixtral = spec.arch == "llama";
  if (!o.fused_experts) {
    for (size_t e = 0; e < n_exp; ++e) {
      std::vector<float> v(t.data.begin() + static_cast<ptrdiff_t>(e * per), t.data.begin() + static_cast<ptrdiff_t>((e + 1) * per));
      StTensor st{layer + expert_suffix(mixtral, static_cast<int>(e), kind), o.dtype, {rows, cols}, encode(v, o.dtype)};
      std::copy(v.begin(), v.end(), t.data.begin() + static_cast<ptrdiff_t>(e * per));
      out.push_back(std::move(st));
    }
    return;
  }
  if (kind == "up") return;
  if (kind == "down") {
    out.push_back({layer + "mlp.experts.down_proj", o.dtype, {n_exp, rows, cols}, encode(t.data, o.dtype)});
    return;
  }
  const std::string up_name = t.name.substr(0, dot + 1) + "ffn_up_exps.weight";
  auto up = std::find_if(sm.tensors.begin(), sm.tensors.end(), [&](const SynthTensor& x) { return x.name == up_name; });
  if (up == sm.tensors.end()) throw std::runtime_error("hf_writer: no " + up_name);
  std::vector<float> v;
  for (size_t e = 0; e < n_exp; ++e) {
    v.insert(v.end(), t.data.begin() + static_cast<ptrdiff_t>(e * per), t.data.begin() + static_cast<ptrdiff_t>((e + 1) * per));
    v.insert(v.end(), up->data.begin() + static_cast<ptrdiff_t>(e * per), up->data.begin() + static_cast<ptrdiff_t>((e + 1) * per));
  }
  out.push_back({layer + "mlp.experts.gate_up_proj", o.dtype, {n_exp, 2 * rows, cols}, encode(v, o.dtype)});
  for (size_t e = 0; e < n_exp; ++e) {
    std::copy_n(v.begin() + static_cast<ptrdiff_t>(2 * e * per), per, t.data.begin() + static_cast<ptrdiff_t>(e * per));
    std::copy_n(v.begin() + static_cast<ptrdiff_t>((2 * e + 1) * per), per, up->data.begin() + static_cast<ptrdiff_t>(e * per));
  }
}

}  // namespace

std::vector<uint8_t> safetensors_bytes(const std::vector<StTensor>& tensors) {
  json header = json::object();
  uint64_t offset = 0;
  for (const StTensor& t : tensors) {
    header[t.name] = {{"dtype", t.dtype}, {"shape", t.shape}, {"data_offsets", {offset, offset + t.bytes.size()}}};
    offset += t.bytes.size();
  }
  header["__metadata__"] = {{"format", "pt"}};
  std::string text = header.dump();
  while (text.size() % 8 != 0) text += ' ';
  const uint64_t n = text.size();
  std::vector<uint8_t> out(8 + text.size());
  std::memcpy(out.data(), &n, 8);
  std::memcpy(out.data() + 8, text.data(), text.size());
  for (const StTensor& t : tensors) out.insert(out.end(), t.bytes.begin(), t.bytes.end());
  return out;
}

void write_bytes(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  if (!f) throw std::runtime_error("cannot write " + path);
}

SyntheticModel synthetic_from_gguf(const gguf::GgufFile& f, SynthSpec& spec) {
  SyntheticModel m;
  m.metadata = f.metadata();
  spec.arch = f.get_string("general.architecture").value();
  const std::string p = spec.arch + ".";
  auto u = [&](const std::string& k, int fallback) { return static_cast<int>(f.get_u64_or(p + k, fallback).value()); };
  spec.n_embd = u("embedding_length", 0);
  spec.n_layer = u("block_count", 0);
  spec.n_ff = u("feed_forward_length", 0);
  spec.n_head = u("attention.head_count", 0);
  spec.n_head_kv = u("attention.head_count_kv", spec.n_head);
  spec.n_ctx_train = u("context_length", 2048);
  spec.rms_eps = static_cast<float>(f.get_f64_or(p + "attention.layer_norm_rms_epsilon", 1e-5).value());
  spec.freq_base = f.get_f64_or(p + "rope.freq_base", 10000.0).value();
  spec.tied_output = f.find_tensor("output.weight") == nullptr;
  for (const gguf::TensorInfo& t : f.tensors()) {
    SynthTensor st;
    st.name = t.name;
    st.dims.assign(t.dims.begin(), t.dims.begin() + t.n_dims);
    st.data.resize(t.n_elements);
    quant::traits(t.type)->to_float(t.data, st.data.data(), static_cast<int64_t>(t.n_elements));
    if (t.name == "token_embd.weight") spec.n_vocab = static_cast<int>(t.dims[1]);
    m.tensors.push_back(std::move(st));
  }
  return m;
}

std::string fresh_dir(const std::string& name) {
  const auto dir = std::filesystem::temp_directory_path() / ("tern_hf_" + std::to_string(getpid()) + "_" + name);
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir.string();
}

json write_hf_dir(SyntheticModel& sm, const SynthSpec& spec, const std::string& dir, const HfDirOptions& o) {
  const std::string model_type = o.model_type.empty() ? hf_model_type(spec) : o.model_type;
  const bool gemma = spec.arch == "gemma2" || spec.arch == "gemma3";
  const bool llama = model_type == "llama" || model_type == "mistral" || model_type == "mixtral";
  std::vector<StTensor> out;
  for (SynthTensor& t : sm.tensors) {
    if (t.name.find("_exps.") != std::string::npos) {
      write_experts(sm, t, spec, o, out);
      continue;
    }
    const std::string name = hf_name(spec.arch, t.name);
    if (name.empty()) continue;
    StTensor st;
    st.name = name;
    st.dtype = o.dtype;
    st.shape.assign(t.dims.rbegin(), t.dims.rend());
    if (t.name.ends_with("ffn_gate_inp_shexp.weight")) st.shape = {1, t.dims[0]};  // a Linear(n_embd, 1)
    const size_t n_cols = t.dims[0], n_rows = t.data.size() / n_cols;
    const bool q = t.name.ends_with("attn_q.weight") || t.name.ends_with("attn_q.bias");
    const bool k = t.name.ends_with("attn_k.weight") || t.name.ends_with("attn_k.bias");
    std::vector<float> v = t.data;
    const bool is_norm = gemma && o.gemma_minus_one && t.name.ends_with("norm.weight");
    if (is_norm)
      for (float& x : v) x -= 1.0f;
    if (llama && o.permute && (q || k)) {
      const bool bias = t.dims.size() == 1;
      v = unpermute(v, bias ? n_cols : n_rows, bias ? 1 : n_cols, q ? spec.n_head : spec.n_head_kv);
    }
    st.bytes = encode(v, o.dtype);
    // What the directory now holds, in GGUF order, for the reference.
    if (llama && o.permute && (q || k)) {
      // The rounding does not depend on the order: round t.data the same way.
      std::vector<float> r = t.data;
      encode(r, o.dtype);
      t.data = r;
    } else if (is_norm) {
      for (size_t i = 0; i < v.size(); ++i) t.data[i] = v[i] + 1.0f;
    } else {
      t.data = v;
    }
    out.push_back(std::move(st));
  }
  json config = config_of(spec, sm, model_type);
  config.merge_patch(o.extra_config);
  std::ofstream(std::filesystem::path(dir) / "config.json") << config.dump(2);
  if (o.n_shards <= 1) {
    write_bytes((std::filesystem::path(dir) / "model.safetensors").string(), safetensors_bytes(out));
    return config;
  }
  json index = {{"metadata", {{"total_size", 0}}}, {"weight_map", json::object()}};
  const size_t per = (out.size() + o.n_shards - 1) / o.n_shards;
  for (int s = 0; s < o.n_shards; ++s) {
    char file[64];
    std::snprintf(file, sizeof file, "model-%05d-of-%05d.safetensors", s + 1, o.n_shards);
    std::vector<StTensor> part;
    for (size_t i = s * per; i < std::min(out.size(), (s + 1) * per); ++i) {
      index["weight_map"][out[i].name] = file;
      part.push_back(out[i]);
    }
    write_bytes((std::filesystem::path(dir) / file).string(), safetensors_bytes(part));
  }
  std::ofstream(std::filesystem::path(dir) / "model.safetensors.index.json") << index.dump(2);
  return config;
}

}  // namespace tern::test
