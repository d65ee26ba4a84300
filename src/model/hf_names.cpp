// HF tensor names → GGUF names and shapes: the plan of model/hf_model.h.
#include <algorithm>
#include <cmath>
#include <map>
#include <filesystem>
#include <optional>

#include "model/gguf_names.h"
#include "model/hf_model.h"
#include "quant/quant.h"

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

// Where an HF tensor goes: a table tensor (layer il, -1 for global ones); for
// per-expert matrices also the expert, and a fused 3-D experts.gate_up_proj
// becomes both ffn_gate_exps and ffn_up_exps.
struct Mapped {
  Tensor t = Tensor::TokenEmbd;
  int il = -1;
  int expert = -1;             // a per-expert 2-D matrix: its expert
  bool fused_gate_up = false;  // [n_expert, 2 * ff, n_embd]: gate rows, then up rows, per expert
};

Mapped mapped(Tensor t, int il = -1) {
  Mapped m;
  m.t = t;
  m.il = il;
  return m;
}

// A decimal index of at most 6 digits at the start of `s`, consumed with the dot after it.
std::optional<int> take_index(std::string_view& s) {
  const size_t dot = s.find('.');
  if (dot == 0 || dot == std::string_view::npos || dot > 6) return std::nullopt;
  int v = 0;
  for (char ch : s.substr(0, dot)) {
    if (ch < '0' || ch > '9') return std::nullopt;
    v = v * 10 + (ch - '0');
  }
  s.remove_prefix(dot + 1);
  return v;
}

// MoE layer suffixes: Mixtral's block_sparse_moe.* and Qwen's mlp.* (one matrix
// per expert, or transformers 5's fused experts.gate_up_proj / experts.down_proj).
std::optional<Mapped> map_expert_suffix(const HfConfig& c, std::string_view suffix) {
  const bool mixtral = c.model_type == "mixtral";
  const std::string_view moe = mixtral ? "block_sparse_moe." : "mlp.";
  if (!suffix.starts_with(moe)) return std::nullopt;
  suffix.remove_prefix(moe.size());
  if (suffix == "gate.weight") return mapped(Tensor::FfnGateInp);
  if (suffix == "experts.gate_up_proj" || suffix == "experts.gate_up_proj.weight") {
    Mapped m = mapped(Tensor::FfnGateExps);
    m.fused_gate_up = true;
    return m;
  }
  if (suffix == "experts.down_proj" || suffix == "experts.down_proj.weight") return mapped(Tensor::FfnDownExps);
  if (c.arch == "qwen2moe") {
    if (suffix == "shared_expert_gate.weight") return mapped(Tensor::FfnGateInpShexp);
    if (suffix == "shared_expert.gate_proj.weight") return mapped(Tensor::FfnGateShexp);
    if (suffix == "shared_expert.up_proj.weight") return mapped(Tensor::FfnUpShexp);
    if (suffix == "shared_expert.down_proj.weight") return mapped(Tensor::FfnDownShexp);
  }
  if (!suffix.starts_with("experts.")) return std::nullopt;
  suffix.remove_prefix(8);
  const auto e = take_index(suffix);
  if (!e || *e >= c.n_expert) return std::nullopt;
  struct Row {
    std::string_view hf;
    Tensor t;
  };
  // Mixtral: w1 gate, w3 up, w2 down.
  constexpr Row kRows[] = {{"gate_proj.weight", Tensor::FfnGateExps}, {"up_proj.weight", Tensor::FfnUpExps},
                           {"down_proj.weight", Tensor::FfnDownExps}, {"w1.weight", Tensor::FfnGateExps},
                           {"w3.weight", Tensor::FfnUpExps},          {"w2.weight", Tensor::FfnDownExps}};
  for (const Row& r : kRows)
    if (suffix == r.hf && r.hf.starts_with('w') == mixtral) {
      Mapped m = mapped(r.t);
      m.expert = *e;
      return m;
    }
  return std::nullopt;
}

