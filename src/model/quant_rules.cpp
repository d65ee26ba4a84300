#include "model/quant_rules.h"

#include <algorithm>
#include <cctype>

#include "model/prune.h"
#include "quant/quant.h"

namespace tern {
namespace {

using gguf::GgmlType;

// LLAMA_FTYPE values (llama.h) of the schemes below.
constexpr QuantScheme kSchemes[] = {
    // name      base              ftype  mix
    {"F32", GgmlType::F32, 0, true},
    {"F16", GgmlType::F16, 1, true},
    {"BF16", GgmlType::BF16, 32, true},
    {"Q4_0", GgmlType::Q4_0, 2, true},
    {"Q4_1", GgmlType::Q4_1, 3, true},
    {"Q5_0", GgmlType::Q5_0, 8, true},
    {"Q5_1", GgmlType::Q5_1, 9, true},
    {"Q8_0", GgmlType::Q8_0, 7, true},
    {"IQ4_NL", GgmlType::IQ4_NL, 25, true},
    {"IQ4_XS", GgmlType::IQ4_XS, 30, true},
    {"Q2_K", GgmlType::Q2_K, 10, true},
    {"Q3_K_S", GgmlType::Q3_K, 11, true},
    {"Q3_K_M", GgmlType::Q3_K, 12, true},
    {"Q3_K_L", GgmlType::Q3_K, 13, true},
    {"Q4_K_S", GgmlType::Q4_K, 14, true},
    {"Q4_K_M", GgmlType::Q4_K, 15, true},
    {"Q5_K_S", GgmlType::Q5_K, 16, true},
    {"Q5_K_M", GgmlType::Q5_K, 17, true},
    {"Q6_K", GgmlType::Q6_K, 18, true},
    // Block types with no file type of their own: pure. Their file_type is the
    // one llama.cpp guesses for a file mostly of that type.
    {"Q3_K", GgmlType::Q3_K, 12, false},
    {"Q4_K", GgmlType::Q4_K, 15, false},
    {"Q5_K", GgmlType::Q5_K, 17, false},
    // W8A8 (SmoothQuant's form; docs/quantize.md): dense matrices I8 with
    // per-row scales. llama.cpp has no such file type: 1024 is tern's own.
    {"W8A8", GgmlType::I8, 1024, true},
    // FP8 weights (E4M3, E5M2), laid out as W8A8's: FP8 codes with per-row scales, file types tern's own.
    {"F8_E4M3", GgmlType::F8_E4M3, 1025, true},
    {"F8_E5M2", GgmlType::F8_E5M2, 1026, true},
    // MXFP4_MOE is llama.cpp's (gpt-oss): experts MXFP4, every other matrix Q8_0.
    // MXFP4 alone is the block type, pure, with the same file type.
    {"MXFP4_MOE", GgmlType::MXFP4, 38, true},
    {"MXFP4", GgmlType::MXFP4, 38, false},
    // Q8_0_S24 (docs/prune.md): the linear layers of a 2:4-pruned model in the
    // sparse Q8_0 type, every other matrix Q8_0. tern's own file type.
    {"Q8_0_S24", GgmlType::Q8_0_S24, 1027, true},
};

// The tensor roles the mix rules distinguish.
enum class Role { TokenEmbd, Output, AttnV, AttnK, AttnOutput, FfnDown, Other };

// When a rule applies, in terms of the layer i of n and the model.
enum class When {
  Always,
  MoreBits,       // llama.cpp's use_more_bits: first and last eighth, and every third layer between
  FirstEighth,    // i < n/8
  FirstSixteenth, // i < n/16
  Below2,         // i < 2
  Below4,         // i < 4
  Gqa4,           // n_head / n_head_kv >= 4
  Experts8,       // n_expert == 8 (llama.cpp's Mixtral rules)
};

struct MixRule {
  std::string_view scheme;
  Role role;
  When when;
  GgmlType type;
};

// llama_tensor_get_type (llama.cpp src/llama-quant.cpp) for dense llama-family
// models without an importance matrix. First matching row wins; a tensor with
// no matching row keeps the scheme's base type.
constexpr MixRule kMixRules[] = {
    // scheme    tensor            when                  type
    // 8-expert models: attn_output gets Q5_K in these schemes (before their own attn_output rows).
    {"Q2_K",   Role::AttnOutput, When::Experts8,       GgmlType::Q5_K},
    {"Q3_K_S", Role::AttnOutput, When::Experts8,       GgmlType::Q5_K},
    {"Q3_K_M", Role::AttnOutput, When::Experts8,       GgmlType::Q5_K},
    {"IQ4_NL", Role::AttnOutput, When::Experts8,       GgmlType::Q5_K},
    {"IQ4_XS", Role::AttnOutput, When::Experts8,       GgmlType::Q5_K},
    {"Q4_K_S", Role::AttnOutput, When::Experts8,       GgmlType::Q5_K},
    {"Q4_K_M", Role::AttnOutput, When::Experts8,       GgmlType::Q5_K},
    {"Q2_K",   Role::AttnV,      When::Gqa4,           GgmlType::Q4_K},
    {"Q2_K",   Role::AttnV,      When::Always,         GgmlType::Q3_K},
    {"Q2_K",   Role::FfnDown,    When::Always,         GgmlType::Q3_K},
    {"Q2_K",   Role::AttnOutput, When::Always,         GgmlType::Q3_K},
    {"Q3_K_M", Role::AttnV,      When::Below2,         GgmlType::Q5_K},
    {"Q3_K_M", Role::AttnV,      When::Always,         GgmlType::Q4_K},
    {"Q3_K_M", Role::FfnDown,    When::FirstSixteenth, GgmlType::Q5_K},
    {"Q3_K_M", Role::FfnDown,    When::Always,         GgmlType::Q4_K},
    {"Q3_K_M", Role::AttnOutput, When::Always,         GgmlType::Q4_K},
    {"Q3_K_L", Role::AttnV,      When::Always,         GgmlType::Q5_K},
    {"Q3_K_L", Role::FfnDown,    When::Always,         GgmlType::Q5_K},
    {"Q3_K_L", Role::AttnOutput, When::Always,         GgmlType::Q5_K},
    {"Q4_K_S", Role::AttnV,      When::Below4,         GgmlType::Q5_K},
    {"Q4_K_S", Role::FfnDown,    When::FirstEighth,    GgmlType::Q5_K},
    {"Q4_K_M", Role::AttnV,      When::MoreBits,       GgmlType::Q6_K},
    {"Q4_K_M", Role::FfnDown,    When::MoreBits,       GgmlType::Q6_K},
    {"Q5_K_M", Role::AttnV,      When::MoreBits,       GgmlType::Q6_K},
    {"Q5_K_M", Role::FfnDown,    When::MoreBits,       GgmlType::Q6_K},
    {"IQ4_NL", Role::AttnV,      When::Gqa4,           GgmlType::Q5_K},
    {"IQ4_NL", Role::FfnDown,    When::FirstEighth,    GgmlType::Q5_K},
    {"IQ4_XS", Role::AttnV,      When::Gqa4,           GgmlType::Q5_K},
    {"IQ4_XS", Role::FfnDown,    When::FirstEighth,    GgmlType::Q5_K},
};

bool contains(std::string_view s, std::string_view part) { return s.find(part) != std::string_view::npos; }
bool ends_with(std::string_view s, std::string_view tail) {
  return s.size() >= tail.size() && s.substr(s.size() - tail.size()) == tail;
}

Role role_of(std::string_view name, bool has_output) {
  if (name == "output.weight") return Role::Output;
  if (name == "token_embd.weight") return has_output ? Role::TokenEmbd : Role::Output;
  // llama.cpp treats fused QKV and MLA's kv_b like attn_v.
  if (contains(name, "attn_v.weight") || contains(name, "attn_qkv.weight") || contains(name, "attn_kv_b.weight"))
    return Role::AttnV;
  if (contains(name, "attn_output.weight")) return Role::AttnOutput;
  if (contains(name, "attn_k.weight")) return Role::AttnK;
  if (contains(name, "ffn_down")) return Role::FfnDown;
  return Role::Other;
}

// "blk.N." -> N, or 0 for tensors outside the layer stack (and absurd N).
int layer_of(std::string_view name) {
  constexpr std::string_view kPrefix = "blk.";
  if (name.substr(0, kPrefix.size()) != kPrefix) return 0;
  int i = 0;
  size_t pos = kPrefix.size();
  for (; pos < name.size() && pos < kPrefix.size() + 7 && name[pos] >= '0' && name[pos] <= '9'; ++pos)
    i = i * 10 + (name[pos] - '0');
  return pos > kPrefix.size() && pos < name.size() && name[pos] == '.' ? i : 0;
}

bool use_more_bits(int i, int n) { return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2; }

bool applies(When when, int i, int n, const QuantModelInfo& m) {
  switch (when) {
    case When::Always: return true;
    case When::MoreBits: return use_more_bits(i, n);
    case When::FirstEighth: return i < n / 8;
    case When::FirstSixteenth: return i < n / 16;
    case When::Below2: return i < 2;
    case When::Below4: return i < 4;
    case When::Gqa4: return m.n_gqa() >= 4;
    case When::Experts8: return m.n_expert == 8;
  }
  return false;
}

uint32_t block_elems(GgmlType t) {
  auto size = gguf::type_size(static_cast<uint32_t>(t));
  return size ? size->block_elems : 1;
}

bool is_float(GgmlType t) { return t == GgmlType::F32 || t == GgmlType::F16 || t == GgmlType::BF16; }

GgmlType mix_type(const QuantScheme& s, const QuantModelInfo& m, std::string_view name, uint64_t n_cols) {
  const Role role = role_of(name, m.has_output);
  if (role == Role::Output) {
    if (n_cols % block_elems(s.base) != 0) return GgmlType::Q8_0;
    return s.base == GgmlType::Q8_0 ? GgmlType::Q8_0 : GgmlType::Q6_K;
  }
  GgmlType type = s.base;
  const int i = layer_of(name), n = m.n_layer;
  for (const MixRule& r : kMixRules) {
    if (r.scheme == s.name && r.role == role && applies(r.when, i, n, m)) {
      type = r.type;
      break;
    }
  }
  // 70B: attn_v is 8x smaller than attn_q, so more bits cost almost nothing.
  if (role == Role::AttnV && m.is_70b() && (type == GgmlType::Q3_K || type == GgmlType::Q4_K)) type = GgmlType::Q5_K;
  // 8 experts (Mixtral): attention is a small share of the model, so K and V take Q8_0 in every scheme.
  if ((role == Role::AttnV || role == Role::AttnK) && m.n_expert == 8) type = GgmlType::Q8_0;
  return type;
}

Status read_count(const gguf::GgufFile& f, const std::string& key, int& out) {
  const gguf::Value* found = f.find(key);
  if (!found) return Status::ok();
  if (const gguf::Array* arr = found->as_array(); arr && !arr->items.empty()) {
    // A per-layer array: the mix rules read the first layer's value, as
    // llama-quantize reads layer 0's, skipping the 0 of a hybrid stack's layers
    // without attention.
    for (const gguf::Value& item : arr->items) {
      const auto v = item.as_u64();
      if (!v || *v > (1u << 20)) return error(ErrorKind::InvalidFile, "metadata key '" + key + "' holds an out-of-range value");
      if (*v == 0) continue;
      out = static_cast<int>(*v);
      return Status::ok();
    }
    return Status::ok();  // no layer has any: keep the default
  }
  auto v = f.get_u64(key);
  if (!v) return v.status();
  if (*v == 0 || *v > (1u << 20))
    return error(ErrorKind::InvalidFile, "metadata key '" + key + "' = " + std::to_string(*v) + " is out of range");
  out = static_cast<int>(*v);
  return Status::ok();
}

}  // namespace

const QuantScheme* find_quant_scheme(std::string_view name) {
  std::string upper(name);
  for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  for (const auto& s : kSchemes)
    if (s.name == upper) return &s;
  return nullptr;
}

Result<std::vector<const QuantScheme*>> parse_quant_schemes(std::string_view text) {
  std::vector<const QuantScheme*> out;
  while (!text.empty()) {
    const size_t comma = text.find(',');
    const std::string_view item = text.substr(0, comma);
    const QuantScheme* s = find_quant_scheme(item);
    if (!s)
      return error(ErrorKind::InvalidArgument,
                   "unknown type '" + std::string(item) + "' (known: " + quant_scheme_names() + ")");
    out.push_back(s);
    text = comma == std::string_view::npos ? std::string_view() : text.substr(comma + 1);
  }
  return out;
}

std::string quant_scheme_names() {
  std::string out;
  for (const auto& s : kSchemes) out += (out.empty() ? "" : ", ") + std::string(s.name);
  return out;
}

QuantScheme pure_scheme(const QuantScheme& scheme) {
  QuantScheme s = scheme;
  s.mix = false;
  return s;
}

Result<QuantModelInfo> quant_model_info(const gguf::GgufFile& f) {
  QuantModelInfo m;
  auto arch = f.get_string("general.architecture");
  if (!arch) return arch.status();
  m.arch = *arch;
  const std::string p = m.arch + ".";
  // Without block_count, count the layers the tensor names show.
  int n_layer_seen = 0;
  for (const auto& t : f.tensors())
    if (t.name.rfind("blk.", 0) == 0) n_layer_seen = std::max(n_layer_seen, layer_of(t.name) + 1);
  m.n_layer = std::max(1, n_layer_seen);
  TERN_RETURN_IF_ERROR(read_count(f, p + "block_count", m.n_layer));
  TERN_RETURN_IF_ERROR(read_count(f, p + "attention.head_count", m.n_head));
  m.n_head_kv = m.n_head;
  TERN_RETURN_IF_ERROR(read_count(f, p + "attention.head_count_kv", m.n_head_kv));
  m.has_output = f.find_tensor("output.weight") != nullptr;
  if (f.find(p + "expert_count")) {
    auto n = f.get_u64(p + "expert_count");
    if (!n) return n.status();
    if (*n > 512) return error(ErrorKind::InvalidFile, "metadata key '" + p + "expert_count' = " + std::to_string(*n) + " is out of range");
    m.n_expert = static_cast<int>(*n);
  }
  return m;
}

bool is_quantizable(std::string_view name, uint32_t n_dims) {
  if (n_dims < 2 || !ends_with(name, "weight")) return false;
  // ssm_conv1d: a handful of taps per channel, kept F32 as llama.cpp keeps them.
  for (std::string_view keep : {"_norm.weight", "ffn_gate_inp.weight", "position_embd.weight", "token_types.weight",
                                "ssm_conv1d.weight"})
    if (contains(name, keep)) return false;
  return true;
}

GgmlType fallback_type(GgmlType target, uint64_t n_cols) {
  if (n_cols % block_elems(target) == 0) return target;
  GgmlType partner = GgmlType::F16;
  switch (target) {
    case GgmlType::Q2_K:
    case GgmlType::Q3_K: partner = GgmlType::Q4_0; break;
    case GgmlType::Q4_K: partner = GgmlType::Q5_0; break;
    case GgmlType::Q5_K: partner = GgmlType::Q5_1; break;
    case GgmlType::Q6_K: partner = GgmlType::Q8_0; break;
    case GgmlType::IQ4_XS: partner = GgmlType::IQ4_NL; break;
    default: break;  // already 32-element blocks: nothing smaller but F16
  }
  return n_cols % block_elems(partner) == 0 ? partner : GgmlType::F16;
}

TypeChoice choose_tensor_type(const QuantScheme& scheme, const QuantModelInfo& model, std::string_view name,
                              uint32_t n_dims, uint64_t n_cols, GgmlType current) {
  if (!is_quantizable(name, n_dims)) return {current, false};
  if (is_float(scheme.base)) return {scheme.base, false};
  // Some schemes give one type to the layers' matrices of one shape and Q8_0 to
  // everything else (embeddings, output head): MXFP4_MOE to the 3-D expert
  // tensors (llama.cpp's rule), W8A8 to the 2-D dense ones (its experts stay
  // Q8_0: SmoothQuant folds no expert), FP8 to dense and expert matrices.
  const bool head = name == "output.weight" || name == "token_embd.weight";
  GgmlType wanted = GgmlType::Q8_0;
  if (scheme.base == GgmlType::Q8_0_S24) {
    if (is_prunable(name, n_dims)) wanted = GgmlType::Q8_0_S24;
  } else if (scheme.base == GgmlType::MXFP4 && scheme.mix) {
    if (n_dims == 3 && !head) wanted = GgmlType::MXFP4;
  } else if (quant::has_row_scale(scheme.base)) {
    if ((n_dims == 2 || (n_dims == 3 && quant::is_fp8(scheme.base))) && !head)
      return {scheme.base, false};  // no block size: every row length
  } else {
    wanted = scheme.mix ? mix_type(scheme, model, name, n_cols) : scheme.base;
  }
  const GgmlType type = fallback_type(wanted, n_cols);
  return {type, type != wanted};
}

}  // namespace tern
