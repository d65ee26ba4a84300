// model/model.h — a Llama-family decoder-only Transformer over GGUF weights.
//
// Owns the parsed GGUF file; weight matrices are used in place from its
// memory mapping (only norm vectors and biases are decoded to f32 at load),
// except those whose kernel has a packed form (kernels/pack.h): they are
// re-ordered once into packed panels and their file pages released, so the
// resident size stays that of the file (TERN_PACK=0 turns this off).
// forward() is the whole network for one ragged batch: any mix of sequences,
// each token with its own position. It writes keys/values into the KvCache
// and returns logits for the tokens that ask for them.
// A Model is immutable after load; forward() may run on one thread at a time
// per KvCache (it parallelises internally with the given ThreadPool).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/ids.h"
#include "core/status.h"
#include "core/thread_pool.h"
#include "gguf/reader.h"
#include "kernels/ref/ops.h"
#include "kv/kv_cache.h"
#include "model/hparams.h"

namespace tern {

// One forward step's input. All vectors have the same length n_tokens.
// Tokens of one sequence must appear in position order and continue exactly
// where that sequence's cache ends (position == kv.n_positions(seq) for the
// first, then +1 each).
struct Batch {
  std::vector<TokenId> tokens;    // [n_tokens]
  std::vector<int32_t> positions; // [n_tokens]
  std::vector<SeqId> seq_ids;     // [n_tokens]
  std::vector<uint8_t> logits;    // [n_tokens] 1 = return logits for this token

  void add(TokenId token, int32_t pos, SeqId seq, bool want_logits) {
    tokens.push_back(token);
    positions.push_back(pos);
    seq_ids.push_back(seq);
    logits.push_back(want_logits ? 1 : 0);
  }
  size_t size() const { return tokens.size(); }
  void clear() { tokens.clear(); positions.clear(); seq_ids.clear(); logits.clear(); }
};

struct LayerWeights {
  std::vector<float> attn_norm;        // [n_embd]
  kernels::WeightView wq, wk, wv, wo;  // [q_dim][n_embd], [kv_dim][n_embd] x2, [n_embd][q_dim]
  std::vector<float> bq, bk, bv;       // [q_dim], [kv_dim], [kv_dim] or empty
  std::vector<float> ffn_norm;         // [n_embd]
  kernels::WeightView w_gate, w_up;    // [n_ff][n_embd]
  kernels::WeightView w_down;          // [n_embd][n_ff]
};

class Model {
 public:
  static Result<std::unique_ptr<Model>> load(const std::string& path);
  // pack: re-order matrices into their kernels' packed panels (see above);
  // the default is TERN_PACK (on unless "0"). Results are identical either way.
  static Result<std::unique_ptr<Model>> from_gguf(gguf::GgufFile file, bool pack = packing_default());
  static bool packing_default();

  const HParams& hparams() const { return hp_; }
  const gguf::GgufFile& file() const { return file_; }
  KvShape kv_shape(KvType type = KvType::F32) const { return {hp_.n_layer, hp_.n_head_kv, hp_.head_dim, type}; }
  // Bytes of weights read per generated token (all matrices once): for roofline figures.
  uint64_t weight_bytes() const { return weight_bytes_; }
  // Bytes of matrices held in packed form (0 when nothing was packed).
  uint64_t packed_bytes() const { return packed_bytes_; }

  // logits: resized to [n_out][n_vocab], one row per token with logits[i] = 1, in batch order.
  Status forward(const Batch& batch, KvCache& kv, std::vector<float>& logits, ThreadPool& pool) const;

 private:
  Status bind_weights();
  void pack_weights();

  gguf::GgufFile file_;
  HParams hp_;
  kernels::WeightView tok_embd_;   // [n_vocab][n_embd]
  kernels::WeightView output_;     // [n_vocab][n_embd] (tok_embd_ when tied)
  std::vector<float> output_norm_; // [n_embd]
  std::vector<LayerWeights> layers_;
  uint64_t weight_bytes_ = 0;
  struct FreeDeleter {
    void operator()(void* p) const;
  };
  std::vector<std::unique_ptr<uint8_t, FreeDeleter>> packed_;  // owners of WeightView::packed
  uint64_t packed_bytes_ = 0;
};

}  // namespace tern
