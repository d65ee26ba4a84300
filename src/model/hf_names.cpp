// HF tensor names → GGUF names and shapes: the plan of model/hf_model.h.
#include <algorithm>
#include <filesystem>
#include <optional>

#include "model/gguf_names.h"
#include "model/hf_model.h"

namespace tern::hf {
namespace {

using gguf_names::Tensor;
using gguf_names::tensor_name;

// Per-layer names, after "layers.N.". Gemma overrides post_attention_layernorm.
struct LayerRow {
  std::string_view hf;
  Tensor gguf;
};
constexpr LayerRow kLayerRows[] = {
    {"input_layernorm.weight", Tensor::AttnNorm},
    {"self_attn.q_proj.weight", Tensor::AttnQ},
    {"self_attn.k_proj.weight", Tensor::AttnK},
    {"self_attn.v_proj.weight", Tensor::AttnV},
    {"self_attn.o_proj.weight", Tensor::AttnOutput},
    {"self_attn.q_proj.bias", Tensor::AttnQBias},
    {"self_attn.k_proj.bias", Tensor::AttnKBias},
    {"self_attn.v_proj.bias", Tensor::AttnVBias},
    {"self_attn.o_proj.bias", Tensor::AttnOutputBias},
    {"self_attn.qkv_proj.weight", Tensor::AttnQkv},
    {"self_attn.q_norm.weight", Tensor::AttnQNorm},
    {"self_attn.k_norm.weight", Tensor::AttnKNorm},
    {"post_attention_layernorm.weight", Tensor::FfnNorm},  // Gemma: AttnPostNorm
    {"pre_feedforward_layernorm.weight", Tensor::FfnNorm},
    {"post_feedforward_layernorm.weight", Tensor::FfnPostNorm},
    {"mlp.gate_proj.weight", Tensor::FfnGate},
    {"mlp.up_proj.weight", Tensor::FfnUp},
    {"mlp.gate_up_proj.weight", Tensor::FfnUp},  // phi3: [gate; up]
    {"mlp.down_proj.weight", Tensor::FfnDown},
};

// Prefixes of the text model: plain causal LMs, then Gemma 3's multimodal layouts.
constexpr std::string_view kPrefixes[] = {"model.language_model.", "language_model.model.", "model."};
constexpr std::string_view kHeads[] = {"lm_head.weight", "language_model.lm_head.weight"};

bool gemma(const HfConfig& c) { return c.arch == "gemma2" || c.arch == "gemma3"; }

// Tensors of the checkpoint that are not part of the text model llama.cpp converts.
bool skipped(const HfConfig& c, std::string_view name) {
  if (name.ends_with(".rotary_emb.inv_freq")) return true;  // recomputed from rope_theta
  if (c.arch == "gemma3" && (name.starts_with("vision_tower.") || name.starts_with("multi_modal_projector.") ||
                             name.starts_with("model.vision_tower.") || name.starts_with("model.multi_modal_projector.")))
    return true;  // Gemma 3's image encoder: llama.cpp writes it as a separate mmproj file
  return false;
}

// The table tensor an HF name maps to (layer in *il, -1 for global ones).
std::optional<Tensor> map_name(const HfConfig& c, std::string_view name, int* il) {
  *il = -1;
  for (std::string_view h : kHeads)
    if (name == h) return Tensor::Output;
  for (std::string_view p : kPrefixes) {
    if (!name.starts_with(p)) continue;
    std::string_view rest = name.substr(p.size());
    if (rest == "embed_tokens.weight") return Tensor::TokenEmbd;
    if (rest == "norm.weight") return Tensor::OutputNorm;
    if (!rest.starts_with("layers.")) return std::nullopt;
    rest.remove_prefix(7);
    const size_t dot = rest.find('.');
    if (dot == 0 || dot == std::string_view::npos || dot > 6) return std::nullopt;
    int layer = 0;
    for (char ch : rest.substr(0, dot)) {
      if (ch < '0' || ch > '9') return std::nullopt;
      layer = layer * 10 + (ch - '0');
    }
    if (layer >= c.n_layer) return std::nullopt;
    *il = layer;
    const std::string_view suffix = rest.substr(dot + 1);
    if (gemma(c) && suffix == "post_attention_layernorm.weight") return Tensor::AttnPostNorm;
    for (const LayerRow& r : kLayerRows)
      if (r.hf == suffix) return r.gguf;
    return std::nullopt;
  }
  return std::nullopt;
}

// GGUF dims (row length first) the config implies for a tensor.
std::vector<uint64_t> expected_dims(const HfConfig& c, Tensor t) {
  const uint64_t e = c.n_embd, q = c.q_dim(), kv = c.kv_dim(), ff = c.n_ff, v = c.n_vocab, hd = c.head_dim;
  switch (t) {
    case Tensor::TokenEmbd: case Tensor::Output: return {e, v};
    case Tensor::AttnQ: return {e, q};
    case Tensor::AttnK: case Tensor::AttnV: return {e, kv};
    case Tensor::AttnOutput: return {q, e};
    case Tensor::AttnQBias: return {q};
    case Tensor::AttnKBias: case Tensor::AttnVBias: return {kv};
    case Tensor::AttnOutputBias: return {e};
    case Tensor::AttnQkv: return {e, q + 2 * kv};
    case Tensor::AttnQNorm: case Tensor::AttnKNorm: return {hd};
    case Tensor::FfnGate: return {e, ff};
    case Tensor::FfnUp: return {e, c.arch == "phi3" ? 2 * ff : ff};
    case Tensor::FfnDown: return {ff, e};
    default: return {e};  // the norms
  }
}

std::string dims_text(const std::vector<uint64_t>& d) {
  std::string s = "[";
  for (size_t i = 0; i < d.size(); ++i) s += (i ? ", " : "") + std::to_string(d[i]);
  return s + "]";
}

PlannedTensor computed(Tensor t, std::vector<float> values) {
  PlannedTensor p;
  p.name = tensor_name(t);
  p.dims = {values.size()};
  p.transform = Transform::Computed;
  p.values = std::move(values);
  return p;
}

// Sort key: the converter's order (embedding, layers in order, final norm, output).
std::pair<int, int> order_of(Tensor t, int il) {
  if (t == Tensor::TokenEmbd) return {-1, 0};
  if (il >= 0) return {il, static_cast<int>(t)};
  return {1 << 30, static_cast<int>(t)};
}

Status plan_tensor(const HfConfig& c, const safetensors::Tensor& src, Tensor t, int il, PlannedTensor& p) {
  p.name = tensor_name(t, il);
  p.source = &src;
  const auto type = src.ggml_type();
  if (!type)
    return error(ErrorKind::Unsupported, "tensor '" + src.name + "' has dtype " + src.dtype +
                                             "; tern reads F32, F16 and BF16 checkpoints");
  p.source_type = *type;
  p.dims.assign(src.shape.rbegin(), src.shape.rend());
  const std::vector<uint64_t> want = expected_dims(c, t);
  if (p.dims != want) {
    std::vector<uint64_t> want_hf(want.rbegin(), want.rend());
    return error(ErrorKind::InvalidFile, "tensor '" + src.name + "' has shape " + src.shape_string() + " but config.json implies " +
                                             dims_text(want_hf));
  }
  if (c.permute_qk && (t == Tensor::AttnQ || t == Tensor::AttnQBias || t == Tensor::AttnK || t == Tensor::AttnKBias)) {
    p.transform = Transform::PermuteQK;
    p.n_heads = t == Tensor::AttnQ || t == Tensor::AttnQBias ? c.n_head : c.n_head_kv;
  }
  if (c.norm_plus_one && p.name.ends_with("norm.weight")) p.transform = Transform::AddOne;
  return Status::ok();
}

// The tensors every layer of the architecture needs (llama.cpp's loader would refuse the file without them).
Status check_complete(const HfConfig& c, const std::vector<std::pair<std::pair<int, int>, PlannedTensor>>& mapped) {
  std::vector<Tensor> layer = {Tensor::AttnNorm, Tensor::AttnOutput, Tensor::FfnNorm, Tensor::FfnUp, Tensor::FfnDown};
  if (c.arch == "phi3") {
    layer.push_back(Tensor::AttnQkv);
  } else {
    for (Tensor t : {Tensor::AttnQ, Tensor::AttnK, Tensor::AttnV, Tensor::FfnGate}) layer.push_back(t);
  }
  if (gemma(c)) for (Tensor t : {Tensor::AttnPostNorm, Tensor::FfnPostNorm}) layer.push_back(t);
  if (c.arch == "qwen3" || c.arch == "gemma3") for (Tensor t : {Tensor::AttnQNorm, Tensor::AttnKNorm}) layer.push_back(t);
  auto has = [&](const std::string& name) {
    return std::any_of(mapped.begin(), mapped.end(), [&](const auto& m) { return m.second.name == name; });
  };
  // No lm_head: the embedding doubles as the classifier, as llama.cpp loads a file without output.weight.
  std::vector<std::string> need = {tensor_name(Tensor::TokenEmbd), tensor_name(Tensor::OutputNorm)};
  for (int il = 0; il < c.n_layer; ++il)
    for (Tensor t : layer) need.push_back(tensor_name(t, il));
  for (const std::string& n : need)
    if (!has(n))
      return error(ErrorKind::InvalidFile, "the checkpoint lacks the tensor that becomes '" + n + "' (" +
                                               std::string(gguf_names::describe_tensor(n)) + ")");
  return Status::ok();
}

}  // namespace

uint64_t PlannedTensor::n_elements() const {
  uint64_t n = 1;
  for (uint64_t d : dims) n *= d;
  return n;
}

bool is_hf_dir(const std::string& path) {
  std::error_code ec;
  return std::filesystem::is_directory(path, ec) && std::filesystem::exists(std::filesystem::path(path) / "config.json", ec);
}

namespace {
Status map_tensors(HfPlan& plan);
}  // namespace

Result<HfPlan> plan_hf_model(const std::string& dir) {
  HfPlan plan;
  auto config = read_hf_config(dir);
  if (!config) return config.status();
  plan.config = std::move(config).value();
  auto ck = safetensors::SafetensorsCheckpoint::open(dir);
  if (!ck) return ck.status();
  plan.checkpoint = std::make_shared<safetensors::SafetensorsCheckpoint>(std::move(ck).value());
  if (auto s = map_tensors(plan); !s) return s.with_context(dir);
  return plan;
}

namespace {
// Every checkpoint tensor to its GGUF name, checked, in the converter's order; then the computed ones.
Status map_tensors(HfPlan& plan) {
  const HfConfig& c = plan.config;

  std::vector<std::pair<std::pair<int, int>, PlannedTensor>> mapped;
  std::vector<std::string> unknown;
  for (const std::string& name : plan.checkpoint->names()) {
    if (skipped(c, name)) continue;
    int il = -1;
    const auto t = map_name(c, name, &il);
    if (!t) {
      unknown.push_back(name);
      continue;
    }
    // Tied checkpoints may store lm_head too (a copy); Gemma's is never used (llama.cpp skips it).
    if (*t == Tensor::Output && (c.tie_word_embeddings || gemma(c))) continue;
    PlannedTensor p;
    TERN_RETURN_IF_ERROR(plan_tensor(c, *plan.checkpoint->find(name), *t, il, p));
    mapped.emplace_back(order_of(*t, il), std::move(p));
  }
  if (!unknown.empty()) {
    std::string list;
    for (size_t i = 0; i < std::min<size_t>(unknown.size(), 6); ++i) list += (i ? ", " : "") + unknown[i];
    if (unknown.size() > 6) list += ", and " + std::to_string(unknown.size() - 6) + " more";
    return error(ErrorKind::Unsupported, "the checkpoint has " + std::to_string(unknown.size()) +
                                             " tensor(s) that model_type '" + c.model_type + "' does not have: " + list);
  }
  TERN_RETURN_IF_ERROR(check_complete(c, mapped));
  std::stable_sort(mapped.begin(), mapped.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  for (size_t i = 1; i < mapped.size(); ++i)
    if (mapped[i].second.name == mapped[i - 1].second.name)
      return error(ErrorKind::InvalidFile, "two checkpoint tensors map to '" + mapped[i].second.name + "'");
  for (auto& [key, p] : mapped) plan.tensors.push_back(std::move(p));
  if (!c.rope_freqs.empty()) plan.tensors.push_back(computed(Tensor::RopeFreqs, c.rope_freqs));
  if (!c.rope_long.empty()) {
    plan.tensors.push_back(computed(Tensor::RopeFactorsLong, c.rope_long));
    plan.tensors.push_back(computed(Tensor::RopeFactorsShort, c.rope_short));
  }
  return Status::ok();
}
}  // namespace

}  // namespace tern::hf
