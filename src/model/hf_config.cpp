#include "model/hf_config.h"

#include <algorithm>
#include <cmath>
#include <filesystem>

#include "core/input_file.h"
#include "core/json.h"
#include "model/gguf_names.h"

namespace tern::hf {
namespace {

using json = ::tern::Json;
using gguf::Value;
using gguf_names::Key;

constexpr int64_t kMaxInt = int64_t{1} << 24;  // as hparams.cpp bounds GGUF integers

constexpr std::string_view kSupported[] = {"llama",  "mistral", "qwen2",   "qwen3",     "gemma2",
                                           "gemma3", "gemma3_text", "phi3", "mixtral", "qwen2_moe",
                                           "qwen3_moe"};

// One JSON object's fields, read with the key named in every error.
class Fields {
 public:
  explicit Fields(const json& obj) : obj_(obj) {}
  const json* find(const char* key) const {
    const json* v = obj_.find(key);
    return v && !v->is_null() ? v : nullptr;
  }
  // An integer in [0, 2^24] (a float holding an integer is accepted, as Python writes 4096.0 sometimes).
  Result<int> integer(const char* key, std::optional<int> fallback) const {
    const json* v = find(key);
    if (!v) {
      if (fallback) return *fallback;
      return error(ErrorKind::InvalidFile, std::string("config.json has no \"") + key + "\"");
    }
    if (v->is_number()) {
      const double d = v->as_double();
      if (d >= 0 && d <= kMaxInt && std::floor(d) == d) return static_cast<int>(d);
    }
    return error(ErrorKind::InvalidFile, std::string("config.json \"") + key + "\" = " + v->dump() +
                                             " is not an integer in [0, 2^24]");
  }
  Result<double> real(const char* key, double fallback) const {
    const json* v = find(key);
    if (!v) return fallback;
    if (!v->is_number() || !std::isfinite(v->as_double()))
      return error(ErrorKind::InvalidFile, std::string("config.json \"") + key + "\" = " + v->dump() + " is not a number");
    return v->as_double();
  }
  bool boolean(const char* key, bool fallback) const {
    const json* v = find(key);
    return v && v->is_bool() ? v->as_bool() : fallback;
  }
  std::string string(const char* key) const {
    const json* v = find(key);
    return v && v->is_string() ? v->as_string() : std::string();
  }
  Result<std::vector<float>> floats(const char* key) const {
    std::vector<float> out;
    const json* v = find(key);
    if (!v) return out;
    if (!v->is_array()) return error(ErrorKind::InvalidFile, std::string("config.json \"") + key + "\" is not a list of numbers");
    for (const json& x : v->as_array()) {
      if (!x.is_number() || !std::isfinite(x.as_double()) || !(x.as_double() > 0))
        return error(ErrorKind::InvalidFile, std::string("config.json \"") + key + "\" holds " + x.dump() +
                                                 ": RoPE factors must be positive numbers");
      out.push_back(static_cast<float>(x.as_double()));
    }
    return out;
  }

