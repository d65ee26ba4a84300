// model/batch_runner.h — a model driven directly, without the serving engine:
// Batch-es of (token, position, sequence, wants logits) over a KV pool of its
// own in which each of n_seqs sequences holds up to max_positions positions.
// For tools and tests that feed tokens themselves (perplexity, bench, golden
// and invariance tests). It builds the ForwardInput the engine's model runner
// would build for the same tokens, so results are the same bits.
//
// A model with recurrent (state-space) layers keeps one state per sequence
// (sequence s in slot s of a state pool): it can be truncated only to 0.
//
// Errors: a token that does not continue its sequence's cache, a bad token id
// or a negative sequence id -> InvalidArgument; a sequence id >= n_seqs or
// positions past max_positions -> OutOfRange. Nothing changes on an error.
#pragma once

#include <memory>
#include <vector>

#include "kv/paged_kv_cache.h"
#include "kv/state_pool.h"
#include "model/model.h"

namespace tern {

class BatchRunner {
 public:
  // block_size 0: one block per sequence (its positions contiguous, as the
  // fastest layout for a single long sequence).
  static Result<std::unique_ptr<BatchRunner>> create(const Model& model, int n_seqs, int32_t max_positions,
                                                     KvType type = KvType::F32, int block_size = 0);
  // KV bytes such a runner maps (keys and values of every layer and position;
  // recurrent layers' states, one per sequence).
  static int64_t kv_bytes(const Model& model, int n_seqs, int32_t max_positions, KvType type = KvType::F32);
  // logits: [rows with Batch::logits set][n_vocab], in batch order.
  Status forward(const Batch& batch, std::vector<float>& logits);
  int32_t n_positions(SeqId seq) const;
  // Forgets positions >= n of seq (0: the whole sequence). With recurrent
  // layers a state cannot go back: n must be 0, n_positions(seq), or the
  // position of seq's last checkpoint().
  void truncate(SeqId seq, int32_t n);
  // Recurrent layers: remembers seq's states at its current position (a copy
  // of its slots), for truncate() to return to. Nothing to do without them.
  void checkpoint(SeqId seq);

 private:
  BatchRunner(const Model& model, int n_seqs, int32_t max_positions);

  const Model& model_;
  int n_seqs_;
  int32_t max_positions_;
  std::vector<std::unique_ptr<PagedKvCache>> caches_;  // one per attention group
  std::vector<std::unique_ptr<StatePool>> states_;     // one per recurrent group
  std::vector<int> cache_of_;                          // [group] index into caches_, or -1: recurrent
  std::vector<KvPoolView> pools_;                      // [group]
  std::vector<int32_t> n_pos_;                         // [n_seqs] positions each sequence holds
  struct Checkpoint {
    int32_t n_positions = -1;
    std::vector<std::byte> states;  // the sequence's slot of every state pool, one after another
  };
  std::vector<Checkpoint> checkpoints_;  // [n_seqs]
  ForwardInput input_;
};

}  // namespace tern
