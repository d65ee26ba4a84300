// The forward pass, top to bottom as in llama2.c, over a ragged batch:
// embedding, the architecture's block for every layer (model/arch.h, a
// composition of model/layers.h), the output head. Every operation goes
// through the backend; this file only decides what runs.
#include <algorithm>
#include <string>

#include "model/arch.h"
#include "model/model.h"

namespace tern {

using backend::Slot;

std::vector<KvCacheSpec> Model::kv_specs(KvType type) const {
  std::vector<KvCacheSpec> specs = kv_groups_;
  for (KvCacheSpec& s : specs) s.type = type;
  return specs;
}

// Layers whose keys/values have the same shape and lifetime (K/V heads,
// window) share a KV group, so a pool holds one kind of row and the KV manager
// frees one kind of block per group; a uniform model has one group.
void Model::assign_kv_groups() {
  kv_groups_.clear();
  for (int il = 0; il < hp_.n_layer; ++il) {
    const LayerHParams& lh = hp_.layers[static_cast<size_t>(il)];
    LayerWeights& l = layers_[static_cast<size_t>(il)];
    if (!lh.recurrent && !lh.has_kv()) {  // an FFN-only layer (hybrid stacks) keeps nothing
      l.kv_group = -1;
      continue;
    }
    KvCacheSpec s;
    if (lh.recurrent) {  // state-space layers: one state per sequence, all in one group
      s.kind = CacheKind::Recurrent;
      s.state_floats = hp_.ssm.state_floats();
    } else {
      s.kind = lh.sliding_window > 0 ? CacheKind::SlidingWindow : CacheKind::FullAttention;
      s.window = lh.sliding_window;
      s.n_kv_head = lh.n_head_kv;
      s.head_dim = hp_.head_dim;
    }
    auto same = [&](const KvCacheSpec& g) {
      return g.kind == s.kind && g.window == s.window && g.n_kv_head == s.n_kv_head && g.head_dim == s.head_dim &&
             g.state_floats == s.state_floats;
    };
    auto it = std::find_if(kv_groups_.begin(), kv_groups_.end(), same);
    if (it == kv_groups_.end()) it = kv_groups_.insert(kv_groups_.end(), s);
    l.kv_group = static_cast<int>(it - kv_groups_.begin());
    l.kv_index = it->n_layer++;
  }
}

namespace {

// Token trees (forward_input.h): every parent an earlier token of the same
// sequence one position before it, ordinary tokens never after a tree token
// of their sequence, and no two tokens of a sequence stored in one place.
Status validate_tree(const ForwardInput& in) {
  const size_t n = in.n_tokens();
  if (in.kv_pos.size() != 0 && in.kv_pos.size() != n)
    return error(ErrorKind::InvalidArgument, "forward input: kv_pos must be empty or one per token");
  if (in.parent.empty()) {
    if (in.kv_pos.empty()) return Status::ok();
    return error(ErrorKind::InvalidArgument, "forward input: kv_pos without a token tree");
  }
  if (in.parent.size() != n)
    return error(ErrorKind::InvalidArgument, "forward input: parent must be empty or one per token");
  std::vector<uint8_t> in_tree(static_cast<size_t>(in.n_seqs), 0);
  for (size_t t = 0; t < n; ++t) {
    const int32_t p = in.parent[t];
    uint8_t& tree = in_tree[static_cast<size_t>(in.seq[t])];
    if (p < 0) {
      if (tree) return error(ErrorKind::InvalidArgument, "forward input: an ordinary token after a tree token");
      if (in.kv_index(t) != in.positions[t])
        return error(ErrorKind::InvalidArgument, "forward input: an ordinary token stored away from its position");
      continue;
    }
    if (static_cast<size_t>(p) >= t || in.seq[static_cast<size_t>(p)] != in.seq[t] ||
        in.positions[static_cast<size_t>(p)] + 1 != in.positions[t])
      return error(ErrorKind::InvalidArgument, "forward input: token " + std::to_string(t) +
                                                   "'s parent is not an earlier token of its sequence one position before it");
    tree = 1;
  }
  // Storage places: a sequence's tokens are consecutive in the batch.
  for (size_t a = 0, b = 0; a < n; a = b) {
    while (b < n && in.seq[b] == in.seq[a]) ++b;
    std::vector<int32_t> at;
    for (size_t t = a; t < b; ++t) at.push_back(in.kv_index(t));
    std::sort(at.begin(), at.end());
    if (std::adjacent_find(at.begin(), at.end()) != at.end())
      return error(ErrorKind::InvalidArgument, "forward input: two tokens of a sequence stored in one place");
  }
  return Status::ok();
}

}  // namespace

// Recurrent layers carry one state per sequence from pass to pass: each
// sequence's tokens are one run of consecutive positions, no two sequences
// share a state slot, and there are no token trees (a state cannot branch).
Status Model::validate_recurrent(const ForwardInput& in) const {
  if (!hp_.has_ssm()) {
    if (!in.snapshots.empty()) return error(ErrorKind::InvalidArgument, "forward input: state snapshots without recurrent layers");
    return Status::ok();
  }
  for (size_t g = 0; g < kv_groups_.size(); ++g) {
    if (kv_groups_[g].kind != CacheKind::Recurrent) continue;
    if (!in.parent.empty())
      return error(ErrorKind::InvalidArgument, "forward input: token trees with recurrent (state-space) layers");
    std::vector<int32_t> used;
    for (int32_t s = 0; s < in.n_seqs; ++s)
      if (!in.kv[g].table(s).empty()) used.push_back(in.kv[g].table(s)[0]);
    std::sort(used.begin(), used.end());
    if (std::adjacent_find(used.begin(), used.end()) != used.end())
      return error(ErrorKind::InvalidArgument, "forward input: two sequences share a state slot");
  }
  // Snapshots go to slots no sequence of the pass runs in, once each, from a position the pass computes.
  std::vector<int32_t> snap_slots;
  for (const ForwardInput::StateSnapshot& sn : in.snapshots) {
    bool computed = false;
    for (size_t t = 0; t < in.n_tokens() && !computed; ++t)
      computed = in.seq[t] == sn.seq && in.positions[t] == sn.position - 1;
    if (!computed) return error(ErrorKind::InvalidArgument, "forward input: a state snapshot after a token not in the pass");
    for (size_t g = 0; g < kv_groups_.size(); ++g) {
      if (kv_groups_[g].kind != CacheKind::Recurrent) continue;
      for (int32_t s = 0; s < in.n_seqs; ++s)
        if (!in.kv[g].table(s).empty() && in.kv[g].table(s)[0] == sn.slot)
          return error(ErrorKind::InvalidArgument, "forward input: a state snapshot into a running sequence's slot");
    }
    snap_slots.push_back(sn.slot);
  }
  std::sort(snap_slots.begin(), snap_slots.end());
  if (std::adjacent_find(snap_slots.begin(), snap_slots.end()) != snap_slots.end())
    return error(ErrorKind::InvalidArgument, "forward input: two state snapshots into one slot");
  std::vector<uint8_t> seen(static_cast<size_t>(in.n_seqs), 0);
  for (size_t t = 0; t < in.n_tokens(); ++t) {
    const bool continues = t > 0 && in.seq[t] == in.seq[t - 1];
    if (continues && in.positions[t] != in.positions[t - 1] + 1)
      return error(ErrorKind::InvalidArgument, "forward input: a sequence's positions are not consecutive");
    uint8_t& s = seen[static_cast<size_t>(in.seq[t])];
    if (!continues && s) return error(ErrorKind::InvalidArgument, "forward input: a sequence's tokens are not consecutive");
    s = 1;
  }
  return Status::ok();
}

// Everything forward() trusts about its input, checked once per pass: ids in
// range, every slot inside its pool and equal to what the sequence's block
// table says for that position, so no write or read can leave a pool.
Status Model::validate(const ForwardInput& in, std::span<const KvPoolView> pools) const {
  const size_t n = in.n_tokens();
  if (in.positions.size() != n || in.seq.size() != n)
    return error(ErrorKind::InvalidArgument, "forward input: token, position and sequence arrays differ in length");
  if (in.n_ctx_seq < 0) return error(ErrorKind::InvalidArgument, "forward input: negative context length");
  const std::vector<KvCacheSpec>& specs = kv_groups_;
  if (in.kv.size() != specs.size() || pools.size() != specs.size())
    return error(ErrorKind::InvalidArgument, "forward input: " + std::to_string(in.kv.size()) + " KV groups and " +
                                                 std::to_string(pools.size()) + " pools for a model with " +
                                                 std::to_string(specs.size()));
  for (size_t g = 0; g < specs.size(); ++g) {
    const KvPoolView& p = pools[g];
    if (p.n_layer != specs[g].n_layer || p.n_kv_head != specs[g].n_kv_head || p.head_dim != specs[g].head_dim ||
        p.block_size <= 0)
      return error(ErrorKind::InvalidArgument, "KV pool shape does not match the model (layers, KV heads, head size)");
    if (specs[g].kind == CacheKind::Recurrent && (p.row_bytes != specs[g].row_bytes() || p.block_size != 1))
      return error(ErrorKind::InvalidArgument, "state pool shape does not match the model's recurrent layers");
    if (specs[g].kind == CacheKind::Recurrent)
      for (const ForwardInput::StateSnapshot& sn : in.snapshots)
        if (sn.slot < 0 || sn.slot >= p.n_blocks)
          return error(ErrorKind::OutOfRange, "forward input: state snapshot slot outside the pool");
    const ForwardInput::KvGroup& kg = in.kv[g];
    if (kg.slots.size() != n || kg.table_begin.size() != static_cast<size_t>(in.n_seqs) + 1 ||
        kg.table_begin.front() != 0 || kg.table_begin.back() != static_cast<int32_t>(kg.table_data.size()))
      return error(ErrorKind::InvalidArgument, "forward input: malformed slots or block tables");
    for (int32_t b : kg.table_data)
      if (b < -1 || b >= p.n_blocks) return error(ErrorKind::OutOfRange, "forward input: block id outside the pool");
  }
  for (size_t t = 0; t < n; ++t) {
    if (in.tokens[t] < 0 || in.tokens[t] >= hp_.n_vocab)
      return error(ErrorKind::InvalidArgument, "token id " + std::to_string(in.tokens[t]) +
                                                   " is outside the vocabulary of " + std::to_string(hp_.n_vocab));
    if (in.seq[t] < 0 || in.seq[t] >= in.n_seqs || in.positions[t] < 0)
      return error(ErrorKind::InvalidArgument, "forward input: bad sequence index or position");
    for (size_t g = 0; g < specs.size(); ++g) {
      const auto table = in.kv[g].table(in.seq[t]);
      if (specs[g].kind == CacheKind::Recurrent) {  // the table is the sequence's state slot
        if (table.size() != 1 || table[0] < 0 || in.kv[g].slots[t] != table[0])
          return error(ErrorKind::InvalidArgument, "forward input: token " + std::to_string(t) +
                                                       "'s state slot is not its sequence's one slot");
        continue;
      }
      const int32_t bs = pools[g].block_size;
      const int32_t at = in.kv_index(t);
      const size_t i_block = static_cast<size_t>(at / bs);
      if (at < 0 || i_block >= table.size() || table[i_block] < 0 ||
          in.kv[g].slots[t] != static_cast<int64_t>(table[i_block]) * bs + at % bs)
        return error(ErrorKind::InvalidArgument, "forward input: token " + std::to_string(t) +
                                                     "'s KV slot is not its block table's");
    }
  }
  TERN_RETURN_IF_ERROR(validate_tree(in));
  TERN_RETURN_IF_ERROR(validate_recurrent(in));
  if (!in.windows.empty() && in.windows.size() != static_cast<size_t>(in.n_seqs))
    return error(ErrorKind::InvalidArgument, "forward input: windows for " + std::to_string(in.windows.size()) +
                                                 " sequences in a pass of " + std::to_string(in.n_seqs));
  for (const SeqWindow& w : in.windows)
    if (w.n_sink < 0 || w.window < 0 || w.kv_lo < 0 || (w.evicting() && w.n_sink > 0))
      return error(ErrorKind::InvalidArgument, "forward input: negative sink count, window or cut, or eviction with sinks");
  if (!in.kv_mass.empty() && in.kv_mass.size() != static_cast<size_t>(in.n_seqs))
    return error(ErrorKind::InvalidArgument, "forward input: attention mass for " + std::to_string(in.kv_mass.size()) +
                                                 " sequences in a pass of " + std::to_string(in.n_seqs));
  for (int32_t r : in.logits_rows)
    if (r < 0 || static_cast<size_t>(r) >= n) return error(ErrorKind::InvalidArgument, "forward input: bad logits row");
  for (int32_t r : in.hidden_rows)
    if (r < 0 || static_cast<size_t>(r) >= n) return error(ErrorKind::InvalidArgument, "forward input: bad hidden row");
  return Status::ok();
}

// Llama 3.1's rope_freqs apply at every context. LongRoPE takes its long set
// when the context one sequence may reach exceeds the original context, its
// short set otherwise, as llama.cpp's get_rope_factors does with n_ctx_seq.
const float* Model::rope_factors(int32_t n_ctx_seq) const {
  if (rope_freqs_.dev) return rope_freqs_.dev;
  const int32_t n_ctx = n_ctx_seq > 0 ? n_ctx_seq : hp_.n_ctx_train;
  return n_ctx > hp_.rope_orig_ctx ? rope_long_.dev : rope_short_.dev;
}

namespace {

// Consecutive tokens of one sequence form one attention query block (up to
// kMaxBlockTokens), so a prefill chunk is processed as tiles and decode tokens
// of different sequences as separate blocks.
constexpr int kMaxBlockTokens = 64;

void query_spans(const ForwardInput& in, std::vector<backend::QuerySpan>& out) {
  out.clear();
  for (int64_t t = 0; t < static_cast<int64_t>(in.n_tokens()); ++t) {
    if (!out.empty()) {
      backend::QuerySpan& last = out.back();
      const int64_t prev = last.first_token + last.n_q - 1;
      // In a token tree a block is a chain: each token the next one's parent.
      const bool chained = in.parent.empty() || in.parent[static_cast<size_t>(t)] == prev ||
                           (in.parent[static_cast<size_t>(t)] < 0 && in.parent[static_cast<size_t>(prev)] < 0);
      if (prev == t - 1 && in.seq[prev] == in.seq[t] && in.positions[prev] + 1 == in.positions[t] && chained &&
          last.n_q < kMaxBlockTokens) {
        ++last.n_q;
        continue;
      }
    }
    out.push_back({t, 1, in.positions[t], in.seq[t]});
  }
}

}  // namespace

Status Model::forward(const ForwardInput& in, std::span<const KvPoolView> pools, std::vector<float>& logits,
                      std::vector<float>* hidden) const {
  TERN_RETURN_IF_ERROR(validate(in, pools));
  backend::Backend& be = *backend_;
  const int64_t n = static_cast<int64_t>(in.n_tokens());
  const int64_t n_embd = hp_.n_embd, q_dim = hp_.q_dim(), kv_dim = hp_.kv_dim(), n_ff = hp_.max_ff();
  // Activations in the backend's scratch, reused by the next pass. Every
  // element used is written before it is read. Shapes: layers.h (Activations);
  // kv_dim is the largest layer's.
  Activations act;
  act.x = be.scratch(Slot::X, n * n_embd);
  act.xn = be.scratch(Slot::Xn, n * n_embd);
  act.q = be.scratch(Slot::Q, n * q_dim);
  act.k = be.scratch(Slot::K, n * kv_dim);
  act.v = be.scratch(Slot::V, n * kv_dim);
  act.att = be.scratch(Slot::Att, n * q_dim);
  act.proj = be.scratch(Slot::Proj, n * n_embd);
  act.gate = be.scratch(Slot::Gate, n * n_ff);
  act.up = be.scratch(Slot::Up, n * n_ff);
  if (hp_.is_moe()) {
    act.router = be.scratch(Slot::Router, n * hp_.n_expert);
    act.shared_gate = be.scratch(Slot::SharedGate, n);
    act.moe_x = be.scratch(Slot::MoeX, n * hp_.n_expert_used * n_embd);
    act.moe_y = be.scratch(Slot::MoeY, n * hp_.n_expert_used * n_embd);
  }
  std::vector<TokenRun> runs;  // state-space layers: each sequence's run
  if (hp_.has_ssm()) {
    const SsmHParams& s = hp_.ssm;
    act.ssm_xz = be.scratch(Slot::SsmXz, n * s.in_rows());
    act.ssm_conv = be.scratch(Slot::SsmConv, n * s.conv_channels());
    if (!s.mamba2()) {  // Mamba-2's dt, B and C come from ssm_xz and ssm_conv
      act.ssm_dt_in = be.scratch(Slot::SsmDtIn, n * s.dt_rank);
      act.ssm_bc = be.scratch(Slot::SsmBc, n * 2 * s.d_state);
      act.ssm_dt = be.scratch(Slot::SsmDt, n * s.d_inner);
    }
    act.ssm_y = be.scratch(Slot::SsmY, n * s.d_inner);
    for (int64_t t = 0; t < n; ++t) {
      if (t > 0 && in.seq[static_cast<size_t>(t)] == in.seq[static_cast<size_t>(t - 1)]) {
        ++runs.back().n_tokens;
        continue;
      }
      runs.push_back({t, 1, in.seq[static_cast<size_t>(t)]});
    }
  }

  std::vector<backend::QuerySpan> spans;
  query_spans(in, spans);
  // [group][n_seqs] block tables as spans.
  std::vector<std::vector<std::span<const int32_t>>> tables(in.kv.size());
  for (size_t g = 0; g < in.kv.size(); ++g)
    for (int32_t s = 0; s < in.n_seqs; ++s) tables[g].push_back(in.kv[g].table(s));
  kernels::RopeParams rope = hp_.rope;
  rope.freq_factors = rope_factors(in.n_ctx_seq);
  Pass pass{be, hp_, in, n, pools, tables, spans, act, rope, expert_tokens_, {}, {}, {}};
  std::vector<int32_t> sink_positions, all_rows;  // [n] each
  if (!in.windows.empty()) {
    for (size_t t = 0; t < in.n_tokens(); ++t) {
      sink_positions.push_back(in.windows[static_cast<size_t>(in.seq[t])].sink_position(in.positions[t]));
      all_rows.push_back(static_cast<int32_t>(t));
    }
    pass.sink_positions = sink_positions;
    pass.all_rows = all_rows;
  }
  pass.runs = runs;

  be.embed(tok_embd_, in.tokens, act.x);
  if (hp_.embd_scale != 1.0f) be.scale(act.x, n, n_embd, hp_.embd_scale);  // Gemma: sqrt(n_embd)
  for (int il = 0; il < hp_.n_layer; ++il)
    arch_->block(pass, layers_[static_cast<size_t>(il)], hp_.layers[static_cast<size_t>(il)]);

  // Output head only for the rows asked for.
  const int64_t n_out = static_cast<int64_t>(in.logits_rows.size());
  logits.resize(static_cast<size_t>(n_out * hp_.n_vocab));
  if (n_out > 0) {
    float* rows = be.scratch(Slot::OutRows, n_out * n_embd);  // [n_out][n_embd]
    float* out = be.scratch(Slot::Logits, n_out * hp_.n_vocab);
    be.gather_rows(act.x, in.logits_rows, rows, n_embd);
    layers::rms_norm(pass, rows, output_norm_, rows, n_out);
    be.matmul(output_, rows, out, n_out);
    if (hp_.final_softcap > 0.0f) be.softcap(out, n_out, hp_.n_vocab, hp_.final_softcap);
    be.to_host(out, logits.data(), n_out * hp_.n_vocab);
  }
  // Final hidden states (embeddings) for the rows asked for: the same normed rows the head reads.
  const int64_t n_hidden = static_cast<int64_t>(in.hidden_rows.size());
  if (hidden) hidden->resize(static_cast<size_t>(n_hidden * n_embd));
  if (hidden && n_hidden > 0) {
    float* rows = be.scratch(Slot::OutRows, n_hidden * n_embd);
    be.gather_rows(act.x, in.hidden_rows, rows, n_embd);
    layers::rms_norm(pass, rows, output_norm_, rows, n_hidden);
    be.to_host(rows, hidden->data(), n_hidden * n_embd);
  }
  be.trim();
  return Status::ok();
}

}  // namespace tern
