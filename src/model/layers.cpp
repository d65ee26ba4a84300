#include "model/layers.h"

#include <algorithm>
#include <cmath>

#include "model/moe_routing.h"

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
  // A sequence's own window applies to full-attention layers (a sliding-window
  // layer keeps the model's): the queries are also rotated at their sink positions.
  const bool windows = !p.in.windows.empty() && lh.sliding_window == 0;
  const bool sinks = windows && std::any_of(p.in.windows.begin(), p.in.windows.end(),
                                            [](const SeqWindow& sw) { return sw.n_sink > 0; });
  float* q_sink = nullptr;
  if (sinks) {
    q_sink = be.scratch(backend::Slot::QSink, p.n * q_dim);  // [n][n_head][head_dim]
    be.gather_rows(a.q, p.all_rows, q_sink, q_dim);
    if (rope.n_rot > 0) be.rope(q_sink, p.n, hp.n_head, hp.head_dim, p.sink_positions, rope);
  }
  if (rope.n_rot > 0) {  // 0: an attention without positions (hybrid stacks, whose mixers order the tokens)
    be.rope(a.q, p.n, hp.n_head, hp.head_dim, p.in.positions, rope);
    be.rope(a.k, p.n, lh.n_head_kv, hp.head_dim, p.in.positions, rope);
  }
  be.store_kv(pool, l.kv_index, p.in.kv[g].slots, a.k, a.v);
  const float scale = hp.attn_scale > 0.0f ? hp.attn_scale : 1.0f / std::sqrt(static_cast<float>(hp.head_dim));
  kernels::AttentionShape shape{hp.n_head, lh.n_head_kv, hp.head_dim, scale, lh.sliding_window,
                                pool.type};
  shape.softcap = hp.attn_softcap;
  backend::AttentionInput ai{pool, l.kv_index, p.spans, p.tables[g], p.in.parent, p.in.positions,
                             p.in.kv[g].slots, {}, nullptr, {}};
  if (windows) {
    ai.windows = p.in.windows;
    ai.q_sink = q_sink;
    ai.mass = p.in.kv_mass;  // full-attention layers only: the ones whose blocks are evicted
  }
  be.attention(shape, ai, a.q, a.att);
  be.matmul(w.wo, a.att, out, p.n);
}

namespace {

// The gated FFN with either activation over n_rows rows of x:
// gate = act(W_gate·x) * W_up·x, out = W_down·gate (w's rows give the width).
void ffn(const Pass& p, const FfnWeights& w, const float* x, float* out, int64_t n_rows, bool gelu) {
  const Activations& a = p.act;
  const int64_t n_ff = w.w_gate.n_rows;
  const backend::MatmulJob gate_up[] = {{&w.w_gate, a.gate}, {&w.w_up, a.up}};
  p.be.matmul_group(gate_up, x, n_rows);
  if (gelu)
    p.be.geglu(a.gate, a.up, n_rows, n_ff);
  else
    p.be.swiglu(a.gate, a.up, n_rows, n_ff);
  p.be.matmul(w.w_down, a.gate, out, n_rows);
}

}  // namespace

void gated_ffn(const Pass& p, const FfnWeights& w, const float* xn, float* out) { ffn(p, w, xn, out, p.n, false); }

void geglu_ffn(const Pass& p, const FfnWeights& w, const float* xn, float* out) { ffn(p, w, xn, out, p.n, true); }

void relu2_ffn(const Pass& p, const FfnWeights& w, const float* xn, float* out) {
  p.be.matmul(w.w_up, xn, p.act.up, p.n);
  p.be.relu_sqr(p.act.up, p.n, w.w_up.n_rows);
  p.be.matmul(w.w_down, p.act.up, out, p.n);
}

void moe_ffn(const Pass& p, const MoeWeights& w, const float* xn, float* out) {
  backend::Backend& be = p.be;
  const HParams& hp = p.hp;
  const Activations& a = p.act;
  const int64_t n = p.n, n_embd = hp.n_embd;
  // The router and the shared expert's gate read the same input: one fused call.
  if (w.has_shared()) {
    const backend::MatmulJob jobs[] = {{&w.router, a.router}, {&w.shared_gate, a.shared_gate}};
    be.matmul_group(jobs, xn, n);
  } else {
    be.matmul(w.router, xn, a.router, n);
  }
  // Routing on the host (model/moe_routing.h says what a GPU backend would do instead).
  std::vector<float> logits(static_cast<size_t>(n * hp.n_expert));
  be.to_host(a.router, logits.data(), n * hp.n_expert);
  ExpertRoutes routes;
  route_experts(logits, n, hp.n_expert, hp.n_expert_used, hp.moe_norm_weights, routes);
  be.zero(out, n, n_embd);
  // The chosen experts as one grouped pass: the rows routed to each expert
  // gathered into one block, grouped by expert (routes.rows is in that order),
  // then every chosen expert's gate/up over its own rows in one call, one
  // swiglu, every down in one call, and the weighted outputs added back into
  // their tokens. Experts no token chose are never read, so decode reads k of
  // n_expert experts per layer; the number of calls does not grow with k.
  const int64_t n_routed = static_cast<int64_t>(routes.rows.size());  // n * k
  const int64_t n_ff = hp.n_ff_exp;
  be.gather_rows(xn, routes.rows, a.moe_x, n_embd);
  std::vector<backend::ExpertJob> gate_up, down;
  for (int e = 0; e < hp.n_expert; ++e) {
    const int64_t m = routes.count(e);
    if (m == 0) continue;
    if (!p.expert_tokens.empty()) p.expert_tokens[static_cast<size_t>(e)] += static_cast<uint64_t>(m);
    const int64_t r0 = routes.begin[static_cast<size_t>(e)];
    const FfnWeights& x = w.experts[static_cast<size_t>(e)];
    gate_up.push_back({&x.w_gate, a.moe_x + r0 * n_embd, a.gate + r0 * n_ff, m});
    gate_up.push_back({&x.w_up, a.moe_x + r0 * n_embd, a.up + r0 * n_ff, m});
    down.push_back({&x.w_down, a.gate + r0 * n_ff, a.moe_y + r0 * n_embd, m});
  }
  be.matmul_experts(gate_up);
  be.swiglu(a.gate, a.up, n_routed, n_ff);
  be.matmul_experts(down);
  // Added in expert order for every token, whatever else the batch holds.
  be.scatter_add(a.moe_y, routes.rows, routes.weights, out, n_embd);
  if (!w.has_shared()) return;
  // qwen2moe: every token through the shared expert, scaled by sigmoid(gate logit).
  std::vector<float> gate(static_cast<size_t>(n));
  be.to_host(a.shared_gate, gate.data(), n);
  std::vector<int32_t> all(static_cast<size_t>(n));
  for (size_t t = 0; t < gate.size(); ++t) {
    gate[t] = 1.0f / (1.0f + std::exp(-gate[t]));
    all[t] = static_cast<int32_t>(t);
  }
  ffn(p, w.shared, xn, a.moe_y, n, false);
  be.scatter_add(a.moe_y, all, gate, out, n_embd);
}

void residual_add(const Pass& p, float* x, const float* y) { p.be.add(x, y, p.n, p.hp.n_embd); }

}  // namespace tern::layers
