// A plain double-precision Llama-family forward pass over a GGUF file,
// written for the tests only. It shares no code with src/model or
// src/kernels: it reads the metadata keys itself (its own defaults), decodes
// every weight to double once (quant to_float is the only engine code used,
// to get at the numbers), and computes one token at a time with a
// per-sequence cache, llama.cpp semantics:
//
//   x = embd[tok]
//   per layer:  h = rmsnorm(x) * attn_norm
//               q, k, v = Wq h + bq, Wk h + bk, Wv h + bv
//                 (Wq, Wk, Wv: rows of attn_qkv.weight in that order when the file fuses them)
//               q, k = each head rmsnorm'd * attn_{q,k}_norm, when the file has them (qwen3)
//               q, k = rope(q, pos), rope(k, pos)         (see RefConfig)
//               head j of q attends kv head j / (n_head / n_head_kv) over
//               positions [max(0, pos - window + 1), pos], scale 1/sqrt(head_dim)
//               (n_head_kv and window of this layer: the keys may be arrays
//               with one value per layer)
//               x += Wo att
//               x += Wdown (silu(Wgate g) * Wup g),  g = rmsnorm(x) * ffn_norm
//                 (no ffn_gate.weight and ffn_up.weight of 2 n_ff rows: its first half is Wgate)
//   logits = Wout (rmsnorm(x) * output_norm)     (Wout = embd when output.weight is absent)
//
// Mixture of experts (expert_count > 0: llama = Mixtral, qwen2moe, qwen3moe),
// as llama.cpp's build_moe_ffn with softmax gating: the FFN term becomes
//   p = softmax(Wrouter g) over all experts; S = the k largest (ties: lower index)
//   w_e = p_e for e in S, divided by sum_{e in S} p_e when renormalising (llama, qwen3moe)
//   ffn = sum_{e in S} w_e Wdown_e (silu(Wgate_e g) * Wup_e g)
//         + sigmoid(gshexp . g) Wdown_sh (silu(Wgate_sh g) * Wup_sh g)   (qwen2moe)
// where expert e's matrices are the e-th slabs of ffn_{gate,up,down}_exps.
//
// gemma2 / gemma3 (as llama.cpp's graphs): x = embd[tok] * sqrt(n_embd); the
// attention and FFN outputs pass through their own RMS norms
// (post_attention_norm, post_ffw_norm) before each add; the FFN gates with
// GELU's tanh form; NeoX pairing; layer il is local (window, local RoPE base)
// when il % period < period - 1; scores scale by 1/sqrt(head_dim) (27B:
// n_embd / n_head); gemma2 caps scores and logits with cap * tanh(s / cap);
// gemma3 RMS-norms each q and k head (attn_q_norm, attn_k_norm) before RoPE.
//
// `config` is public so a test can change one aspect (window, layout, base…)
// and show that the engine's output depends on it.
#pragma once

#include <string>
#include <vector>

#include "gguf/reader.h"

namespace tern::test {

struct RefConfig {
  int n_vocab = 0, n_embd = 0, n_layer = 0, n_ff = 0, n_head = 0, n_head_kv = 0;
  int head_dim = 0;        // attention.key_length, else n_embd / n_head
  int n_rot = 0;           // rope.dimension_count, else head_dim
  double rms_eps = 1e-5;
  double rope_base = 10000.0;
  bool neox = false;       // pairs (i, i + n_rot/2) instead of (2i, 2i+1); qwen2
  std::string scaling = "none";  // none | linear | yarn
  double scaling_factor = 1.0;
  int yarn_orig_ctx = 0;   // rope.scaling.original_context_length, else context_length
  double yarn_beta_fast = 32.0, yarn_beta_slow = 1.0;
  double yarn_attn_factor = 1.0;
  int sliding_window = 0;  // 0 = full causal attention
  // RoPE frequency divisors, [n_rot/2] each, empty when the file has none:
  // rope_freqs.weight divides every pair's angle; otherwise rope_factors_long
  // does when n_ctx exceeds yarn_orig_ctx (read for LongRoPE too), else
  // rope_factors_short. yarn_attn_factor scales q and k whatever the scaling.
  std::vector<double> rope_freqs, rope_long, rope_short;
  int n_ctx = 0;           // the context in force (sets the LongRoPE choice); 0 = context_length
  int n_ctx_train = 0;     // context_length
  bool qk_norm = true;     // false: ignore attn_{q,k}_norm (a test switching the feature off)
  // One value per layer when the file gives an array; empty: the scalar above for every layer.
  std::vector<int> layer_n_head_kv, layer_window;

  // Gemma (defaults: off). Each can be switched off alone to show the engine depends on it.
  double embd_scale = 1.0;     // token embeddings times this
  bool gelu = false;           // FFN gate: gelu_tanh instead of silu
  double attn_scale = 0.0;     // 0: 1 / sqrt(head_dim)
  double attn_softcap = 0.0;   // 0: off
  double final_softcap = 0.0;  // 0: off
  bool post_norms = false;     // apply post_attention_norm / post_ffw_norm
  double rope_base_local = 0.0;     // RoPE base of local layers
  bool local_rope_scaled = true;    // local layers keep rope scaling (gemma2) or not (gemma3)
  std::vector<bool> layer_local;    // [n_layer] local (sliding-window) layers; empty: none

  // Mixture of experts (n_expert 0: dense). Each can be changed to show the engine depends on it.
  int n_expert = 0, n_expert_used = 0, n_ff_exp = 0, n_ff_shexp = 0;
  bool moe_norm_weights = false;  // renormalise the top-k weights
  bool shared_expert = true;      // add the shared expert where the file has one
  bool shared_gate = true;        // scale it by sigmoid(gate); false: by 1

  int n_head_kv_of(int il) const { return layer_n_head_kv.empty() ? n_head_kv : layer_n_head_kv[il]; }
  int window_of(int il) const { return layer_window.empty() ? sliding_window : layer_window[il]; }
};

class ReferenceGguf {
 public:
  // false (with *why) when a key or tensor it needs is absent.
  bool load(const gguf::GgufFile& file, std::string* why);

  // Logits [n_vocab] of every position of `tokens` fed as one sequence from position 0.
  std::vector<std::vector<double>> forward_all(const std::vector<int>& tokens) const;

  // RoPE angle scale and magnitude for rotation pair i at `pos` (exposed for the YaRN test).
  void rope_angle(int pair, int pos, double& theta, double& mscale) const;
  // The frequency divisors in force (see RefConfig), or null.
  const std::vector<double>* rope_factors() const;

  RefConfig config;

 private:
  struct Layer {
    std::vector<double> attn_norm, wq, wk, wv, wo, bq, bk, bv, q_norm, k_norm, ffn_norm, w_gate, w_up, w_down;
    std::vector<double> post_attn_norm, post_ffw_norm;  // Gemma
    std::vector<double> router, gate_exps, up_exps, down_exps;       // MoE: [n_expert][rows][cols]
    std::vector<double> gate_shexp, up_shexp, down_shexp, gate_inp_shexp;  // qwen2moe
  };
  std::vector<double> moe(const Layer& l, const std::vector<double>& g) const;
  void rope(std::vector<double>& x, int n_heads, int pos, bool local) const;
  void rope_angle_of(double base, double factor, const std::string& scaling, int pair, int pos, double& theta,
                     double& mscale) const;

  std::vector<double> embd_;    // [n_vocab][n_embd]
  std::vector<double> out_;     // [n_vocab][n_embd]
  std::vector<double> out_norm_;
  std::vector<Layer> layers_;
};

}  // namespace tern::test
