#include "model/batch_runner.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <unordered_map>

#include "core/assert.h"

namespace tern {

BatchRunner::BatchRunner(const Model& model, int n_seqs, int32_t max_positions)
    : model_(model), n_seqs_(n_seqs), max_positions_(max_positions) {}

Result<std::unique_ptr<BatchRunner>> BatchRunner::create(const Model& model, int n_seqs, int32_t max_positions,
                                                         KvType type, int block_size) {
  if (n_seqs < 1 || max_positions < 1 || block_size < 0)
    return error(ErrorKind::InvalidArgument, "batch runner: sequences and positions must be >= 1");
  if (block_size == 0) block_size = max_positions;
  std::unique_ptr<BatchRunner> r(new BatchRunner(model, n_seqs, max_positions));
  const int64_t blocks_per_seq = (static_cast<int64_t>(max_positions) + block_size - 1) / block_size;
  r->n_pos_.assign(static_cast<size_t>(n_seqs), 0);
  r->checkpoints_.resize(static_cast<size_t>(n_seqs));
  for (const KvCacheSpec& spec : model.kv_specs(type)) {
    if (spec.kind == CacheKind::Recurrent) {
      auto states = StatePool::create(spec, n_seqs);
      TERN_RETURN_IF_ERROR(states.status());
      r->cache_of_.push_back(-1);
      r->pools_.push_back(states.value()->view());
      r->states_.push_back(std::move(states).value());
      continue;
    }
    const KvShape shape{spec.n_layer, spec.n_kv_head, spec.head_dim, type};
    auto cache = PagedKvCache::create(shape, static_cast<int>(blocks_per_seq * n_seqs), block_size,
                                      /*prefix_caching=*/false);
    TERN_RETURN_IF_ERROR(cache.status());
    r->cache_of_.push_back(static_cast<int>(r->caches_.size()));
    r->pools_.push_back(cache.value()->view());
    r->caches_.push_back(std::move(cache).value());
  }
  r->input_.kv.resize(r->pools_.size());
  r->input_.n_ctx_seq = max_positions;  // the context in force for parameters that depend on it
  return r;
}

int32_t BatchRunner::n_positions(SeqId seq) const { return n_pos_[static_cast<size_t>(seq.value)]; }

void BatchRunner::truncate(SeqId seq, int32_t n) {
  int32_t& held = n_pos_[static_cast<size_t>(seq.value)];
  for (auto& c : caches_) c->truncate(seq, n);
  if (!states_.empty() && n > 0 && n < held) {
    const Checkpoint& cp = checkpoints_[static_cast<size_t>(seq.value)];
    TERN_ASSERT_MSG(cp.n_positions == n, "a recurrent state goes back only to 0 or to its checkpoint");
    size_t at = 0;
    for (const auto& st : states_) {
      std::memcpy(st->view().base + static_cast<size_t>(seq.value) * st->slot_bytes(), cp.states.data() + at,
                  st->slot_bytes());
      at += st->slot_bytes();
    }
  }
  held = std::min(held, n);
}

void BatchRunner::checkpoint(SeqId seq) {
  if (states_.empty()) return;
  Checkpoint& cp = checkpoints_[static_cast<size_t>(seq.value)];
  cp.n_positions = n_pos_[static_cast<size_t>(seq.value)];
  cp.states.clear();
  for (const auto& st : states_) {
    const std::byte* slot = st->view().base + static_cast<size_t>(seq.value) * st->slot_bytes();
    cp.states.insert(cp.states.end(), slot, slot + st->slot_bytes());
  }
}

int64_t BatchRunner::kv_bytes(const Model& model, int n_seqs, int32_t max_positions, KvType type) {
  int64_t bytes = 0;
  for (const KvCacheSpec& s : model.kv_specs(type))
    bytes += s.kind == CacheKind::Recurrent ? static_cast<int64_t>(s.row_bytes()) * s.n_layer * n_seqs
                                            : static_cast<int64_t>(s.row_bytes()) * 2 * s.n_layer * max_positions * n_seqs;
  return bytes;
}

Status BatchRunner::forward(const Batch& b, std::vector<float>& logits) {
  const size_t n = b.tokens.size();
  if (b.positions.size() != n || b.seq_ids.size() != n || b.logits.size() != n)
    return error(ErrorKind::InvalidArgument, "batch vectors have different lengths");
  // Sequence id -> (index in this pass, position after its last token).
  std::unordered_map<int32_t, std::pair<int32_t, int32_t>> seqs;
  std::vector<int32_t> order;  // sequence ids by index
  const int n_vocab = model_.hparams().n_vocab;
  for (size_t i = 0; i < n; ++i) {
    if (b.tokens[i] < 0 || b.tokens[i] >= n_vocab)
      return error(ErrorKind::InvalidArgument, "token id " + std::to_string(b.tokens[i]) +
                                                   " is outside the vocabulary of " + std::to_string(n_vocab));
    const SeqId s = b.seq_ids[i];
    if (s.value < 0) return error(ErrorKind::InvalidArgument, "negative sequence id");
    if (s.value >= n_seqs_)
      return error(ErrorKind::OutOfRange, "sequence id " + std::to_string(s.value) + " is outside the runner's " +
                                              std::to_string(n_seqs_) + " sequences");
    auto [it, inserted] = seqs.try_emplace(s.value, static_cast<int32_t>(order.size()), n_positions(s));
    if (inserted) order.push_back(s.value);
    if (b.positions[i] != it->second.second)
      return error(ErrorKind::InvalidArgument, "sequence " + std::to_string(s.value) + ": token at position " +
                                                   std::to_string(b.positions[i]) + " but the cache expects position " +
                                                   std::to_string(it->second.second));
    if (++it->second.second > max_positions_)
      return error(ErrorKind::OutOfRange, "context of " + std::to_string(it->second.second) +
                                              " tokens exceeds the KV cache size of " + std::to_string(max_positions_) +
                                              " (raise the context size)");
  }
  // Room for every position the batch writes (no sharing here: no copy-on-write happens).
  for (const auto& [seq, idx_end] : seqs)
    for (auto& c : caches_) TERN_RETURN_IF_ERROR(c->reserve(SeqId(seq), idx_end.second));

  ForwardInput& in = input_;
  in.clear();
  in.n_seqs = static_cast<int32_t>(order.size());
  for (size_t i = 0; i < n; ++i) {
    in.tokens.push_back(b.tokens[i]);
    in.positions.push_back(b.positions[i]);
    in.seq.push_back(seqs.at(b.seq_ids[i].value).first);
    if (b.logits[i]) in.logits_rows.push_back(static_cast<int32_t>(i));
  }
  for (size_t g = 0; g < pools_.size(); ++g) {
    ForwardInput::KvGroup& kg = in.kv[g];
    kg.table_begin.push_back(0);
    if (cache_of_[g] < 0) {  // recurrent: sequence id = state slot
      for (int32_t id : order) {
        kg.table_data.push_back(id);
        kg.table_begin.push_back(static_cast<int32_t>(kg.table_data.size()));
      }
      for (size_t i = 0; i < n; ++i) kg.slots.push_back(b.seq_ids[i].value);
      continue;
    }
    const PagedKvCache& cache = *caches_[static_cast<size_t>(cache_of_[g])];
    const int bs = cache.block_size();
    for (int32_t id : order) {
      for (BlockId blk : cache.blocks().block_table(SeqId(id))) kg.table_data.push_back(blk.value);
      kg.table_begin.push_back(static_cast<int32_t>(kg.table_data.size()));
    }
    for (size_t i = 0; i < n; ++i) {
      const auto table = in.kv[g].table(in.seq[i]);
      const int32_t pos = b.positions[i];
      kg.slots.push_back(static_cast<int64_t>(table[static_cast<size_t>(pos / bs)]) * bs + pos % bs);
    }
  }
  TERN_RETURN_IF_ERROR(model_.forward(in, pools_, logits));
  for (const auto& [seq, idx_end] : seqs) {
    for (auto& c : caches_) c->set_n_positions(SeqId(seq), idx_end.second);
    n_pos_[static_cast<size_t>(seq)] = idx_end.second;
  }
  return Status::ok();
}

}  // namespace tern
