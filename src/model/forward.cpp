// The forward pass, top to bottom as in llama2.c, over a ragged batch.
#include <algorithm>
#include <cmath>
#include <string>
#include <unordered_map>

#include "kernels/attention.h"
#include "model/model.h"

namespace tern {
namespace {

void add_bias(float* x, const std::vector<float>& bias, int64_t n_tokens, int64_t n) {
  if (bias.empty()) return;
  for (int64_t t = 0; t < n_tokens; ++t)
    for (int64_t i = 0; i < n; ++i) x[t * n + i] += bias[i];
}

// next_pos: for each sequence in the batch, the position after its last token.
Status validate_batch(const Batch& b, const KvCache& kv, int n_vocab, std::unordered_map<int32_t, int32_t>& next_pos) {
  const size_t n = b.tokens.size();
  if (b.positions.size() != n || b.seq_ids.size() != n || b.logits.size() != n)
    return error(ErrorKind::InvalidArgument, "batch vectors have different lengths");
  for (size_t i = 0; i < n; ++i) {
    if (b.tokens[i] < 0 || b.tokens[i] >= n_vocab)
      return error(ErrorKind::InvalidArgument, "token id " + std::to_string(b.tokens[i]) + " is outside the vocabulary of " +
                                                   std::to_string(n_vocab));
    const SeqId s = b.seq_ids[i];
    if (s.value < 0) return error(ErrorKind::InvalidArgument, "negative sequence id");
    auto [it, inserted] = next_pos.try_emplace(s.value, 0);
    if (inserted) it->second = kv.n_positions(s);
    if (b.positions[i] != it->second)
      return error(ErrorKind::InvalidArgument, "sequence " + std::to_string(s.value) + ": token at position " +
                                                   std::to_string(b.positions[i]) + " but the cache expects position " +
                                                   std::to_string(it->second));
    ++it->second;
  }
  return Status::ok();
}

struct ForwardScratch {
  std::vector<float> x, xn, q, k, v, att, proj, gate, up;
  // Buffers larger than this (a long prompt's: 54 MiB for 512 tokens of a 1B
  // model) are given back after the pass, so a server's resident memory stays
  // file + KV cache + a few MiB; their page faults are ~1% of such a pass.
  static constexpr size_t kKeepBytes = size_t{32} << 20;
  void trim() {
    const std::vector<float>* all[] = {&x, &xn, &q, &k, &v, &att, &proj, &gate, &up};
    size_t bytes = 0;
    for (const auto* b : all) bytes += b->capacity() * sizeof(float);
    if (bytes > kKeepBytes) *this = ForwardScratch{};
  }
};

// Grows (never shrinks) a scratch buffer to at least n elements.
float* grow(std::vector<float>& buf, int64_t n) {
  if (buf.size() < static_cast<size_t>(n)) buf.resize(static_cast<size_t>(n));
  return buf.data();
}

void add_to(float* x, const float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x[i] += y[i];
}

// Per-token element-wise work of a pass: on the pool when there is enough of
// it to pay for the hand-off (a prompt), on the calling thread otherwise (decode).
struct Rows {
  ThreadPool& pool;
  int64_t n;
  template <class Fn>
  void run(int64_t elems_per_row, Fn&& fn) const {
    constexpr int64_t kMinParallel = 1 << 15;  // elements
    if (n < 2 || n * elems_per_row < kMinParallel) {
      for (int64_t t = 0; t < n; ++t) fn(t);
      return;
    }
    pool.parallel_for(static_cast<size_t>(n), [&](size_t b, size_t e, int) {
      for (size_t t = b; t < e; ++t) fn(static_cast<int64_t>(t));
    });
  }
};

}  // namespace

// Consecutive tokens of one sequence form one attention query block (up to
// kMaxBlockTokens), so a prefill chunk is processed as tiles and decode tokens
// of different sequences as separate blocks.
constexpr int kMaxBlockTokens = 64;

struct BlockSpan {
  int64_t first_token;
  int n_q;
};

std::vector<BlockSpan> query_blocks(const Batch& b) {
  std::vector<BlockSpan> out;
  for (int64_t t = 0; t < static_cast<int64_t>(b.size()); ++t) {
    if (!out.empty()) {
      BlockSpan& last = out.back();
      const int64_t prev = last.first_token + last.n_q - 1;
      if (prev == t - 1 && b.seq_ids[prev] == b.seq_ids[t] && b.positions[prev] + 1 == b.positions[t] &&
          last.n_q < kMaxBlockTokens) {
        ++last.n_q;
        continue;
      }
    }
    out.push_back({t, 1});
  }
  return out;
}

Status Model::forward(const Batch& batch, KvCache& kv, std::vector<float>& logits, ThreadPool& pool) const {
  const KvShape& ks = kv.shape();
  if (ks.n_layer != hp_.n_layer || ks.n_kv_head != hp_.n_head_kv || ks.head_dim != hp_.head_dim)
    return error(ErrorKind::InvalidArgument, "KV cache shape does not match the model (layers, KV heads, head size)");
  std::unordered_map<int32_t, int32_t> next_pos;  // seq id -> position after its last token in this batch
  TERN_RETURN_IF_ERROR(validate_batch(batch, kv, hp_.n_vocab, next_pos));
  for (const auto& [seq, end] : next_pos) TERN_RETURN_IF_ERROR(kv.reserve(SeqId(seq), end));

  const int64_t n = static_cast<int64_t>(batch.size());
  const int64_t n_embd = hp_.n_embd, q_dim = hp_.q_dim(), kv_dim = hp_.kv_dim(), n_ff = hp_.n_ff;
  // Activations live in this thread's scratch, reused by the next pass (decode
  // steps and short batches; see ForwardScratch::trim). Every element used is
  // written before it is read.
  thread_local ForwardScratch scratch;
  float* x = grow(scratch.x, n * n_embd);       // [n][n_embd] residual stream
  float* xn = grow(scratch.xn, n * n_embd);     // [n][n_embd] normed input of a sub-layer
  float* q = grow(scratch.q, n * q_dim);        // [n][n_head][head_dim]
  float* k = grow(scratch.k, n * kv_dim);       // [n][n_head_kv][head_dim]
  float* v = grow(scratch.v, n * kv_dim);       // [n][n_head_kv][head_dim]
  float* att = grow(scratch.att, n * q_dim);    // [n][n_head][head_dim]
  float* proj = grow(scratch.proj, n * n_embd); // [n][n_embd] sub-layer output
  float* gate = grow(scratch.gate, n * n_ff);   // [n][n_ff]
  float* up = grow(scratch.up, n * n_ff);       // [n][n_ff]

  const std::vector<BlockSpan> spans = query_blocks(batch);
  std::vector<kernels::QueryBlock> blocks(spans.size());
  std::vector<KvRows> kv_rows;
  const kernels::AttentionShape attn_shape{hp_.n_head, hp_.n_head_kv, hp_.head_dim,
                                           1.0f / std::sqrt(static_cast<float>(hp_.head_dim)), hp_.sliding_window,
                                           kv.shape().type == KvType::F16};

  for (int64_t t = 0; t < n; ++t)
    tok_embd_.traits->to_float(tok_embd_.row(batch.tokens[t]), x + t * n_embd, n_embd);
  const Rows rows{pool, n};

  for (int il = 0; il < hp_.n_layer; ++il) {
    const LayerWeights& l = layers_[il];
    // Attention block: x += Wo · attn(rope(Wq·norm(x)), rope(Wk·norm(x)), Wv·norm(x))
    rows.run(n_embd, [&](int64_t t) {
      kernels::rms_norm(x + t * n_embd, l.attn_norm.data(), xn + t * n_embd, n_embd, hp_.rms_eps);
    });
    const kernels::MatmulJob qkv[] = {{&l.wq, q}, {&l.wk, k}, {&l.wv, v}};
    kernels::matmul_group(qkv, 3, xn, n, pool);
    add_bias(q, l.bq, n, q_dim);
    add_bias(k, l.bk, n, kv_dim);
    add_bias(v, l.bv, n, kv_dim);
    rows.run(q_dim + kv_dim, [&](int64_t t) {
      kernels::rope(q + t * q_dim, hp_.n_head, hp_.head_dim, batch.positions[t], hp_.rope);
      kernels::rope(k + t * kv_dim, hp_.n_head_kv, hp_.head_dim, batch.positions[t], hp_.rope);
    });
    for (int64_t t = 0; t < n; ++t)
      kv.store(il, batch.seq_ids[t], batch.positions[t], k + t * kv_dim, v + t * kv_dim);
    for (size_t ib = 0; ib < spans.size(); ++ib) {
      const BlockSpan& sp = spans[ib];
      kernels::QueryBlock& qb = blocks[ib];
      const SeqId seq = batch.seq_ids[sp.first_token];
      qb.q = q + sp.first_token * q_dim;
      qb.out = att + sp.first_token * q_dim;
      qb.n_q = sp.n_q;
      qb.pos0 = batch.positions[sp.first_token];
      const int32_t first = hp_.sliding_window > 0 ? std::max(0, qb.pos0 - hp_.sliding_window + 1) : 0;
      kv_rows.clear();
      kv.rows(il, seq, first, qb.pos0 + sp.n_q, kv_rows);
      qb.runs.clear();
      for (const KvRows& r : kv_rows) qb.runs.push_back({r.k, r.v, r.pos0, r.n});
    }
    kernels::attention(attn_shape, blocks, pool);
    kernels::matmul(l.wo, att, proj, n, pool);
    rows.run(n_embd, [&](int64_t t) { add_to(x + t * n_embd, proj + t * n_embd, n_embd); });

    // Feed-forward block: x += W_down · (silu(W_gate·norm(x)) * W_up·norm(x))
    rows.run(n_embd, [&](int64_t t) {
      kernels::rms_norm(x + t * n_embd, l.ffn_norm.data(), xn + t * n_embd, n_embd, hp_.rms_eps);
    });
    const kernels::MatmulJob gate_up[] = {{&l.w_gate, gate}, {&l.w_up, up}};
    kernels::matmul_group(gate_up, 2, xn, n, pool);
    rows.run(n_ff, [&](int64_t t) { kernels::swiglu(gate + t * n_ff, up + t * n_ff, n_ff); });
    kernels::matmul(l.w_down, gate, proj, n, pool);
    rows.run(n_embd, [&](int64_t t) { add_to(x + t * n_embd, proj + t * n_embd, n_embd); });
  }

  // Output head only for the tokens that asked for logits.
  std::vector<float> out_rows;  // [n_out][n_embd]
  for (int64_t t = 0; t < n; ++t) {
    if (!batch.logits[t]) continue;
    out_rows.resize(out_rows.size() + n_embd);
    kernels::rms_norm(x + t * n_embd, output_norm_.data(), out_rows.data() + out_rows.size() - n_embd, n_embd,
                      hp_.rms_eps);
  }
  const int64_t n_out = static_cast<int64_t>(out_rows.size()) / n_embd;
  logits.resize(n_out * hp_.n_vocab);
  if (n_out > 0) kernels::matmul(output_, out_rows.data(), logits.data(), n_out, pool);

  for (const auto& [seq, end] : next_pos) kv.set_n_positions(SeqId(seq), end);
  scratch.trim();
  return Status::ok();
}

}  // namespace tern
