// backend/backend.h — the operations a forward pass is made of, and the memory
// they act on, behind one interface: the seam where another kind of hardware
// (the scalar reference today, a GPU later) or a different weight layout
// (shards for tensor parallelism) plugs in without touching the model code.
//
// Contract:
//  - Load step: prepare_matrix() readies one weight matrix for this backend's
//    kernels (the CPU backend packs it into panels on its own threads);
//    upload() does the same for a norm vector or bias. The model keeps the
//    views; the backend owns whatever it made for them.
//  - Activations live in backend memory: scratch(slot, n) hands out a buffer
//    per slot that only grows; what it returns, and every float* an op takes,
//    is backend memory that callers pass around (with pointer arithmetic over
//    rows) but never read or write themselves. to_host() copies results out.
//    (The CPU and reference backends use host memory, so for them this is
//    discipline, not necessity.)
//  - KV: store_kv() writes keys/values into pool slots; attention() reads a
//    sequence's positions through its block table. The pool's memory comes
//    from the KV module (kv/kv_pool.h); the backend never allocates KV.
//  - Ops are synchronous: when a call returns its output is complete.
//  - Results: every backend computes the same mathematics; the CPU backend is
//    bit-identical across batch compositions (kernels/attention.h), the
//    reference backend is the plain scalar oracle. They agree on greedy tokens
//    (tests/backend), not necessarily on the last bits.
// Threading: one forward pass at a time per backend (ops parallelise inside).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/ids.h"
#include "tern/config.h"
#include "core/status.h"
#include "kernels/attention.h"
#include "kernels/ref/ops.h"
#include "kernels/ssm.h"
#include "kv/kv_pool.h"
#include "kv/seq_window.h"

namespace tern::backend {

using BackendKind = tern::BackendKind;  // tern/config.h
// "cpu", "ref"; InvalidArgument names the valid values.
Result<BackendKind> parse_backend_kind(std::string_view name);
const char* backend_kind_name(BackendKind kind);

// One matrix of a fused pass: y = w · x.
struct MatmulJob {
  const kernels::WeightView* w;
  float* y;  // [n_rows][w->n_rows]
};

// One expert's matrix over the rows routed to it: y = w · x over n_rows rows.
struct ExpertJob {
  const kernels::WeightView* w;
  const float* x;  // [n_rows][w->n_cols]
  float* y;        // [n_rows][w->n_rows]
  int64_t n_rows;
};

// Consecutive tokens of one sequence, attending as one block of queries.
struct QuerySpan {
  int64_t first_token = 0;  // row of its first token in the batch
  int n_q = 0;
  int32_t pos0 = 0;         // position of its first token
  int32_t seq = 0;          // index into AttentionInput::tables
};

// What attention reads for one layer: the pool the layer's K/V live in, and
// for each sequence its block table (block ids, position p in table[p / block_size]).
//
// Token trees (model/forward_input.h): with `parent` given, a span is a chain
// of a tree (each token the next one's parent) and attends to what its last
// token's ancestors do: the positions of the tree's root's sequence up to the
// root through the block table, then each tree ancestor at its own slot.
struct AttentionInput {
  KvPoolView pool;
  int layer = 0;                               // layer index inside the pool
  std::span<const QuerySpan> spans;
  std::span<const std::span<const int32_t>> tables;  // [n_seqs]
  std::span<const int32_t> parent;     // [n_tokens] or empty: no trees
  std::span<const int32_t> positions;  // [n_tokens] (with parent)
  std::span<const int64_t> slots;      // [n_tokens] this pool's slot of each token (with parent)
  // [n_seqs] or empty: each sequence's kept positions (kv/seq_window.h), and
  // then q_sink [n_tokens][n_head][head_dim]: the queries rotated at their
  // sink positions (kernels::QueryBlock::q_sink).
  std::span<const SeqWindow> windows;
  const float* q_sink = nullptr;
  // [n_seqs] or empty: where each sequence's attention mass is summed (KV
  // eviction by importance, kernels::attention_mass), after the attention.
  std::span<const KvMass> mass;
};

// One sequence's consecutive tokens in a pass and its recurrent state in one
// state-space layer (kernels/ssm.h); the state is pool memory (kv/kv_pool.h).
struct SsmRun {
  int64_t first_token = 0;  // row of its first token in the batch
  int64_t n_tokens = 0;
  float* conv_state = nullptr;  // [d_conv - 1][d_inner]
  float* ssm_state = nullptr;   // [d_state][d_inner]
  std::span<const kernels::SsmSnap> snaps;  // copies of the state inside the run (kernels/ssm.h)
};

// The selective scan's inputs for a whole pass, row 0 first (each run reads
// its own rows): shapes as kernels::SsmScanArgs.
struct SsmScanInput {
  const float* x = nullptr;
  int64_t x_stride = 0;  // 0: d_inner
  const float* dt = nullptr;
  int64_t dt_stride = 0;  // 0: d_inner
  const float* a = nullptr;
  const float* b = nullptr;
  const float* c = nullptr;
  int64_t bc_stride = 0;
  const float* d = nullptr;
  const float* z = nullptr;
  int64_t z_stride = 0;
  int head_dim = 0;  // Mamba-2 (kernels::SsmScanArgs); 0: Mamba-1
  int n_group = 1;
  const float* dt_bias = nullptr;
};

// Named activation buffers of a pass (scratch slots).
enum class Slot {
  X, Xn, Q, QSink, K, V, Att, Proj, Gate, Up, OutRows, Logits, Router, SharedGate, MoeX, MoeY,
  SsmXz, SsmConv, SsmDtIn, SsmBc, SsmDt, SsmY,  // state-space layers (model/layers_ssm.cpp)
  Count
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual BackendKind kind() const = 0;
  virtual int n_threads() const = 0;