std::optional<Mapped> map_name(const HfConfig& c, std::string_view name) {
  for (std::string_view h : kHeads)
    if (name == h) return mapped(Tensor::Output);
  for (std::string_view p : kPrefixes) {
    if (!name.starts_with(p)) continue;
    std::string_view rest = name.substr(p.size());
    if (rest == "embed_tokens.weight") return mapped(Tensor::TokenEmbd);
    if (rest == "norm.weight") return mapped(Tensor::OutputNorm);
    if (!rest.starts_with("layers.")) return std::nullopt;
    rest.remove_prefix(7);
    const auto layer = take_index(rest);
    if (!layer || *layer >= c.n_layer) return std::nullopt;
    const std::string_view suffix = rest;
    if (c.n_expert > 0)
      if (auto e = map_expert_suffix(c, suffix)) {
        e->il = *layer;
        return e;
      }
    if (gemma(c) && suffix == "post_attention_layernorm.weight") return mapped(Tensor::AttnPostNorm, *layer);
    if (c.n_expert > 0 && suffix.starts_with("mlp.")) return std::nullopt;  // no dense FFN among the experts
    for (const LayerRow& r : kLayerRows)
      if (r.hf == suffix) return mapped(r.gguf, *layer);
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
    case Tensor::FfnGateInp: return {e, static_cast<uint64_t>(c.n_expert)};
    case Tensor::FfnGateExps: case Tensor::FfnUpExps: return {e, static_cast<uint64_t>(c.n_ff_exp), static_cast<uint64_t>(c.n_expert)};
    case Tensor::FfnDownExps: return {static_cast<uint64_t>(c.n_ff_exp), e, static_cast<uint64_t>(c.n_expert)};
    case Tensor::FfnGateShexp: case Tensor::FfnUpShexp: return {e, static_cast<uint64_t>(c.n_ff_shexp)};
    case Tensor::FfnDownShexp: return {static_cast<uint64_t>(c.n_ff_shexp), e};
    default: return {e};  // the norms, the shared expert's gate
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

// The dtype of a source, or the error naming it.
Result<gguf::GgmlType> source_type(const safetensors::Tensor& src) {
  const auto type = src.ggml_type();
  if (!type)
    return error(ErrorKind::Unsupported, "tensor '" + src.name + "' has dtype " + src.dtype +
                                             "; tern reads F32, F16, BF16 and FP8 (F8_E4M3, F8_E5M2) checkpoints");
  return *type;
}

// A fused 3-D experts.gate_up_proj's dtype: FP8 ones (no checkpoint we know of
// writes them; their scales would be [n_expert, 2 * ff]) are refused by name.
Result<gguf::GgmlType> fused_expert_source_type(const safetensors::Tensor& src) {
  auto type = source_type(src);
  if (type && quant::is_fp8(*type))
    return error(ErrorKind::Unsupported, "tensor '" + src.name + "' has dtype " + src.dtype +
                                             ": FP8 is read for per-expert matrices (experts.N.*_proj), not fused 3-D ones");
  return type;
}

// FP8: `s` (a weight_scale or weight_scale_inv) scales planned matrix p: one
// value, one per row ([rows] or [rows, 1]) or one per block of the config's
// weight_block_size ([ceil(rows / br), ceil(cols / bc)]); read as f32 now.
Status attach_scale(const HfConfig& c, const safetensors::Tensor& s, PlannedTensor& p) {
  const std::string where = "tensor '" + s.name + "'";
  if (!quant::is_fp8(p.source_type))
    return error(ErrorKind::InvalidFile, where + " scales '" + p.source->name + "', whose dtype " + p.source->dtype +
                                             " is not FP8");
  const auto st = s.ggml_type();
  if (!st || quant::is_fp8(*st))
    return error(ErrorKind::Unsupported, where + " has dtype " + s.dtype + "; scales are read as F32, F16 or BF16");
  const int64_t rows = static_cast<int64_t>(p.n_rows()), cols = static_cast<int64_t>(p.dims[0]);
  const uint64_t n = s.bytes.size() / s.elem_bytes;
  const int64_t br = c.fp8_block_rows ? c.fp8_block_rows : 128, bc = c.fp8_block_cols ? c.fp8_block_cols : 128;
  const std::vector<uint64_t> grid = {static_cast<uint64_t>((rows + br - 1) / br), static_cast<uint64_t>((cols + bc - 1) / bc)};
  const bool per_row = (s.shape.size() == 1 && s.shape[0] == static_cast<uint64_t>(rows)) ||
                       (s.shape.size() == 2 && s.shape[0] == static_cast<uint64_t>(rows) && s.shape[1] == 1);
  // Block-wise when the shape is the grid's and not a row's, or the config states blocks.
  const bool block = n != 1 && s.shape == grid && (!per_row || c.fp8_block_rows);
  if (n != 1 && !per_row && !block)
    return error(ErrorKind::InvalidFile, where + " has shape " + s.shape_string() + "; the scale of '" + p.source->name +
                                             "' " + p.source->shape_string() + " is one value, one per row ([" +
                                             std::to_string(rows) + "] or [" + std::to_string(rows) +
                                             ", 1]) or one per block of weight_block_size [" + std::to_string(br) + ", " +
                                             std::to_string(bc) + "] (" + dims_text({grid[1], grid[0]}) + ")");
  if (block) {
    p.scale_block_rows = br;
    p.scale_block_cols = bc;
  }
  p.scales.resize(n);
  quant::traits(*st)->to_float(s.bytes.data(), p.scales.data(), static_cast<int64_t>(n));
  for (float v : p.scales)
    if (!std::isfinite(v))
      return error(ErrorKind::InvalidFile, where + " holds a scale that is not finite (" + std::to_string(v) + ")");
  return Status::ok();
}

// The "<base>.scale" companion of an FP8 matrix that keeps its codes: each GGUF row's scale.
PlannedTensor scale_companion(const PlannedTensor& w) {
  const int64_t rows = static_cast<int64_t>(w.n_rows());
  std::vector<float> v(static_cast<size_t>(rows), 1.0f);
  for (int64_t r = 0; r < rows; ++r)
    if (!w.scales.empty()) v[static_cast<size_t>(r)] = w.scales.size() == 1 ? w.scales[0] : w.scales[static_cast<size_t>(source_row(w, r))];
  PlannedTensor p;
  p.name = gguf_names::row_scale_name(w.name);
  // An expert tensor's scales as [rows, experts] (the loader's layout).
  p.dims = w.dims.size() == 3 ? std::vector<uint64_t>{w.dims[1], w.dims[2]} : std::vector<uint64_t>{static_cast<uint64_t>(rows)};
  p.transform = Transform::Computed;
  p.values = std::move(v);
  p.scale_of = w.name;
  return p;
}

Status plan_tensor(const HfConfig& c, const safetensors::Tensor& src, Tensor t, int il, PlannedTensor& p) {
  p.name = tensor_name(t, il);
  p.source = &src;
  auto type = source_type(src);
  if (!type) return type.status();
  p.source_type = *type;
  p.dims.assign(src.shape.rbegin(), src.shape.rend());
  if (t == Tensor::FfnGateInpShexp && p.dims.size() == 2 && p.dims[1] == 1) p.dims.pop_back();  // HF's [1, n_embd]
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
  if ((t == Tensor::FfnGateInp || t == Tensor::FfnGateInpShexp) && p.source_type != gguf::GgmlType::F32)
    p.transform = Transform::Widen;
  if (quant::is_fp8(p.source_type) && (p.dims.size() != 2 || (p.transform != Transform::None && p.transform != Transform::PermuteQK)))
    return error(ErrorKind::Unsupported, "tensor '" + src.name + "' has dtype " + src.dtype +
                                             ": tern reads FP8 for the dense weight matrices only");
  return Status::ok();
}

// FP8 experts: each expert's scale (scales[e], or none: its codes are the
// values) checked as a dense matrix's, then merged into p: per tensor or per
// row become one per GGUF row (the codes are kept, with a [rows, experts]
// companion); block grids are concatenated expert after expert (decoded to f32).
Status attach_expert_scales(const HfConfig& c, const std::vector<const safetensors::Tensor*>& scales, PlannedTensor& p) {
  const int64_t rows = p.piece_rows;
  bool any_block = false, all_block = true;
  std::vector<PlannedTensor> one(scales.size());
  for (size_t e = 0; e < scales.size(); ++e) {
    one[e].source = p.pieces[e].source;
    one[e].source_type = p.source_type;
    one[e].dims = {p.dims[0], static_cast<uint64_t>(rows)};
    if (scales[e]) TERN_RETURN_IF_ERROR(attach_scale(c, *scales[e], one[e]));
    const bool block = one[e].scale_block_rows != 0;
    any_block |= block;
    all_block &= block;
  }
  if (any_block && !all_block)
    return error(ErrorKind::InvalidFile, "the experts of '" + p.name + "' mix block-wise and other FP8 scales");
  p.scales.clear();
  if (any_block) {
    p.scale_block_rows = one[0].scale_block_rows;
    p.scale_block_cols = one[0].scale_block_cols;
    for (const PlannedTensor& o : one) p.scales.insert(p.scales.end(), o.scales.begin(), o.scales.end());
    return Status::ok();
  }
  p.scales.reserve(static_cast<size_t>(rows) * scales.size());
  for (const PlannedTensor& o : one)
    for (int64_t r = 0; r < rows; ++r)
      p.scales.push_back(o.scales.empty() ? 1.0f : o.scales.size() == 1 ? o.scales[0] : o.scales[static_cast<size_t>(r)]);
  return Status::ok();
}

// One expert's matrices (slots[e], 2-D) stacked into the 3-D tensor `t` of layer il.
Status plan_stacked(const HfConfig& c, const std::vector<const safetensors::Tensor*>& slots, Tensor t, int il,
                    PlannedTensor& p) {
  p.name = tensor_name(t, il);
  p.dims = expected_dims(c, t);
  const std::vector<uint64_t> one(p.dims.begin(), p.dims.end() - 1);
  const std::vector<uint64_t> one_hf(one.rbegin(), one.rend());
  p.transform = Transform::Gather;
  p.piece_rows = static_cast<int64_t>(one[1]);
  for (size_t e = 0; e < slots.size(); ++e) {
    const safetensors::Tensor* src = slots[e];
    if (!src)
      return error(ErrorKind::InvalidFile, "the checkpoint lacks expert " + std::to_string(e) + " of layer " +
                                               std::to_string(il) + " for '" + p.name + "' (it has " +
                                               std::to_string(slots.size() - std::count(slots.begin(), slots.end(), nullptr)) +
                                               " of the " + std::to_string(c.n_expert) + " experts)");
    auto type = source_type(*src);
    if (!type) return type.status();
    if (e == 0) {
      p.source = src;
      p.source_type = *type;
    } else if (*type != p.source_type) {
      return error(ErrorKind::Unsupported, "tensor '" + src->name + "' has dtype " + src->dtype + " but expert 0's has " +
                                               slots[0]->dtype + "; the experts of one layer must share a dtype");
    }
    if (std::vector<uint64_t>(src->shape.rbegin(), src->shape.rend()) != one)
      return error(ErrorKind::InvalidFile, "tensor '" + src->name + "' has shape " + src->shape_string() +
                                               " but config.json implies " + dims_text(one_hf));
    p.pieces.push_back({src, 0});
  }
  return Status::ok();
}

// The gate (first) or up (second) half of each expert's rows of a fused
// [n_expert, 2 * ff, n_embd] experts.gate_up_proj, as the 3-D tensor `t`.
Status plan_fused_half(const HfConfig& c, const safetensors::Tensor& src, Tensor t, int il, PlannedTensor& p) {
  p.name = tensor_name(t, il);
  p.dims = expected_dims(c, t);
  const std::vector<uint64_t> fused = {p.dims[0], 2 * p.dims[1], p.dims[2]};
  if (std::vector<uint64_t>(src.shape.rbegin(), src.shape.rend()) != fused) {
    const std::vector<uint64_t> fused_hf(fused.rbegin(), fused.rend());
    return error(ErrorKind::InvalidFile, "tensor '" + src.name + "' has shape " + src.shape_string() +
                                             " but config.json implies " + dims_text(fused_hf));
  }
  auto type = fused_expert_source_type(src);
  if (!type) return type.status();
  p.source = &src;
  p.source_type = *type;
  p.transform = Transform::Gather;
  p.piece_rows = static_cast<int64_t>(p.dims[1]);
  const int64_t half = t == Tensor::FfnGateExps ? 0 : p.piece_rows;
  for (int64_t e = 0; e < c.n_expert; ++e) p.pieces.push_back({&src, e * 2 * p.piece_rows + half});
  return Status::ok();
}

// The tensors every layer of the architecture needs (llama.cpp's loader would refuse the file without them).
Status check_complete(const HfConfig& c, const std::vector<std::pair<std::pair<int, int>, PlannedTensor>>& mapped) {
  std::vector<Tensor> layer = {Tensor::AttnNorm, Tensor::AttnOutput, Tensor::FfnNorm};
  if (c.n_expert > 0) {
    for (Tensor t : {Tensor::FfnGateInp, Tensor::FfnGateExps, Tensor::FfnUpExps, Tensor::FfnDownExps}) layer.push_back(t);
    if (c.n_ff_shexp > 0)
      for (Tensor t : {Tensor::FfnGateInpShexp, Tensor::FfnGateShexp, Tensor::FfnUpShexp, Tensor::FfnDownShexp})
        layer.push_back(t);
  } else {
    for (Tensor t : {Tensor::FfnUp, Tensor::FfnDown}) layer.push_back(t);
  }
  if (c.arch == "phi3") {
    layer.push_back(Tensor::AttnQkv);
  } else {
    for (Tensor t : {Tensor::AttnQ, Tensor::AttnK, Tensor::AttnV}) layer.push_back(t);
    if (c.n_expert == 0) layer.push_back(Tensor::FfnGate);
  }
  if (gemma(c)) for (Tensor t : {Tensor::AttnPostNorm, Tensor::FfnPostNorm}) layer.push_back(t);
  if (c.arch == "qwen3" || c.arch == "qwen3moe" || c.arch == "gemma3") for (Tensor t : {Tensor::AttnQNorm, Tensor::AttnKNorm}) layer.push_back(t);
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
  // Per-expert matrices by (layer, tensor), stacked once all are seen.
  std::map<std::pair<int, Tensor>, std::vector<const safetensors::Tensor*>> experts;
  // FP8 scales by the name of the matrix they scale ("<base>.weight").
  std::map<std::string, const safetensors::Tensor*> scales;
  for (const std::string& name : plan.checkpoint->names())
    for (std::string_view suffix : {".weight_scale", ".weight_scale_inv"})
      if (name.ends_with(suffix)) scales[name.substr(0, name.size() - suffix.size()) + ".weight"] = plan.checkpoint->find(name);
  for (const std::string& name : plan.checkpoint->names()) {
    if (skipped(c, name)) {
      scales.erase(name);
      continue;
    }
    if (name.ends_with(".weight_scale") || name.ends_with(".weight_scale_inv")) continue;  // attached below
    // Static activation and KV-cache scales of FP8 arithmetic: tern computes in f32.
    if (c.fp8 && (name.ends_with(".input_scale") || name.ends_with(".k_scale") || name.ends_with(".v_scale"))) continue;
    const auto m = map_name(c, name);
    if (!m) {
      unknown.push_back(name);
      continue;
    }
    // Tied checkpoints may store lm_head too (a copy); Gemma's is never used (llama.cpp skips it).
    if (m->t == Tensor::Output && (c.tie_word_embeddings || gemma(c))) {
      scales.erase(name);
      continue;
    }
    const safetensors::Tensor& src = *plan.checkpoint->find(name);
    if (m->expert >= 0) {
      auto& slots = experts[{m->il, m->t}];
      slots.resize(static_cast<size_t>(c.n_expert));
      slots[static_cast<size_t>(m->expert)] = &src;
      continue;
    }
    if (m->fused_gate_up) {
      for (Tensor t : {Tensor::FfnGateExps, Tensor::FfnUpExps}) {
        PlannedTensor p;
        TERN_RETURN_IF_ERROR(plan_fused_half(c, src, t, m->il, p));
        mapped.emplace_back(order_of(t, m->il), std::move(p));
      }
      continue;
    }
    PlannedTensor p;
    TERN_RETURN_IF_ERROR(plan_tensor(c, src, m->t, m->il, p));
    if (auto s = scales.find(name); s != scales.end()) {
      TERN_RETURN_IF_ERROR(attach_scale(c, *s->second, p));
      scales.erase(s);
    }
    const bool companion = keeps_fp8_codes(p);
    mapped.emplace_back(order_of(m->t, m->il), std::move(p));
    if (companion) mapped.emplace_back(mapped.back().first, scale_companion(mapped.back().second));
  }
  for (const auto& [key, slots] : experts) {
    PlannedTensor p;
    TERN_RETURN_IF_ERROR(plan_stacked(c, slots, key.second, key.first, p));
    if (quant::is_fp8(p.source_type)) {
      std::vector<const safetensors::Tensor*> piece_scales(slots.size(), nullptr);
      for (size_t e = 0; e < slots.size(); ++e)
        if (auto sc = scales.find(slots[e]->name); sc != scales.end()) {
          piece_scales[e] = sc->second;
          scales.erase(sc);
        }
      TERN_RETURN_IF_ERROR(attach_expert_scales(c, piece_scales, p));
    }
    const bool companion = keeps_fp8_codes(p);
    mapped.emplace_back(order_of(key.second, key.first), std::move(p));
    if (companion) mapped.emplace_back(mapped.back().first, scale_companion(mapped.back().second));
  }
  for (const auto& [weight, s] : scales) unknown.push_back(s->name + " (it scales '" + weight + "', which is not a mapped matrix)");
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
