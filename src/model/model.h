// model/model.h — a Llama-family decoder-only Transformer over GGUF weights.
//
// Owns the parsed GGUF file; weight matrices are used in place from its
// memory mapping (only norm vectors and biases are decoded to f32 at load)
// and handed to the backend's load step (backend/backend.h: the CPU backend
// packs the matrices its kernels read as panels, on its own threads, and
// releases their file pages so the resident size stays that of the file).
// forward() is the whole network for one ragged batch (model/forward_input.h):
// any mix of sequences, each token with its position and KV slot; it writes
// keys/values into the pools and returns logits for the rows asked for. It
// never allocates, reserves or copies KV.
// Which architecture runs comes from the registry (model/arch.h): its row
// says what the loader reads and which block each layer runs. Loading fails
// on a tensor the architecture would not use, rather than computing without it.
// A Model is immutable after load; forward() runs one pass at a time (its
// backend parallelises inside).
#pragma once

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/ids.h"
#include "core/status.h"
#include "backend/backend.h"
#include "gguf/reader.h"
#include "kernels/ref/ops.h"
#include "kv/cache_spec.h"
#include "kv/kv_pool.h"
#include "model/forward_input.h"
#include "model/hparams.h"
#include "model/layers.h"

namespace tern {

struct ArchInfo;

// Tokens fed to a model driven directly (model/batch_runner.h): all vectors
// have the same length n_tokens. Tokens of one sequence must appear in
// position order and continue exactly where that sequence's cache ends.
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

class Model {
 public:
  // backend: prepares the weights and runs forward(); null = a CPU backend on every core.
  static Result<std::unique_ptr<Model>> load(const std::string& path, std::shared_ptr<backend::Backend> backend = nullptr,
                                              const MapOptions& options = {});
  static Result<std::unique_ptr<Model>> from_gguf(gguf::GgufFile file, std::shared_ptr<backend::Backend> backend = nullptr);

  const HParams& hparams() const { return hp_; }
  const gguf::GgufFile& file() const { return file_; }
  backend::Backend& backend() const { return *backend_; }
  // What each KV group keeps (one pool per group; LayerWeights::kv_group says
  // which group a layer's keys/values live in). Layers with the same K/V
  // heads and window share a group; groups are in order of their first layer.
  std::vector<KvCacheSpec> kv_specs(KvType type = KvType::F32) const;
  // Bytes of weights read per generated token (all matrices once): for roofline figures.
  uint64_t weight_bytes() const { return weight_bytes_; }
  // MoE: bytes of the matrices one token reads (attention, router, k of the
  // n_expert experts, shared expert, output); weight_bytes() for dense models.
  uint64_t active_weight_bytes() const { return active_weight_bytes_; }
  // MoE: tokens routed to each expert, summed over layers and over every
  // forward() so far ([n_expert]; empty for dense models). Read it between
  // passes (forward() adds to it).
  std::span<const uint64_t> expert_tokens() const { return expert_tokens_; }
  // Bytes of matrices the backend holds in a prepared (packed) form.
  uint64_t packed_bytes() const { return backend_->prepared_bytes(); }
  // Pins what forward() reads in RAM (--mlock): the packed copies, and every
  // tensor's bytes that were not packed (never the packed sources, which are
  // no longer read). Returns the bytes locked.
  Result<uint64_t> lock_memory() const;
  // Bytes of the file's tensors read in place (not packed): with packed_bytes(),
  // the weights' share of resident memory once every page has been read.
  uint64_t in_place_bytes() const;
  // Per layer, the norm weight (as the backend holds it) applied first to the
  // residual stream entering the layer: attn_norm, or ffn_norm in an FFN-only
  // layer. A backend watching rms_norm knows from it which layer's input it
  // sees (engine/calibrate.cpp measures each layer's block influence so).
  std::vector<const float*> block_input_norms() const;

  // logits: resized to [n_out][n_vocab], one row per in.logits_rows entry.
  // hidden (when given): resized to [n_hidden][n_embd], the final hidden state
  // (after the output norm) of each in.hidden_rows entry.
  // pools: one view per KV group, of the type kv_specs() was asked for.
  Status forward(const ForwardInput& in, std::span<const KvPoolView> pools, std::vector<float>& logits,
                 std::vector<float>* hidden = nullptr) const;

 private:
  Status bind_weights();
  void assign_kv_groups();
  void prepare_weights();
  Status validate(const ForwardInput& in, std::span<const KvPoolView> pools) const;
  Status validate_recurrent(const ForwardInput& in) const;
  const float* rope_factors(int32_t n_ctx_seq) const;

  gguf::GgufFile file_;
  HParams hp_;
  const ArchInfo* arch_ = nullptr;
  std::shared_ptr<backend::Backend> backend_;
  kernels::WeightView tok_embd_;   // [n_vocab][n_embd]
  kernels::WeightView output_;     // [n_vocab][n_embd] (tok_embd_ when tied)
  VectorWeight output_norm_;       // [n_embd]
  std::vector<LayerWeights> layers_;  // [n_layer]
  // RoPE frequency divisors, [n_rot/2] each, empty when the file has none:
  // rope_freqs (Llama 3.1) at every context; LongRoPE's long/short sets by the context in force.
  VectorWeight rope_freqs_, rope_long_, rope_short_;
  std::vector<KvCacheSpec> kv_groups_;  // [n_groups], type unset (kv_specs() sets it)
  uint64_t weight_bytes_ = 0;
  uint64_t active_weight_bytes_ = 0;
  // Counters, not state the computation reads: forward() stays a function of its input.
  mutable std::vector<uint64_t> expert_tokens_;
};

}  // namespace tern
