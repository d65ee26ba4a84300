#include "model/hparams.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "model/arch.h"
#include "model/gguf_names.h"

namespace tern {
namespace {

using gguf_names::Key;
using gguf_names::key;

constexpr uint64_t kMaxInt = uint64_t{1} << 24;  // bounds every integer key: derived sizes stay far from overflow

// Reads an optional positive integer key into `out`, bounded to keep every
// derived size far from overflow.
Status read_int(const gguf::GgufFile& f, const std::string& key, int& out, bool required) {
  if (!f.find(key)) {
    if (required) return error(ErrorKind::InvalidFile, "required metadata key '" + key + "' is missing");
    return Status::ok();
  }
  auto v = f.get_u64(key);
  if (!v) return v.status();
  if (*v > kMaxInt) return error(ErrorKind::InvalidFile, "metadata key '" + key + "' = " + std::to_string(*v) + " is implausibly large");
  out = static_cast<int>(*v);
  return Status::ok();
}

// Reads a key that may hold one integer for every layer or, as llama.cpp's
// GGUF allows, an array with one integer per layer; absent: `fallback` for
// every layer. out: [n_layer].
Status read_per_layer(const gguf::GgufFile& f, const std::string& key, int n_layer, int fallback, std::vector<int>& out) {
  out.assign(static_cast<size_t>(n_layer), fallback);
  const gguf::Value* v = f.find(key);
  const gguf::Array* arr = v ? v->as_array() : nullptr;
  if (!arr) {
    int x = fallback;
    TERN_RETURN_IF_ERROR(read_int(f, key, x, false));
    out.assign(static_cast<size_t>(n_layer), x);
    return Status::ok();
  }
  if (arr->items.size() != static_cast<size_t>(n_layer))
    return error(ErrorKind::InvalidFile, "metadata key '" + key + "' has " + std::to_string(arr->items.size()) +
                                             (arr->items.size() == 1 ? " value" : " values") + " but the model has " + std::to_string(n_layer) +
                                             " layers (block_count): give one value per layer, or a single value for all");
  for (size_t il = 0; il < arr->items.size(); ++il) {
    const auto x = arr->items[il].as_u64();
    if (!x || *x > kMaxInt)
      return error(ErrorKind::InvalidFile, "metadata key '" + key + "' value " + std::to_string(il) +
                                               " (layer " + std::to_string(il) + ") is " + arr->items[il].to_display() +
                                               ", not an integer in [0, 2^24]");
    out[il] = static_cast<int>(*x);
  }
  return Status::ok();
}

// Reads an optional float key that must be finite and, unless allow_zero, positive
// (epsilons, RoPE base and factors): a NaN or zero there loads fine and then
// makes every logit NaN, which the user sees as empty output with exit 0.
Status read_float(const gguf::GgufFile& f, const std::string& key, double fallback, float& out, bool allow_zero = false) {
  auto v = f.get_f64_or(key, fallback);
  if (!v) return v.status();
  const float x = static_cast<float>(*v);  // a finite double may still overflow float
  if (!std::isfinite(x) || x < 0.0f || (x == 0.0f && !allow_zero)) {
    char value[32];
    std::snprintf(value, sizeof value, "%g", *v);
    return error(ErrorKind::InvalidFile, "metadata key '" + key + "' = " + value + " must be a finite " +
                                             (allow_zero ? "number >= 0" : "positive number"));
  }
  out = x;
  return Status::ok();
}

// Reads the sizes every layer shares (a state-space model has no FFN or heads).
Status read_sizes(const gguf::GgufFile& f, const ArchInfo& info, int n_vocab_from_tensors, HParams& hp) {
  const std::string_view arch = info.name;
  const bool attention = !info.state_space;
  const bool ffn = attention && !info.hybrid;  // a hybrid's widths are per layer (read_hybrid)
  TERN_RETURN_IF_ERROR(read_int(f, key(arch, Key::EmbeddingLength), hp.n_embd, true));
  TERN_RETURN_IF_ERROR(read_int(f, key(arch, Key::BlockCount), hp.n_layer, true));
  if (!info.hybrid) TERN_RETURN_IF_ERROR(read_int(f, key(arch, Key::FeedForwardLength), hp.n_ff, ffn));
  TERN_RETURN_IF_ERROR(read_int(f, key(arch, Key::HeadCount), hp.n_head, attention));
  hp.n_ctx_train = 2048;
  const std::string ctx_key = key(arch, Key::ContextLength);
  TERN_RETURN_IF_ERROR(read_int(f, ctx_key, hp.n_ctx_train, false));
  if (hp.n_ctx_train <= 0)  // else it surfaces later as a puzzling KV-size error
    return error(ErrorKind::InvalidFile, "metadata key '" + ctx_key + "' = 0 must be positive");
  hp.n_vocab = n_vocab_from_tensors;
  TERN_RETURN_IF_ERROR(read_int(f, key(arch, Key::VocabSize), hp.n_vocab, false));
  if (hp.n_embd <= 0 || hp.n_layer <= 0 || hp.n_vocab <= 0 || (ffn && hp.n_ff <= 0) || (attention && hp.n_head <= 0))
    return error(ErrorKind::InvalidFile, "model sizes must be positive: " + hp.summary());
  return Status::ok();
}

// A state-space model's mixer sizes; every layer is recurrent. The bounds
// keep a state slot (and the conv kernel's taps) within what the kernels hold.
Status read_ssm(const gguf::GgufFile& f, const ArchInfo& arch, HParams& hp) {
  SsmHParams& s = hp.ssm;
  TERN_RETURN_IF_ERROR(read_int(f, key(arch.name, Key::SsmConvKernel), s.d_conv, true));
  TERN_RETURN_IF_ERROR(read_int(f, key(arch.name, Key::SsmInnerSize), s.d_inner, true));
  TERN_RETURN_IF_ERROR(read_int(f, key(arch.name, Key::SsmStateSize), s.d_state, true));
  TERN_RETURN_IF_ERROR(read_int(f, key(arch.name, Key::SsmTimeStepRank), s.dt_rank, true));
  auto rms = f.get_bool_or(key(arch.name, Key::SsmDtBcRms), false);
  if (!rms) return rms.status();
  s.dt_b_c_rms = *rms;
  if (arch.ssm_groups) {
    TERN_RETURN_IF_ERROR(read_int(f, key(arch.name, Key::SsmGroupCount), s.n_group, true));
    if (s.n_group <= 0 || s.dt_rank <= 0 || s.dt_rank % s.n_group != 0 || s.d_inner % std::max(s.dt_rank, 1) != 0)
      return error(ErrorKind::InvalidFile,
                   "Mamba-2 sizes: " + key(arch.name, Key::SsmTimeStepRank) + " (heads, " + std::to_string(s.dt_rank) +
                       ") must divide inner_size (" + std::to_string(s.d_inner) + ") and be a multiple of " +
                       key(arch.name, Key::SsmGroupCount) + " (" + std::to_string(s.n_group) + ")");
  }
  if (s.d_conv < 1 || s.d_conv > 16)
    return error(ErrorKind::Unsupported, "metadata key '" + key(arch.name, Key::SsmConvKernel) + "' = " +
                                             std::to_string(s.d_conv) + ": convolutions of 1 to 16 taps are supported");
  if (s.d_inner <= 0 || s.d_state <= 0 || s.dt_rank <= 0)
    return error(ErrorKind::InvalidFile, "state-space sizes (inner_size, state_size, time_step_rank) must be positive");
  if (s.state_floats() > (int64_t{1} << 28))
    return error(ErrorKind::InvalidFile, "a state of " + std::to_string(s.state_floats()) +
                                             " floats per layer is implausibly large");
  hp.layers.assign(static_cast<size_t>(hp.n_layer), LayerHParams{.recurrent = true});
  return read_float(f, key(arch.name, Key::RmsEpsilon), 1e-5, hp.rms_eps);
}

Status read_head_dim(const gguf::GgufFile& f, const ArchInfo& arch, HParams& hp);

// Per-layer K/V head counts and windows (scalars or arrays), then the head size.
Status read_attention(const gguf::GgufFile& f, const ArchInfo& arch, HParams& hp) {
  const std::string kv_key = key(arch.name, Key::HeadCountKv);
  std::vector<int> n_head_kv, window(static_cast<size_t>(hp.n_layer), 0);
  TERN_RETURN_IF_ERROR(read_per_layer(f, kv_key, hp.n_layer, hp.n_head, n_head_kv));
  if (arch.reads_sliding_window)
    TERN_RETURN_IF_ERROR(read_per_layer(f, key(arch.name, Key::SlidingWindow), hp.n_layer, 0, window));
  const gguf::Value* kv_value = f.find(kv_key);
  const bool kv_per_layer = kv_value && kv_value->as_array();
  hp.layers.resize(static_cast<size_t>(hp.n_layer));
  for (int il = 0; il < hp.n_layer; ++il) {
    LayerHParams& l = hp.layers[static_cast<size_t>(il)];
    l.n_head_kv = n_head_kv[static_cast<size_t>(il)];
    l.sliding_window = window[static_cast<size_t>(il)];
    const std::string where = kv_per_layer ? " (layer " + std::to_string(il) + ")" : "";
    if (l.n_head_kv <= 0)
      return error(ErrorKind::InvalidFile, "metadata key '" + kv_key + "' = 0" + where + " must be positive");
    if (hp.n_head % l.n_head_kv != 0)
      return error(ErrorKind::InvalidFile, "head_count " + std::to_string(hp.n_head) +
                                               " is not a multiple of head_count_kv " + std::to_string(l.n_head_kv) + where);
  }
  hp.n_head_kv = *std::max_element(n_head_kv.begin(), n_head_kv.end());
  hp.sliding_window = std::all_of(window.begin(), window.end(), [&](int w) { return w == window[0]; }) ? window[0] : -1;
  return read_head_dim(f, arch, hp);
}

// The head size (key_length, default n_embd / n_head) and the norms' epsilon.
Status read_head_dim(const gguf::GgufFile& f, const ArchInfo& arch, HParams& hp) {
  const std::string key_length = key(arch.name, Key::KeyLength);
  if (hp.n_embd % hp.n_head != 0 && !f.find(key_length))
    return error(ErrorKind::InvalidFile, "embedding_length is not a multiple of head_count and no key_length is given");
  hp.head_dim = hp.n_embd / hp.n_head;
  TERN_RETURN_IF_ERROR(read_int(f, key_length, hp.head_dim, false));
  int value_dim = hp.head_dim;
  TERN_RETURN_IF_ERROR(read_int(f, key(arch.name, Key::ValueLength), value_dim, false));
  if (value_dim != hp.head_dim || hp.head_dim <= 0)
    return error(ErrorKind::Unsupported, "key_length " + std::to_string(hp.head_dim) + " != value_length " +
                                             std::to_string(value_dim) + " is not supported");
  // Each factor is bounded but their product is not: q_dim() would overflow int
  // and wrap to a size that tensors can match. (n_head_kv <= n_head bounds kv_dim.)
  if (static_cast<int64_t>(hp.n_head) * hp.head_dim > (int64_t{1} << 24))
    return error(ErrorKind::InvalidFile, "head_count " + std::to_string(hp.n_head) + " x key_length " +
                                             std::to_string(hp.head_dim) + " is implausibly large");
  if (hp.head_dim > 512)
    return error(ErrorKind::Unsupported, "head size " + std::to_string(hp.head_dim) + " exceeds the 512 the attention kernels support");
  return read_float(f, key(arch.name, Key::RmsEpsilon), 1e-5, hp.rms_eps);
}

// A hybrid stack (ArchInfo::hybrid): the Mamba-2 mixer's sizes, then per
// layer attention.head_count_kv and feed_forward_length (arrays, as llama.cpp's
// converter writes them): both 0, the mixer; K/V heads only, an attention
// layer (no RoPE: its position comes from the mixers); a width only, an FFN.
Status read_hybrid(const gguf::GgufFile& f, const ArchInfo& arch, HParams& hp) {
  TERN_RETURN_IF_ERROR(read_ssm(f, arch, hp));  // every layer a mixer until the arrays say otherwise
  std::vector<int> n_head_kv, n_ff;
  const std::string kv_key = key(arch.name, Key::HeadCountKv), ff_key = key(arch.name, Key::FeedForwardLength);
  TERN_RETURN_IF_ERROR(read_per_layer(f, kv_key, hp.n_layer, 0, n_head_kv));
  TERN_RETURN_IF_ERROR(read_per_layer(f, ff_key, hp.n_layer, 0, n_ff));
  for (int il = 0; il < hp.n_layer; ++il) {
    LayerHParams& l = hp.layers[static_cast<size_t>(il)];
    l.n_head_kv = n_head_kv[static_cast<size_t>(il)];
    l.n_ff = n_ff[static_cast<size_t>(il)];
    l.recurrent = l.n_head_kv == 0 && l.n_ff == 0;
    const std::string where = " (layer " + std::to_string(il) + ")";
    if (l.n_head_kv > 0 && l.n_ff > 0)
      return error(ErrorKind::InvalidFile, "metadata keys '" + kv_key + "' and '" + ff_key + "' are both non-zero" +
                                               where + ": a " + std::string(arch.name) + " layer is a Mamba-2 mixer " +
                                               "(both 0), an attention (K/V heads only) or an FFN (a width only)");
    if (l.n_head_kv > 0 && hp.n_head % l.n_head_kv != 0)
      return error(ErrorKind::InvalidFile, "head_count " + std::to_string(hp.n_head) +
                                               " is not a multiple of head_count_kv " + std::to_string(l.n_head_kv) + where);
  }
  hp.n_head_kv = *std::max_element(n_head_kv.begin(), n_head_kv.end());
  hp.n_ff = *std::max_element(n_ff.begin(), n_ff.end());
  TERN_RETURN_IF_ERROR(read_head_dim(f, arch, hp));
  hp.rope.n_rot = 0;  // no rotation (layers.h: attention)
  hp.rope_local = hp.rope;
  return Status::ok();
}

Status read_rope(const gguf::GgufFile& f, const ArchInfo& arch, HParams& hp) {
  auto& r = hp.rope;
  r.layout = arch.rope_layout;
  r.n_rot = hp.head_dim;
  TERN_RETURN_IF_ERROR(read_int(f, key(arch.name, Key::RopeDimensionCount), r.n_rot, false));
  if (r.n_rot <= 0 || r.n_rot > hp.head_dim || r.n_rot % 2 != 0)
    return error(ErrorKind::InvalidFile, "rope.dimension_count " + std::to_string(r.n_rot) +
                                             " must be even and at most the head size " + std::to_string(hp.head_dim));
  TERN_RETURN_IF_ERROR(read_float(f, key(arch.name, Key::RopeFreqBase), 10000.0, r.freq_base));

  const std::string type_key = key(arch.name, Key::RopeScalingType);
  std::string scaling = "none";
  if (f.find(type_key)) {
    auto s = f.get_string(type_key);
    if (!s) return s.status();
    scaling = *s;
  }
  // Zero is what some converters write for "no scaling"; NaN and infinities are never meant.
  float factor = 1.0f;
  const std::string legacy_key = key(arch.name, Key::RopeScaleLinear);
  const bool legacy = !f.find(key(arch.name, Key::RopeScalingFactor)) && f.find(legacy_key);
  const std::string factor_key = legacy ? legacy_key : key(arch.name, Key::RopeScalingFactor);
  if (f.find(factor_key)) {
    TERN_RETURN_IF_ERROR(read_float(f, factor_key, 1.0, factor, /*allow_zero=*/true));
    // older files (legacy key): always linear; type absent: linear, as llama.cpp reads it
    if (scaling == "none" && (legacy || (!f.find(type_key) && factor != 1.0f))) scaling = "linear";
  }
  if (scaling != "none" && !(factor > 0.0f))
    return error(ErrorKind::InvalidFile, "metadata key '" + factor_key + "' must be positive for rope scaling '" +
                                             scaling + "'");
  hp.rope_orig_ctx = hp.n_ctx_train;
  TERN_RETURN_IF_ERROR(read_int(f, key(arch.name, Key::RopeScalingOrigCtx), hp.rope_orig_ctx, false));
  // The attention factor scales q and k whatever the scaling type (llama.cpp
  // multiplies its yarn_attn_factor by it for every architecture): Phi-3's
  // LongRoPE declares one without a scaling type.
  TERN_RETURN_IF_ERROR(read_float(f, key(arch.name, Key::RopeScalingAttnFactor), 1.0, r.yarn_attn_factor));
  if (scaling == "linear") {
    r.freq_scale = static_cast<float>(1.0 / factor);
  } else if (scaling == "yarn") {
    r.freq_scale = static_cast<float>(1.0 / factor);
    r.yarn_orig_ctx = hp.rope_orig_ctx;
    r.yarn_ext_factor = 1.0f;
  } else if (scaling != "none") {
    return error(ErrorKind::Unsupported, "rope.scaling.type '" + scaling + "' is not supported (none, linear, yarn)");
  }
  return Status::ok();
}

// Expert counts and sizes, as llama.cpp reads them: expert_count (absent: 0,
// a dense model, which qwen2moe/qwen3moe refuse), expert_used_count in
// [1, expert_count], the experts' FFN width and qwen2moe's shared expert's.
Status read_experts(const gguf::GgufFile& f, const ArchInfo& arch, HParams& hp) {
  const MoeInfo& moe = *arch.moe;
  const std::string count_key = key(arch.name, Key::ExpertCount), used_key = key(arch.name, Key::ExpertUsedCount);
  TERN_RETURN_IF_ERROR(read_int(f, count_key, hp.n_expert, moe.required));
  if (hp.n_expert == 0) {
    if (moe.required) return error(ErrorKind::InvalidFile, "metadata key '" + count_key + "' = 0: architecture '" +
                                                               std::string(arch.name) + "' needs experts");
    return Status::ok();
  }
  constexpr int kMaxExperts = 512;  // llama.cpp's LLAMA_MAX_EXPERTS
  if (hp.n_expert > kMaxExperts)
    return error(ErrorKind::InvalidFile, "metadata key '" + count_key + "' = " + std::to_string(hp.n_expert) +
                                             " exceeds the " + std::to_string(kMaxExperts) + " experts supported");
  TERN_RETURN_IF_ERROR(read_int(f, used_key, hp.n_expert_used, true));
  if (hp.n_expert_used <= 0 || hp.n_expert_used > hp.n_expert)
    return error(ErrorKind::InvalidFile, "metadata key '" + used_key + "' = " + std::to_string(hp.n_expert_used) +
                                             " must be between 1 and " + count_key + " = " + std::to_string(hp.n_expert));
  hp.n_ff_exp = hp.n_ff;
  if (moe.expert_ffn_key) {
    hp.n_ff_exp = hp.n_ff / hp.n_expert_used;
    TERN_RETURN_IF_ERROR(read_int(f, key(arch.name, Key::ExpertFeedForwardLength), hp.n_ff_exp, false));
  }
  if (moe.shared_expert) {
    hp.n_ff_shexp = hp.n_ff;
    TERN_RETURN_IF_ERROR(read_int(f, key(arch.name, Key::ExpertSharedFeedForwardLength), hp.n_ff_shexp, false));
    if (hp.n_ff_shexp <= 0) return error(ErrorKind::InvalidFile, "the shared expert's feed-forward length must be positive");
  }
  if (hp.n_ff_exp <= 0) return error(ErrorKind::InvalidFile, "the experts' feed-forward length must be positive");
  hp.moe_norm_weights = moe.norm_weights;
  return Status::ok();
}

}  // namespace

Result<HParams> read_hparams(const gguf::GgufFile& f, int n_vocab_from_tensors) {
  auto arch_name = f.get_string(std::string(gguf_names::kArchitecture));
  if (!arch_name) return arch_name.status();
  const ArchInfo* arch = find_arch(*arch_name);
  if (!arch)
    return error(ErrorKind::Unsupported, "unknown architecture '" + *arch_name + "' (supported: " +
                                             std::string(supported_arch_names()) + ")");
  HParams hp;
  hp.arch = *arch_name;
  TERN_RETURN_IF_ERROR(read_sizes(f, *arch, n_vocab_from_tensors, hp));
  if (arch->state_space || arch->hybrid) {
    TERN_RETURN_IF_ERROR(arch->hybrid ? read_hybrid(f, *arch, hp) : read_ssm(f, *arch, hp));
    if (arch->read_hparams) TERN_RETURN_IF_ERROR(arch->read_hparams(f, hp));
    return hp;
  }
  TERN_RETURN_IF_ERROR(read_attention(f, *arch, hp));
  TERN_RETURN_IF_ERROR(read_rope(f, *arch, hp));
  hp.rope_local = hp.rope;
  if (arch->moe) TERN_RETURN_IF_ERROR(read_experts(f, *arch, hp));
  if (arch->read_hparams) TERN_RETURN_IF_ERROR(arch->read_hparams(f, hp));
  return hp;
}

std::string HParams::summary() const {
  // A per-layer value reads as [a,b,...] when the layers differ.
  auto per_layer = [&](int summary_value, int LayerHParams::*field) {
    const bool varies = std::any_of(layers.begin(), layers.end(), [&](const LayerHParams& l) { return l.*field != layers[0].*field; });
    if (!varies) return std::to_string(summary_value);
    std::string s = "[";
    for (const LayerHParams& l : layers) s += (s.size() > 1 ? "," : "") + std::to_string(l.*field);
    return s + "]";
  };
  char buf[320];
  std::snprintf(buf, sizeof buf,
                "arch=%s n_vocab=%d n_ctx_train=%d n_embd=%d n_layer=%d n_ff=%d n_head=%d head_dim=%d n_rot=%d "
                "rope_base=%g rms_eps=%g",
                arch.c_str(), n_vocab, n_ctx_train, n_embd, n_layer, n_ff, n_head, head_dim, rope.n_rot,
                rope.freq_base, rms_eps);
  std::string s = std::string(buf) + " n_head_kv=" + per_layer(n_head_kv, &LayerHParams::n_head_kv) +
                  " sliding_window=" + per_layer(sliding_window, &LayerHParams::sliding_window);
  if (has_ssm())
    s += " d_conv=" + std::to_string(ssm.d_conv) + " d_inner=" + std::to_string(ssm.d_inner) +
         " d_state=" + std::to_string(ssm.d_state) + " dt_rank=" + std::to_string(ssm.dt_rank) +
         (ssm.mamba2() ? " n_group=" + std::to_string(ssm.n_group) : "") + (ssm.dt_b_c_rms ? " dt_b_c_rms" : "");
  if (n_expert > 0)
    s += " n_expert=" + std::to_string(n_expert) + " n_expert_used=" + std::to_string(n_expert_used) +
         " n_ff_exp=" + std::to_string(n_ff_exp) + (n_ff_shexp > 0 ? " n_ff_shexp=" + std::to_string(n_ff_shexp) : "");
  return s;
}

}  // namespace tern
