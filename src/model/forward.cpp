// The forward pass, top to bottom as in llama2.c, over a ragged batch.
#include <algorithm>
#include <cmath>
#include <string>
#include <unordered_map>

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

}  // namespace

// Causal attention of one token's query heads over its sequence's cached
// keys/values at positions [first, pos], GQA-mapped. q: [n_head][head_dim],
// out: [n_head][head_dim].
void Model::attention(const float* q, float* out, int32_t pos, SeqId seq, int layer, KvCache& kv) const {
  const int hd = hp_.head_dim;
  const int group = hp_.n_head / hp_.n_head_kv;
  const int32_t first = hp_.sliding_window > 0 ? std::max(0, pos - hp_.sliding_window + 1) : 0;
  const int32_t n_ctx = pos - first + 1;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  thread_local std::vector<float> scores;  // [n_ctx]
  scores.resize(n_ctx);
  for (int h = 0; h < hp_.n_head; ++h) {
    const int kvh = h / group;
    const float* qh = q + h * hd;
    for (int32_t p = first; p <= pos; ++p) {
      const float* k = kv.key_row(layer, seq, p) + kvh * hd;
      float dot = 0.0f;
      for (int i = 0; i < hd; ++i) dot += qh[i] * k[i];
      scores[p - first] = dot * scale;
    }
    kernels::softmax(scores.data(), n_ctx);
    float* oh = out + h * hd;
    std::fill(oh, oh + hd, 0.0f);
    for (int32_t p = first; p <= pos; ++p) {
      const float* v = kv.value_row(layer, seq, p) + kvh * hd;
      const float w = scores[p - first];
      for (int i = 0; i < hd; ++i) oh[i] += w * v[i];
    }
  }
}

Status Model::forward(const Batch& batch, KvCache& kv, std::vector<float>& logits, ThreadPool& pool) const {
  std::unordered_map<int32_t, int32_t> next_pos;  // seq id -> position after its last token in this batch
  TERN_RETURN_IF_ERROR(validate_batch(batch, kv, hp_.n_vocab, next_pos));
  for (const auto& [seq, end] : next_pos) TERN_RETURN_IF_ERROR(kv.reserve(SeqId(seq), end));

  const int64_t n = static_cast<int64_t>(batch.size());
  const int64_t n_embd = hp_.n_embd, q_dim = hp_.q_dim(), kv_dim = hp_.kv_dim(), n_ff = hp_.n_ff;
  std::vector<float> x(n * n_embd);      // [n][n_embd] residual stream
  std::vector<float> xn(n * n_embd);     // [n][n_embd] normed input of a sub-layer
  std::vector<float> q(n * q_dim);       // [n][n_head][head_dim]
  std::vector<float> k(n * kv_dim);      // [n][n_head_kv][head_dim]
  std::vector<float> v(n * kv_dim);      // [n][n_head_kv][head_dim]
  std::vector<float> att(n * q_dim);     // [n][n_head][head_dim]
  std::vector<float> proj(n * n_embd);   // [n][n_embd] sub-layer output
  std::vector<float> gate(n * n_ff);     // [n][n_ff]
  std::vector<float> up(n * n_ff);       // [n][n_ff]

  for (int64_t t = 0; t < n; ++t)
    tok_embd_.traits->to_float(tok_embd_.row(batch.tokens[t]), x.data() + t * n_embd, n_embd);

  for (int il = 0; il < hp_.n_layer; ++il) {
    const LayerWeights& l = layers_[il];
    // Attention block: x += Wo · attn(rope(Wq·norm(x)), rope(Wk·norm(x)), Wv·norm(x))
    for (int64_t t = 0; t < n; ++t)
      kernels::rms_norm(x.data() + t * n_embd, l.attn_norm.data(), xn.data() + t * n_embd, n_embd, hp_.rms_eps);
    kernels::matmul(l.wq, xn.data(), q.data(), n, pool);
    kernels::matmul(l.wk, xn.data(), k.data(), n, pool);
    kernels::matmul(l.wv, xn.data(), v.data(), n, pool);
    add_bias(q.data(), l.bq, n, q_dim);
    add_bias(k.data(), l.bk, n, kv_dim);
    add_bias(v.data(), l.bv, n, kv_dim);
    for (int64_t t = 0; t < n; ++t) {
      kernels::rope(q.data() + t * q_dim, hp_.n_head, hp_.head_dim, batch.positions[t], hp_.rope);
      kernels::rope(k.data() + t * kv_dim, hp_.n_head_kv, hp_.head_dim, batch.positions[t], hp_.rope);
      std::copy_n(k.data() + t * kv_dim, kv_dim, kv.key_row(il, batch.seq_ids[t], batch.positions[t]));
      std::copy_n(v.data() + t * kv_dim, kv_dim, kv.value_row(il, batch.seq_ids[t], batch.positions[t]));
    }
    pool.parallel_for(static_cast<size_t>(n), [&](size_t begin, size_t end, int) {
      for (size_t t = begin; t < end; ++t)
        attention(q.data() + t * q_dim, att.data() + t * q_dim, batch.positions[t], batch.seq_ids[t], il, kv);
    });
    kernels::matmul(l.wo, att.data(), proj.data(), n, pool);
    for (int64_t i = 0; i < n * n_embd; ++i) x[i] += proj[i];

    // Feed-forward block: x += W_down · (silu(W_gate·norm(x)) * W_up·norm(x))
    for (int64_t t = 0; t < n; ++t)
      kernels::rms_norm(x.data() + t * n_embd, l.ffn_norm.data(), xn.data() + t * n_embd, n_embd, hp_.rms_eps);
    kernels::matmul(l.w_gate, xn.data(), gate.data(), n, pool);
    kernels::matmul(l.w_up, xn.data(), up.data(), n, pool);
    kernels::swiglu(gate.data(), up.data(), n * n_ff);
    kernels::matmul(l.w_down, gate.data(), proj.data(), n, pool);
    for (int64_t i = 0; i < n * n_embd; ++i) x[i] += proj[i];
  }

  // Output head only for the tokens that asked for logits.
  std::vector<float> out_rows;  // [n_out][n_embd]
  for (int64_t t = 0; t < n; ++t) {
    if (!batch.logits[t]) continue;
    out_rows.resize(out_rows.size() + n_embd);
    kernels::rms_norm(x.data() + t * n_embd, output_norm_.data(), out_rows.data() + out_rows.size() - n_embd, n_embd,
                      hp_.rms_eps);
  }
  const int64_t n_out = static_cast<int64_t>(out_rows.size()) / n_embd;
  logits.resize(n_out * hp_.n_vocab);
  if (n_out > 0) kernels::matmul(output_, out_rows.data(), logits.data(), n_out, pool);

  for (const auto& [seq, end] : next_pos) kv.set_n_positions(SeqId(seq), end);
  return Status::ok();
}

}  // namespace tern
