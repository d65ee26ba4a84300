// gemma2, gemma3: Google's Gemma 2 and Gemma 3 decoders. Against the Llama
// block (llama.cpp's graphs for these architectures are the reference):
//  - token embeddings scaled by sqrt(n_embd);
//  - RMS norms on the attention and FFN outputs too (post_attention_norm,
//    post_ffw_norm), before each residual add;
//  - a GELU(tanh)-gated FFN; NeoX (half-split) RoPE pairing;
//  - sliding-window ("local") layers interleaved with global ones: layer il is
//    local when il % period < period - 1 (Gemma 2: period 2, window 4096 by
//    default; Gemma 3: period 6, i.e. every 6th layer global, and only when the
//    file states a window);
//  - Gemma 2 soft-caps attention scores (attn_logit_softcapping, default 50)
//    and the output logits (final_logit_softcapping, default 30);
//  - Gemma 3 has no attention cap, RMS-norms every query and key head
//    (attn_q_norm, attn_k_norm) and gives its local layers their own RoPE base
//    (rope.freq_base_swa, default 10000) without the global layers' scaling.
// Norm weights: Hugging Face's Gemma norms compute x * (1 + w); llama.cpp's
// converter writes 1 + w into the file, so the ordinary rmsnorm(x) * weight
// reads them as they are.
#include <cmath>
#include <cstdio>

#include "model/arch.h"
#include "model/gguf_names.h"