 private:
  const json& obj_;
};

// The RoPE settings, from rope_scaling (transformers 4) or rope_parameters (5, possibly per attention kind).
struct Rope {
  json params = json::object();  // the full-attention layers' parameters
  double theta = 10000.0;
  double theta_swa = 0.0;        // 0: not stated
  std::string type;              // "" / "default" = none; linear, yarn, llama3, longrope, su
};

Result<Rope> read_rope(const json& cfg, double default_theta) {
  Rope r;
  const Fields f(cfg);
  if (const json* p = f.find("rope_scaling"); p && p->is_object()) r.params = *p;
  if (const json* p = f.find("rope_parameters"); p && p->is_object()) {
    r.params = p->contains("full_attention") ? (*p)["full_attention"] : *p;
    if (p->contains("sliding_attention") && (*p)["sliding_attention"].is_object()) {
      auto t = Fields((*p)["sliding_attention"]).real("rope_theta", 0.0);
      if (!t) return t.status();
      r.theta_swa = *t;
    }
  }
  if (!r.params.is_object()) return error(ErrorKind::InvalidFile, "config.json rope parameters are not an object");
  const Fields rp(r.params);
  auto theta = f.real("rope_theta", default_theta);
  if (!theta) return theta.status();
  auto theta2 = rp.real("rope_theta", *theta);
  if (!theta2) return theta2.status();
  r.theta = *theta2;
  if (!(r.theta > 0)) return error(ErrorKind::InvalidFile, "config.json rope_theta must be positive");
  r.type = rp.string("rope_type");
  if (r.type.empty()) r.type = rp.string("type");
  if (r.type == "default") r.type.clear();
  return r;
}

// Llama 3.1's frequency divisors, as the converter computes them (float32 frequencies).
std::vector<float> llama3_rope_freqs(const Fields& rp, double base, int dim, Status& status) {
  auto factor = rp.real("factor", 8.0), low = rp.real("low_freq_factor", 1.0), high = rp.real("high_freq_factor", 4.0);
  auto orig = rp.real("original_max_position_embeddings", 8192.0);
  for (auto* r : {&factor, &low, &high, &orig})
    if (!*r) { status = r->status(); return {}; }
  if (!(*factor > 0) || !(*high > *low) || !(*orig > 0)) {
    status = error(ErrorKind::InvalidFile, "config.json llama3 rope_scaling needs factor > 0, high_freq_factor > "
                                           "low_freq_factor and original_max_position_embeddings > 0");
    return {};
  }
  const double low_wavelen = *orig / *low, high_wavelen = *orig / *high;
  std::vector<float> out;
  for (int i = 0; i < dim; i += 2) {
    const float freq = 1.0f / std::pow(static_cast<float>(base), static_cast<float>(i) / static_cast<float>(dim));
    const double wavelen = 2 * M_PI / freq;
    if (wavelen < high_wavelen) {
      out.push_back(1.0f);
    } else if (wavelen > low_wavelen) {
      out.push_back(static_cast<float>(*factor));
    } else {
      const double smooth = (*orig / wavelen - *low) / (*high - *low);
      out.push_back(static_cast<float>(1 / ((1 - smooth) / *factor + smooth)));
    }
  }
  return out;
}

// Keys appended in order: general.*, then <arch>.*.
class KeyList {
 public:
  KeyList(HfConfig& c) : c_(c) {}
  void set(Key k, Value v) { c_.metadata.emplace_back(gguf_names::key(c_.arch, k), std::move(v)); }
  void u32(Key k, int v) { set(k, Value::of_u32(static_cast<uint32_t>(v))); }
  void f32(Key k, double v) { set(k, Value::of_f32(static_cast<float>(v))); }

