#include "model/layers.h"

#include <cmath>

namespace tern::layers {

void rms_norm(const Pass& p, const float* x, const VectorWeight& w, float* y, int64_t n_rows) {
  p.be.rms_norm(x, w.dev, y, n_rows, p.hp.n_embd, p.hp.rms_eps);
}

void attention(const Pass& p, const LayerWeights& l, const LayerHParams& lh, const float* xn, float* out) {
  backend::Backend& be = p.be;
  const HParams& hp = p.hp;
  const Activations& a = p.act;
  const AttentionWeights& w = l.attn;
  const int64_t q_dim = hp.q_dim(), kv_dim = static_cast<int64_t>(lh.n_head_kv) * hp.head_dim;
  const size_t g = static_cast<size_t>(l.kv_group);
  const KvPoolView& pool = p.pools[g];
  // Q, K and V read the same normed input: one fused call.
  const backend::MatmulJob qkv[] = {{&w.wq, a.q}, {&w.wk, a.k}, {&w.wv, a.v}};
  be.matmul_group(qkv, xn, p.n);
  if (w.bq.dev) be.add_bias(a.q, w.bq.dev, p.n, q_dim);
  if (w.bk.dev) be.add_bias(a.k, w.bk.dev, p.n, kv_dim);
  if (w.bv.dev) be.add_bias(a.v, w.bv.dev, p.n, kv_dim);
  // Per-head norms (qwen3, gemma3): rows of head_dim over every head of every token.
  if (w.q_norm.dev) be.rms_norm(a.q, w.q_norm.dev, a.q, p.n * hp.n_head, hp.head_dim, hp.rms_eps);
  if (w.k_norm.dev) be.rms_norm(a.k, w.k_norm.dev, a.k, p.n * lh.n_head_kv, hp.head_dim, hp.rms_eps);
  const kernels::RopeParams& rope = lh.rope_local ? hp.rope_local : p.rope;
  be.rope(a.q, p.n, hp.n_head, hp.head_dim, p.in.positions, rope);
  be.rope(a.k, p.n, lh.n_head_kv, hp.head_dim, p.in.positions, rope);
  be.store_kv(pool, l.kv_index, p.in.kv[g].slots, a.k, a.v);
  const float scale = hp.attn_scale > 0.0f ? hp.attn_scale : 1.0f / std::sqrt(static_cast<float>(hp.head_dim));
  kernels::AttentionShape shape{hp.n_head, lh.n_head_kv, hp.head_dim, scale, lh.sliding_window,
                                pool.type == KvType::F16};
  shape.softcap = hp.attn_softcap;
  be.attention(shape, {pool, l.kv_index, p.spans, p.tables[g]}, a.q, a.att);
  be.matmul(w.wo, a.att, out, p.n);
}

namespace {

// The gated FFN with either activation: gate = act(W_gate·xn) * W_up·xn.
void ffn(const Pass& p, const FfnWeights& w, const float* xn, float* out, bool gelu) {
  const Activations& a = p.act;
  const backend::MatmulJob gate_up[] = {{&w.w_gate, a.gate}, {&w.w_up, a.up}};
  p.be.matmul_group(gate_up, xn, p.n);
  if (gelu)
    p.be.geglu(a.gate, a.up, p.n, p.hp.n_ff);
  else
    p.be.swiglu(a.gate, a.up, p.n, p.hp.n_ff);
  p.be.matmul(w.w_down, a.gate, out, p.n);
}

}  // namespace

void gated_ffn(const Pass& p, const FfnWeights& w, const float* xn, float* out) { ffn(p, w, xn, out, false); }

void geglu_ffn(const Pass& p, const FfnWeights& w, const float* xn, float* out) { ffn(p, w, xn, out, true); }

void residual_add(const Pass& p, float* x, const float* y) { p.be.add(x, y, p.n, p.hp.n_embd); }

}  // namespace tern::layers