namespace tern::archs {
namespace {

using gguf_names::Key;
using gguf_names::key;

constexpr uint64_t kMaxInt = uint64_t{1} << 24;

// An optional integer key >= 0; absent: fallback.
Status read_count(const gguf::GgufFile& f, const std::string& k, int fallback, int& out) {
  out = fallback;
  if (!f.find(k)) return Status::ok();
  auto v = f.get_u64(k);
  if (!v) return v.status();
  if (*v > kMaxInt)
    return error(ErrorKind::InvalidFile, "metadata key '" + k + "' = " + std::to_string(*v) + " is implausibly large");
  out = static_cast<int>(*v);
  return Status::ok();
}

// An optional float key, finite and positive (or >= 0 with allow_zero): a NaN
// or zero cap loads fine and then makes every logit NaN.
Status read_real(const gguf::GgufFile& f, const std::string& k, double fallback, float& out, bool allow_zero) {
  auto v = f.get_f64_or(k, fallback);
  if (!v) return v.status();
  const float x = static_cast<float>(*v);
  if (!std::isfinite(x) || x < 0.0f || (x == 0.0f && !allow_zero)) {
    char value[32];
    std::snprintf(value, sizeof value, "%g", *v);
    return error(ErrorKind::InvalidFile, "metadata key '" + k + "' = " + value + " must be a finite " +
                                             (allow_zero ? "number >= 0" : "positive number"));
  }
  out = x;
  return Status::ok();
}

// Marks the local layers (window > 0): il % period < period - 1, as llama.cpp's
// set_swa_pattern (period 0: every layer local; 1: none).
Status set_window_pattern(const gguf::GgufFile& f, int window, int default_period, HParams& hp) {
  int period = default_period;
  TERN_RETURN_IF_ERROR(read_count(f, key(hp.arch, Key::SlidingWindowPattern), default_period, period));
  for (int il = 0; il < hp.n_layer; ++il) {
    LayerHParams& l = hp.layers[static_cast<size_t>(il)];
    l.rope_local = window > 0 && (period == 0 || il % period < period - 1);
    l.sliding_window = l.rope_local ? window : 0;
  }
  bool uniform = true;
  for (const LayerHParams& l : hp.layers) uniform = uniform && l.sliding_window == hp.layers[0].sliding_window;
  hp.sliding_window = uniform ? hp.layers[0].sliding_window : -1;
  return Status::ok();
}

// What both generations share. Queries are scaled by 1/sqrt(query_pre_attn_scalar),
// which is head_dim in every size but the 27B models, where it is n_embd / n_head.
// GGUF has no key for it; llama.cpp recognises the 27B by its layer count, and so do we.
void set_common(HParams& hp, int n_layer_27b) {
  hp.embd_scale = std::sqrt(static_cast<float>(hp.n_embd));
  const int scalar = hp.n_layer == n_layer_27b ? hp.n_embd / hp.n_head : hp.head_dim;
  hp.attn_scale = 1.0f / std::sqrt(static_cast<float>(scalar));
}

Status read_gemma2(const gguf::GgufFile& f, HParams& hp) {
  int window = 0;
  TERN_RETURN_IF_ERROR(read_count(f, key(hp.arch, Key::SlidingWindow), 4096, window));
  TERN_RETURN_IF_ERROR(set_window_pattern(f, window, 2, hp));
  // Local layers keep the global scaling; only a stated base differs.
  TERN_RETURN_IF_ERROR(read_real(f, key(hp.arch, Key::RopeFreqBaseSwa), hp.rope.freq_base, hp.rope_local.freq_base, false));
  TERN_RETURN_IF_ERROR(read_real(f, key(hp.arch, Key::AttnLogitSoftcap), 50.0, hp.attn_softcap, false));
  TERN_RETURN_IF_ERROR(read_real(f, key(hp.arch, Key::FinalLogitSoftcap), 30.0, hp.final_softcap, false));
  set_common(hp, 46);
  return Status::ok();
}

Status read_gemma3(const gguf::GgufFile& f, HParams& hp) {
  int window = 0;
  TERN_RETURN_IF_ERROR(read_count(f, key(hp.arch, Key::SlidingWindow), 0, window));
  TERN_RETURN_IF_ERROR(set_window_pattern(f, window, 6, hp));
  TERN_RETURN_IF_ERROR(read_real(f, key(hp.arch, Key::RopeFreqBaseSwa), 10000.0, hp.rope_local.freq_base, false));
  hp.rope_local.freq_scale = 1.0f;  // the global layers' linear scaling (4B and up) is not theirs
  // Written only by fine-tunes that keep a cap; 0 = off.
  TERN_RETURN_IF_ERROR(read_real(f, key(hp.arch, Key::FinalLogitSoftcap), 0.0, hp.final_softcap, true));
  set_common(hp, 62);
  return Status::ok();
}

// x += post_attention_norm(attention(attn_norm(x)))
// x += post_ffw_norm(geglu_ffn(ffn_norm(x)))
void gemma_block(const Pass& p, const LayerWeights& l, const LayerHParams& lh) {
  const Activations& a = p.act;
  layers::rms_norm(p, a.x, l.attn_norm, a.xn, p.n);
  layers::attention(p, l, lh, a.xn, a.proj);
  layers::rms_norm(p, a.proj, l.attn_post_norm, a.proj, p.n);
  layers::residual_add(p, a.x, a.proj);
  layers::rms_norm(p, a.x, l.ffn_norm, a.xn, p.n);
  layers::geglu_ffn(p, l.ffn, a.xn, a.proj);
  layers::rms_norm(p, a.proj, l.ffn_post_norm, a.proj, p.n);
  layers::residual_add(p, a.x, a.proj);
}

}  // namespace

extern const ArchInfo kGemma2;
extern const ArchInfo kGemma3;
// Windows come from read_gemma2/3 (a pattern, not the per-layer key); no q/k/v biases.
constinit const ArchInfo kGemma2{"gemma2", kernels::RopeLayout::NeoX, /*reads_sliding_window=*/false,
                                 /*reads_qkv_bias=*/false, gemma_block, read_gemma2,
                                 /*reads_post_norms=*/true, /*reads_qk_norm=*/false};
constinit const ArchInfo kGemma3{"gemma3", kernels::RopeLayout::NeoX, /*reads_sliding_window=*/false,
                                 /*reads_qkv_bias=*/false, gemma_block, read_gemma3,
                                 /*reads_post_norms=*/true, /*reads_qk_norm=*/true};

}  // namespace tern::archs