 private:
  HfConfig& c_;
};

// Gemma's local/global layer pattern: layer il attends locally when il % period < period - 1.
// A layer_types list (transformers 5) must agree with it.
Status check_layer_types(const json& cfg, int n_layer, int period) {
  const json* types = Fields(cfg).find("layer_types");
  if (!types) return Status::ok();
  if (!types->is_array() || types->size() != static_cast<size_t>(n_layer))
    return error(ErrorKind::InvalidFile, "config.json layer_types must list one type per layer");
  for (int il = 0; il < n_layer; ++il) {
    const bool local = period == 0 || il % period < period - 1;
    const json& t = types->as_array()[static_cast<size_t>(il)];
    if (!t.is_string() || (t.as_string() == "sliding_attention") != local)
      return error(ErrorKind::Unsupported, "config.json layer_types does not follow the pattern of one global layer in " +
                                               std::to_string(period) + " (layer " + std::to_string(il) +
                                               " is " + t.dump() + "), which GGUF cannot express");
  }
  return Status::ok();
}

Status read_gemma(const json& cfg, const Rope& rope, HfConfig& c, KeyList& keys) {
  const Fields f(cfg);
  const bool g2 = c.arch == "gemma2";
  auto window = f.integer("sliding_window", g2 ? std::optional<int>(4096) : std::optional<int>(0));
  auto period = f.integer("sliding_window_pattern", g2 ? 2 : 6);
  auto scalar = f.integer("query_pre_attn_scalar", 0);
  for (auto* r : {&window, &period, &scalar})
    if (!*r) return r->status();
  TERN_RETURN_IF_ERROR(check_layer_types(cfg, c.n_layer, *period));
  // tern (like llama.cpp) derives the query scale from the layer count: n_embd / n_head for the 27B models.
  const int derived = c.n_layer == (g2 ? 46 : 62) ? c.n_embd / c.n_head : c.head_dim;
  if (*scalar != 0 && *scalar != derived)
    return error(ErrorKind::Unsupported, "config.json query_pre_attn_scalar " + std::to_string(*scalar) +
                                             " differs from the " + std::to_string(derived) +
                                             " a GGUF loader derives for this shape; GGUF has no key for it");
  keys.u32(Key::KeyLength, c.head_dim);
  keys.u32(Key::ValueLength, c.head_dim);
  if (g2) {
    auto attn_cap = f.real("attn_logit_softcapping", 50.0), final_cap = f.real("final_logit_softcapping", 30.0);
    if (!attn_cap) return attn_cap.status();
    if (!final_cap) return final_cap.status();
    keys.f32(Key::AttnLogitSoftcap, *attn_cap);
    keys.f32(Key::FinalLogitSoftcap, *final_cap);
    keys.u32(Key::SlidingWindow, *window);
  } else {
    auto final_cap = f.real("final_logit_softcapping", 0.0);
    if (!final_cap) return final_cap.status();
    if (*final_cap > 0) keys.f32(Key::FinalLogitSoftcap, *final_cap);
    if (*period != 1) keys.u32(Key::SlidingWindow, *window);
    auto local_base = f.real("rope_local_base_freq", rope.theta_swa > 0 ? rope.theta_swa : 10000.0);
    if (!local_base) return local_base.status();
    keys.f32(Key::RopeFreqBaseSwa, *local_base);
  }
  if (*period != (g2 ? 2 : 6)) keys.u32(Key::SlidingWindowPattern, *period);
  c.norm_plus_one = true;
  return Status::ok();
}

Status read_phi3(const json& cfg, const Rope& rope, HfConfig& c, KeyList& keys) {
  const Fields f(cfg), rp(rope.params);
  auto ctx = f.integer("max_position_embeddings", 4096);
  if (!ctx) return ctx.status();
  auto orig = f.integer("original_max_position_embeddings", *ctx);
  if (!orig) return orig.status();
  auto orig2 = rp.integer("original_max_position_embeddings", *orig);
  if (!orig2) return orig2.status();
  auto pct = f.real("partial_rotary_factor", 1.0);
  if (!pct) return pct.status();
  const int rope_dims = static_cast<int>(*pct * c.n_embd) / c.n_head;
  keys.u32(Key::RopeScalingOrigCtx, *orig2);
  keys.u32(Key::RopeDimensionCount, rope_dims);
  auto window = f.integer("sliding_window", 0);
  if (!window) return window.status();
  keys.u32(Key::SlidingWindow, *window);
  auto long_f = rp.floats("long_factor"), short_f = rp.floats("short_factor");
  if (!long_f) return long_f.status();
  if (!short_f) return short_f.status();
  if (long_f->empty()) return Status::ok();
  if (rope.type != "longrope" && rope.type != "su")
    return error(ErrorKind::Unsupported, "config.json rope_scaling type '" + rope.type + "' with long/short factors is not "
                                             "supported (longrope)");
  if (long_f->size() != short_f->size() || long_f->size() != static_cast<size_t>(rope_dims / 2))
    return error(ErrorKind::InvalidFile, "config.json rope_scaling long_factor and short_factor must each have " +
                                             std::to_string(rope_dims / 2) + " values (half the rotary dimensions)");
  const double scale = static_cast<double>(*ctx) / *orig2;
  keys.f32(Key::RopeScalingAttnFactor, scale > 1.0 ? std::sqrt(1 + std::log(scale) / std::log(*orig2)) : 1.0);
  c.rope_long = std::move(*long_f);
  c.rope_short = std::move(*short_f);
  return Status::ok();
}

// Experts, as llama.cpp's converter writes them (expert_count, expert_used_count;
// qwen*_moe: expert_feed_forward_length from moe_intermediate_size; qwen2_moe:
// expert_shared_feed_forward_length). What GGUF's qwen*moe cannot express —
// dense layers among sparse ones, routing weights normalised otherwise than the
// architecture does — is refused with the key named.
Status read_moe(const json& cfg, HfConfig& c, KeyList& keys) {
  const Fields f(cfg);
  const bool mixtral = c.model_type == "mixtral";
  auto n_expert = f.integer(mixtral ? "num_local_experts" : "num_experts", std::nullopt);
  auto n_used = f.integer("num_experts_per_tok", std::nullopt);
  if (!n_expert) return n_expert.status();
  if (!n_used) return n_used.status();
  c.n_expert = *n_expert, c.n_expert_used = *n_used;
  constexpr int kMaxExperts = 512;  // as the loader (hparams.cpp)
  if (c.n_expert < 1 || c.n_expert > kMaxExperts || c.n_expert_used < 1 || c.n_expert_used > c.n_expert)
    return error(ErrorKind::InvalidFile, "config.json needs 1 <= num_experts_per_tok (" + std::to_string(c.n_expert_used) +
                                             ") <= the expert count (" + std::to_string(c.n_expert) + ") <= 512");
  keys.u32(Key::ExpertCount, c.n_expert);
  keys.u32(Key::ExpertUsedCount, c.n_expert_used);
  if (mixtral) {
    c.n_ff_exp = c.n_ff;
    return Status::ok();
  }
  auto step = f.integer("decoder_sparse_step", 1);
  if (!step) return step.status();
  const json* dense = f.find("mlp_only_layers");
  if (*step != 1 || (dense && !(dense->is_array() && dense->empty())))
    return error(ErrorKind::Unsupported, "config.json decoder_sparse_step / mlp_only_layers make some layers dense; "
                                         "GGUF's " + c.arch + " has experts in every layer");
  // HF's default is false for both; llama.cpp's qwen2moe never normalises and qwen3moe always does.
  const bool want_norm = c.arch == "qwen3moe";
  if (f.boolean("norm_topk_prob", false) != want_norm)
    return error(ErrorKind::Unsupported, std::string("config.json norm_topk_prob = ") + (want_norm ? "false" : "true") +
                                             ": GGUF's " + c.arch + (want_norm ? " always renormalises" : " never renormalises") +
                                             " the top-k routing weights");
  auto ff_exp = f.integer("moe_intermediate_size", std::nullopt);
  if (!ff_exp) return ff_exp.status();
  c.n_ff_exp = *ff_exp;
  keys.u32(Key::ExpertFeedForwardLength, c.n_ff_exp);
  if (c.arch == "qwen2moe") {
    auto ff_sh = f.integer("shared_expert_intermediate_size", std::nullopt);
    if (!ff_sh) return ff_sh.status();
    c.n_ff_shexp = *ff_sh;
    keys.u32(Key::ExpertSharedFeedForwardLength, c.n_ff_shexp);
  }
  if (c.n_ff_exp <= 0 || (c.arch == "qwen2moe" && c.n_ff_shexp <= 0))
    return error(ErrorKind::InvalidFile, "config.json expert widths (moe_intermediate_size, "
                                         "shared_expert_intermediate_size) must be positive");
  return Status::ok();
}

// Keys the base converter writes for every architecture, in its order, then RoPE scaling.
Status read_common(const json& cfg, const Rope& rope, HfConfig& c, KeyList& keys) {
  const Fields f(cfg);
  const bool gemma = c.arch == "gemma2" || c.arch == "gemma3";
  auto ctx = f.integer("max_position_embeddings", c.arch == "gemma3" ? 131072 : 0);
  if (!ctx) return ctx.status();
  if (c.arch == "llama") keys.u32(Key::VocabSize, c.n_vocab);
  if (*ctx > 0) keys.u32(Key::ContextLength, *ctx);
  keys.u32(Key::EmbeddingLength, c.n_embd);
  keys.u32(Key::BlockCount, c.n_layer);
  keys.u32(Key::FeedForwardLength, c.n_ff);
  keys.u32(Key::HeadCount, c.n_head);
  keys.u32(Key::HeadCountKv, c.n_head_kv);
  if (c.arch != "gemma2" || f.find("rope_theta")) keys.f32(Key::RopeFreqBase, rope.theta);
  auto eps = f.real("rms_norm_eps", gemma ? 1e-6 : 1e-5);
  if (!eps) return eps.status();
  keys.f32(Key::RmsEpsilon, *eps);
  if ((c.arch == "qwen3" || c.arch == "qwen3moe" || c.arch == "llama") && f.find("head_dim")) {
    keys.u32(Key::KeyLength, c.head_dim);
    keys.u32(Key::ValueLength, c.head_dim);
  }
  if (c.arch == "llama") keys.u32(Key::RopeDimensionCount, c.head_dim);
  const Fields rp(rope.params);
  if (rope.type.empty() || c.arch == "phi3") return Status::ok();
  if (rope.type == "linear" || rope.type == "yarn") {
    auto factor = rp.real("factor", 0.0);
    if (!factor) return factor.status();
    if (!(*factor > 0)) return error(ErrorKind::InvalidFile, "config.json rope_scaling '" + rope.type + "' needs a positive factor");
    keys.set(Key::RopeScalingType, Value::of_string(rope.type));
    keys.f32(Key::RopeScalingFactor, *factor);
    if (rope.type == "yarn") {
      auto orig = rp.integer("original_max_position_embeddings", std::nullopt);
      if (!orig) return orig.status();
      keys.u32(Key::RopeScalingOrigCtx, *orig);
    }
    return Status::ok();
  }
  if (rope.type == "llama3" && c.arch == "llama") {
    Status s = Status::ok();
    c.rope_freqs = llama3_rope_freqs(rp, rope.theta, c.head_dim, s);
    return s;
  }
  return error(ErrorKind::Unsupported, "config.json rope scaling type '" + rope.type + "' is not supported for " +
                                           c.model_type + " (linear, yarn" + (c.arch == "llama" ? ", llama3" : "") + ")");
}

// Sizes every architecture shares; head_dim defaults to n_embd / n_head (Gemma 3: 256).
Status read_sizes(const json& cfg, HfConfig& c) {
  const Fields f(cfg);
  auto n_embd = f.integer("hidden_size", std::nullopt), n_layer = f.integer("num_hidden_layers", std::nullopt);
  auto n_ff = f.integer("intermediate_size", std::nullopt), n_head = f.integer("num_attention_heads", std::nullopt);
  auto n_vocab = f.integer("vocab_size", std::nullopt);
  for (auto* r : {&n_embd, &n_layer, &n_ff, &n_head, &n_vocab})
    if (!*r) return r->status();
  c.n_embd = *n_embd, c.n_layer = *n_layer, c.n_ff = *n_ff, c.n_head = *n_head, c.n_vocab = *n_vocab;
  if (c.n_embd <= 0 || c.n_layer <= 0 || c.n_ff <= 0 || c.n_head <= 0 || c.n_vocab <= 0)
    return error(ErrorKind::InvalidFile, "config.json sizes (hidden_size, num_hidden_layers, intermediate_size, "
                                         "num_attention_heads, vocab_size) must be positive");
  auto kv = f.integer("num_key_value_heads", c.n_head);
  if (!kv) return kv.status();
  c.n_head_kv = *kv;
  if (c.n_head_kv <= 0 || c.n_head % c.n_head_kv != 0)
    return error(ErrorKind::InvalidFile, "config.json num_attention_heads " + std::to_string(c.n_head) +
                                             " is not a multiple of num_key_value_heads " + std::to_string(c.n_head_kv));
  auto hd = f.integer("head_dim", c.arch == "gemma3" ? 256 : c.n_embd / c.n_head);
  if (!hd) return hd.status();
  c.head_dim = *hd;
  if (c.head_dim <= 0 || c.head_dim % 2 != 0 || int64_t{c.head_dim} * c.n_head > kMaxInt)
    return error(ErrorKind::InvalidFile, "config.json head_dim " + std::to_string(c.head_dim) + " must be even and positive");
  return Status::ok();
}

std::string arch_of(std::string_view model_type) {
  if (model_type == "mistral" || model_type == "mixtral") return "llama";  // as llama.cpp converts them
  if (model_type == "qwen2_moe") return "qwen2moe";
  if (model_type == "qwen3_moe") return "qwen3moe";
  if (model_type == "gemma3_text") return "gemma3";
  return std::string(model_type);
}

}  // namespace

std::string supported_model_types() {
  std::string s;
  for (std::string_view t : kSupported) s += (s.empty() ? "" : ", ") + std::string(t);
  return s;
}

// quantization_config: FP8 (weights F8_E4M3/F8_E5M2 with weight_scale tensors,
// model/hf_names.cpp) is read; other methods pack their weights in ways tern
// does not, so they are refused by name rather than by a dtype error later.
namespace {
Status read_quantization(const json& root, HfConfig& c) {
  const json* q = Fields(root).find("quantization_config");
  if (!q) return Status::ok();
  if (!q->is_object()) return error(ErrorKind::InvalidFile, "config.json \"quantization_config\" is not an object");
  const Fields qf(*q);
  const json* method = qf.find("quant_method");
  const std::string m = method && method->is_string() ? method->as_string() : "";
  if (m != "fp8")
    return error(ErrorKind::Unsupported, "config.json quantization_config.quant_method '" + m +
                                             "' is not supported: tern reads unquantized and FP8 (\"fp8\") checkpoints");
  c.fp8 = true;
  const json* block = qf.find("weight_block_size");
  if (!block) return Status::ok();
  if (!block->is_array() || block->size() != 2 || !block->as_array()[0].to_uint64() ||
      !block->as_array()[1].to_uint64() || *block->as_array()[0].to_uint64() == 0 ||
      *block->as_array()[1].to_uint64() == 0 || *block->as_array()[0].to_uint64() > (1u << 20) ||
      *block->as_array()[1].to_uint64() > (1u << 20))
    return error(ErrorKind::InvalidFile, "config.json quantization_config.weight_block_size = " + block->dump() +
                                             " is not [rows, cols] of positive integers");
  c.fp8_block_rows = static_cast<int>(*block->as_array()[0].to_uint64());
  c.fp8_block_cols = static_cast<int>(*block->as_array()[1].to_uint64());
  return Status::ok();
}
}  // namespace

Result<HfConfig> parse_hf_config(const std::string& json_text, const std::string& name) {
  const auto parsed = json::parse(json_text);
  if (!parsed) return error(ErrorKind::InvalidFile, "config.json is not a JSON object: " + parsed.status().message());
  const json& root = *parsed;
  if (!root.is_object()) return error(ErrorKind::InvalidFile, "config.json is not a JSON object");
  HfConfig c;
  c.model_type = Fields(root).string("model_type");
  const json* cfg = &root;
  // Multimodal Gemma 3 nests the text model's settings.
  if (c.model_type == "gemma3" && root.contains("text_config") && root["text_config"].is_object()) {
    cfg = &root["text_config"];
    c.model_type = "gemma3_text";
  }
  if (std::find(std::begin(kSupported), std::end(kSupported), c.model_type) == std::end(kSupported))
    return error(ErrorKind::Unsupported, "config.json model_type '" + c.model_type + "' is not supported (supported: " +
                                             supported_model_types() + ")");
  c.arch = arch_of(c.model_type);
  TERN_RETURN_IF_ERROR(read_sizes(*cfg, c));
  const Fields f(*cfg);
  c.permute_qk = c.arch == "llama";
  c.tie_word_embeddings = f.boolean("tie_word_embeddings", Fields(root).boolean("tie_word_embeddings", false));
  TERN_RETURN_IF_ERROR(read_quantization(root, c));
  if ((c.arch == "qwen2" || c.arch == "qwen2moe") && f.boolean("use_sliding_window", false))
    return error(ErrorKind::Unsupported, "config.json use_sliding_window = true (Qwen2's window over the upper layers) "
                                         "is not supported");
  auto rope = read_rope(*cfg, c.arch == "qwen3" || c.arch == "gemma3" ? 1000000.0 : 10000.0);
  if (!rope) return rope.status();

  c.metadata.emplace_back(std::string(gguf_names::kArchitecture), Value::of_string(c.arch));
  c.metadata.emplace_back("general.name", Value::of_string(name));
  KeyList keys(c);
  TERN_RETURN_IF_ERROR(read_common(*cfg, *rope, c, keys));
  if (c.arch == "gemma2" || c.arch == "gemma3") TERN_RETURN_IF_ERROR(read_gemma(*cfg, *rope, c, keys));
  if (c.arch == "phi3") TERN_RETURN_IF_ERROR(read_phi3(*cfg, *rope, c, keys));
  if (c.model_type == "mixtral" || c.model_type == "qwen2_moe" || c.model_type == "qwen3_moe")
    TERN_RETURN_IF_ERROR(read_moe(*cfg, c, keys));
  if (c.model_type == "mistral" || c.model_type == "mixtral") {
    // llama.cpp drops Mistral's window; tern's llama honours a stated one, as HF computes it.
    auto window = f.integer("sliding_window", 0);
    if (!window) return window.status();
    if (*window > 0) keys.u32(Key::SlidingWindow, *window);
  }
  return c;
}

Result<HfConfig> read_hf_config(const std::string& dir) {
  const std::string path = (std::filesystem::path(dir) / "config.json").string();
  auto text = read_file(path, uint64_t{16} << 20);
  if (!text) return text.status();
  auto name = std::filesystem::path(dir).lexically_normal().filename().string();
  if (name.empty()) name = std::filesystem::path(dir).lexically_normal().parent_path().filename().string();
  auto c = parse_hf_config(*text, name);
  if (!c) return c.status().with_context(path);
  return c;
}

}  // namespace tern::hf
