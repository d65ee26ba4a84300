// model/layers.h — the building blocks a forward pass is made of, each a few
// backend ops (backend/backend.h): RMS norm, the attention block (q/k/v
// projections with optional biases, RoPE, K/V into the layer's pool,
// attention over block tables, output projection), the gated FFN (SwiGLU)
// and the residual add. An architecture's block (model/arch.h) is a short
// composition of these; the model's forward() runs it once per layer.
//
// Every function reads and writes backend memory only (the activations of
// one pass, Pass::act) and runs its ops in a fixed order: the composition
// decides the arithmetic, so moving code between blocks and layers does not
// change results.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "backend/backend.h"
#include "kernels/ref/ops.h"
#include "kv/kv_pool.h"
#include "model/forward_input.h"
#include "model/hparams.h"

namespace tern {

// A 1-D weight (norm scale, bias): decoded to f32 at load, then handed to the backend.
struct VectorWeight {
  std::vector<float> host;     // [n], empty when the file has none (optional biases)
  const float* dev = nullptr;  // Backend::upload(host); null when host is empty
};

struct AttentionWeights {
  kernels::WeightView wq, wk, wv, wo;  // [q_dim][n_embd], [kv_dim(il)][n_embd] x2, [n_embd][q_dim]
  VectorWeight bq, bk, bv;             // [q_dim], [kv_dim(il)], [kv_dim(il)]; optional
  VectorWeight q_norm, k_norm;         // [head_dim] each; optional (qwen3): RMSNorm of every q/k head
};

struct FfnWeights {
  kernels::WeightView w_gate, w_up;  // [n_ff][n_embd]
  kernels::WeightView w_down;        // [n_embd][n_ff]
};

// A mixture-of-experts FFN (model/archs/moe.cpp): a router picks the top-k
// experts per token; each expert is a gated FFN whose matrices are slices of
// the layer's 3-D expert tensors (one view per expert, prepared on its own).
struct MoeWeights {
  kernels::WeightView router;       // [n_expert][n_embd] (ffn_gate_inp)
  std::vector<FfnWeights> experts;  // [n_expert]: gate/up [n_ff_exp][n_embd], down [n_embd][n_ff_exp]
  // qwen2moe: a shared expert every token goes through, scaled by
  // sigmoid(shared_gate · xn); shared_gate is [1][n_embd] (ffn_gate_inp_shexp).
  FfnWeights shared;                // [n_ff_shexp] rows; empty views when the arch has none
  kernels::WeightView shared_gate;
  bool has_shared() const { return shared_gate.data != nullptr; }
};

// A Mamba mixer (model/layers_ssm.cpp). ssm_x's rows are split into the dt
// projection's input and B, C, each a view of its own.
struct SsmWeights {
  kernels::WeightView in;        // [2 d_inner][n_embd]: x, then the gate z
  kernels::WeightView x_dt;      // [dt_rank][d_inner]  (ssm_x's first rows)
  kernels::WeightView x_bc;      // [2 d_state][d_inner] (B, then C)
  kernels::WeightView dt;        // [d_inner][dt_rank]
  kernels::WeightView out;       // [n_embd][d_inner]
  VectorWeight conv;             // [d_conv][d_inner]: the file's taps, transposed at load
  VectorWeight conv_bias;        // [d_inner]
  VectorWeight dt_bias;          // [d_inner]
  VectorWeight a;                // [d_state][d_inner], negative (the file's -exp(A_log), transposed)
  VectorWeight d;                // [d_inner]
  VectorWeight ones;             // [max(dt_rank, d_state)] of 1: the unweighted RMS norms (dt_b_c_rms)
  // Mamba-2: `in` is [z; x, B, C; dt] (SsmHParams::in_rows), conv, conv_bias
  // are over conv_channels, dt_bias, a and d hold one value per head, and
  // x_dt, x_bc and dt are unused.
  VectorWeight norm;             // [d_inner] grouped RMS norm weight (ones: [d_inner / n_group] when n_group > 1)
};

struct LayerWeights {
  int kv_group = 0;        // the KV group (pool) holding this layer's keys/values (-1: none, an FFN-only layer)
  int kv_index = 0;        // this layer's index inside that group's pool
  VectorWeight attn_norm;  // [n_embd]
  AttentionWeights attn;
  VectorWeight ffn_norm;   // [n_embd]
  FfnWeights ffn;
  // Bound only for architectures that have them (ArchInfo), else empty.
  VectorWeight attn_post_norm, ffn_post_norm;  // [n_embd] (Gemma)
  MoeWeights moe;  // bound in place of ffn when the model has experts (HParams::is_moe)
  SsmWeights ssm;  // recurrent layers (LayerHParams::recurrent): in place of attention and FFN
};

// One pass's activations in backend scratch; n = the pass's token count.
struct Activations {
  float* x = nullptr;     // [n][n_embd] residual stream
  float* xn = nullptr;    // [n][n_embd] normed input of a sub-layer
  float* q = nullptr;     // [n][n_head][head_dim]
  float* k = nullptr;     // [n][n_head_kv(il)][head_dim] (sized for the largest layer)
  float* v = nullptr;     // [n][n_head_kv(il)][head_dim]
  float* att = nullptr;   // [n][n_head][head_dim]
  float* proj = nullptr;  // [n][n_embd] sub-layer output
  float* gate = nullptr;  // [n][max_ff] (HParams::max_ff: dense, expert or shared FFN)
  float* up = nullptr;    // [n][max_ff]
  // MoE layers only (null otherwise).
  float* router = nullptr;      // [n][n_expert] router logits
  float* shared_gate = nullptr; // [n] logit of the shared expert's gate
  float* moe_x = nullptr;       // [n * k][n_embd] the rows routed to each chosen expert, grouped by expert
  float* moe_y = nullptr;       // [n * k][n_embd] those experts' outputs (then the shared expert's, [n] rows)
  // State-space layers only (null otherwise).
  float* ssm_xz = nullptr;    // [n][SsmHParams::in_rows] the input projection: x, then the gate z (Mamba-2: z, xBC, dt)
  float* ssm_conv = nullptr;  // [n][conv_channels] silu(conv(x)) (Mamba-2: of x, B and C)
  float* ssm_dt_in = nullptr; // [n][dt_rank]
  float* ssm_bc = nullptr;    // [n][2 d_state] B, then C
  float* ssm_dt = nullptr;    // [n][d_inner] dt before softplus
  float* ssm_y = nullptr;     // [n][d_inner] the gated scan output
};

// One sequence's tokens in a pass (consecutive, in position order).
struct TokenRun {
  int64_t first_token = 0;
  int64_t n_tokens = 0;
  int32_t seq = 0;  // index into the pass's sequences
};

// What every layer of one forward pass shares.
struct Pass {
  backend::Backend& be;
  const HParams& hp;
  const ForwardInput& in;
  int64_t n = 0;                                                  // tokens
  std::span<const KvPoolView> pools;                              // [n_groups]
  std::span<const std::vector<std::span<const int32_t>>> tables;  // [n_groups][n_seqs] block tables
  std::span<const backend::QuerySpan> spans;                      // attention query blocks
  Activations act;
  kernels::RopeParams rope;  // hp.rope with the frequency factors chosen for this pass's context
  // MoE: tokens routed to each expert, summed over the pass's layers ([n_expert]); may be empty.
  std::span<uint64_t> expert_tokens;
  // With in.windows: each token's sink position (SeqWindow::sink_position) and
  // the rows 0 .. n-1 (a copy through gather_rows); empty otherwise.
  std::span<const int32_t> sink_positions;
  std::span<const int32_t> all_rows;
  // With state-space layers: each sequence's tokens, one run per sequence.
  std::span<const TokenRun> runs;
};

namespace layers {

// y = rmsnorm(x) * w over n_rows rows of n_embd (y may be x).
void rms_norm(const Pass& p, const float* x, const VectorWeight& w, float* y, int64_t n_rows);

// out = Wo · attn(rope(qn(Wq·xn + bq)), rope(kn(Wk·xn + bk)), Wv·xn + bv),
// with this layer's K/V heads, window and RoPE (the pass's, or hp.rope_local
// where lh.rope_local), scores scaled by hp.attn_scale and soft-capped by
// hp.attn_softcap when set; qn/kn: per-head RMS norms where the layer has
// q_norm/k_norm (qwen3, gemma3), else identity. Stores the layer's
// keys/values in its pool. Uses act.q/k/v/att.
void attention(const Pass& p, const LayerWeights& l, const LayerHParams& lh, const float* xn, float* out);

// out = W_down · (silu(W_gate·xn) * W_up·xn). Uses act.gate/up.
void gated_ffn(const Pass& p, const FfnWeights& w, const float* xn, float* out);

// out = W_down · (gelu_tanh(W_gate·xn) * W_up·xn) (Gemma). Uses act.gate/up.
void geglu_ffn(const Pass& p, const FfnWeights& w, const float* xn, float* out);

// out = W_down · relu(W_up·xn)^2, an FFN without a gate (Nemotron-H). Uses
// act.up; w_gate is unused.
void relu2_ffn(const Pass& p, const FfnWeights& w, const float* xn, float* out);

// out = sum over the top-k experts e of token t: w_e * W_down_e · (silu(W_gate_e·xn) * W_up_e·xn),
// w = softmax(router · xn) over all experts, restricted to the top k (and
// renormalised to sum to 1 when hp.moe_norm_weights); plus, where the layer
// has one, sigmoid(shared_gate · xn) * the shared expert's gated FFN.
// Only the experts some token chose are computed, each over its tokens only,
// all of them in one grouped call per matrix kind (Backend::matmul_experts;
// routing on the host: model/moe_routing.h). Uses act.router, shared_gate,
// moe_x, moe_y, gate, up; adds the routed counts to p.expert_tokens.
void moe_ffn(const Pass& p, const MoeWeights& w, const float* xn, float* out);

// out = W_out · y, the Mamba-1 mixer (kernels/ssm.h) over each sequence's
// run from its state in the layer's pool (LayerWeights::kv_group/kv_index),
// which starts from zero for a sequence whose run starts at position 0:
//   [x, z] = W_in·xn;  x = silu(conv(x) + conv_bias);  [dt_in, B, C] = W_x·x
//   dt = W_dt·dt_in + dt_bias;  y = scan(x, dt, A, B, C) + D x;  y *= silu(z)
// (dt_in, B, C RMS-normed without weight where hp.ssm.dt_b_c_rms). Uses act.ssm_*.
void mamba_mixer(const Pass& p, const LayerWeights& l, const float* xn, float* out);
// Mamba-2's mixer (heads, groups, the grouped RMS norm of the gated output).
void mamba2_mixer(const Pass& p, const LayerWeights& l, const float* xn, float* out);

// x += y over the pass's rows of n_embd.
void residual_add(const Pass& p, float* x, const float* y);

}  // namespace layers
}  // namespace tern