  // ---- load step ----
  virtual void prepare_matrix(kernels::WeightView& w) = 0;
  // A backend pointer to `v`'s values (valid while v lives and the backend exists).
  virtual const float* upload(std::span<const float> v) = 0;
  // Bytes of matrices held in a prepared (packed) form.
  virtual uint64_t prepared_bytes() const = 0;
  // What prepare_matrix() packed: the source bytes (no longer read) and the
  // packed copies (read instead) — what --mlock locks in place of the sources.
  virtual std::vector<std::span<const uint8_t>> packed_sources() const { return {}; }
  virtual std::vector<std::span<const uint8_t>> packed_buffers() const { return {}; }

  // ---- memory ----
  // A buffer of at least n floats for `slot`, reused by later passes; its
  // contents are undefined. Buffers over keep_bytes in all are given back by trim().
  virtual float* scratch(Slot slot, int64_t n) = 0;
  virtual void trim() = 0;
  virtual void to_host(const float* src, float* dst, int64_t n) = 0;

  // ---- ops (x, y: [n_rows][n] unless said) ----
  // x[t] = row tokens[t] of the embedding table, as f32.
  virtual void embed(const kernels::WeightView& table, std::span<const TokenId> tokens, float* x) = 0;
  virtual void rms_norm(const float* x, const float* weight, float* y, int64_t n_rows, int64_t n, float eps) = 0;
  virtual void matmul(const kernels::WeightView& w, const float* x, float* y, int64_t n_rows) = 0;
  // All jobs share x (fused Q/K/V, gate/up); each y as matmul would give.
  virtual void matmul_group(std::span<const MatmulJob> jobs, const float* x, int64_t n_rows) = 0;
  // Every job, each over its own input rows, as matmul would give each (the
  // experts of a MoE layer: one call, whatever the number of experts run).
  virtual void matmul_experts(std::span<const ExpertJob> jobs) = 0;
  virtual void add_bias(float* x, const float* bias, int64_t n_rows, int64_t n) = 0;
  virtual void add(float* x, const float* y, int64_t n_rows, int64_t n) = 0;  // x += y
  // Rotates rows of [n_heads][head_dim] (row t at position positions[t]).
  virtual void rope(float* x, int64_t n_rows, int n_heads, int head_dim, std::span<const int32_t> positions,
                    const kernels::RopeParams& p) = 0;
  virtual void swiglu(float* gate, const float* up, int64_t n_rows, int64_t n) = 0;  // gate = silu(gate) * up
  // gate = gelu_tanh(gate) * up (Gemma's FFN; kernels/elementwise.h).
  virtual void geglu(float* gate, const float* up, int64_t n_rows, int64_t n) = 0;
  // x = cap * tanh(x / cap), cap > 0 (Gemma 2's final-logit soft-cap).
  virtual void softcap(float* x, int64_t n_rows, int64_t n, float cap) = 0;
  virtual void scale(float* x, int64_t n_rows, int64_t n, float s) = 0;  // x *= s
  // Writes row t of k and v ([n_rows][n_kv_head * head_dim]) to pool slot slots[t] of `layer`.
  virtual void store_kv(const KvPoolView& pool, int layer, std::span<const int64_t> slots, const float* k,
                        const float* v) = 0;
  // Every layer's keys and values of slot src[i] copied to slot dst[i], for
  // i = 0, 1, ... in that order (a token tree's accepted path moved to the
  // places its positions name).
  virtual void copy_kv(const KvPoolView& pool, std::span<const int64_t> src, std::span<const int64_t> dst) = 0;
  // Causal attention of the spans' queries q ([n_tokens][n_head][head_dim]) into out.
  virtual void attention(const kernels::AttentionShape& shape, const AttentionInput& in, const float* q,
                         float* out) = 0;
  // out[i] = x[rows[i]] (rows of n floats).
  virtual void gather_rows(const float* x, std::span<const int32_t> rows, float* out, int64_t n) = 0;
  // out[rows[i]] += weights[i] * y[i] for i = 0, 1, ... in that order (rows of
  // n floats; a row may repeat): the experts' outputs added into the tokens
  // routed to them, each token's terms in a fixed order. The weights are host
  // values (routing runs on the host, model/moe_routing.h).
  virtual void scatter_add(const float* y, std::span<const int32_t> rows, std::span<const float> weights, float* out,
                           int64_t n) = 0;
  virtual void zero(float* x, int64_t n_rows, int64_t n) = 0;  // x = 0
  virtual void mul(float* x, const float* w, int64_t n_rows, int64_t n) = 0;  // x[t][j] *= w[j]
  virtual void relu_sqr(float* x, int64_t n_rows, int64_t n) = 0;  // x = max(x, 0)^2
  // State-space layers (kernels/ssm.h), every run from its own state:
  // out [n][d_inner] = silu(conv(x) + bias), x [n][x_stride] (channels first
  // in a row), w [d_conv][d_inner]; and the selective scan into y [n][d_inner].
  virtual void ssm_conv(const kernels::SsmDims& dims, std::span<const SsmRun> runs, const float* x, int64_t x_stride,
                        const float* w, const float* bias, float* out) = 0;
  virtual void ssm_scan(const kernels::SsmDims& dims, std::span<const SsmRun> runs, const SsmScanInput& in,
                        float* y) = 0;
};

// n_threads <= 0: every core (the reference backend always runs on one).
std::unique_ptr<Backend> make_backend(BackendKind kind, int n_threads);

}  // namespace tern::backend
