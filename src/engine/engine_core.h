// engine/engine_core.h — the single-threaded step loop behind tern::Engine.
//
// One step = schedule -> forward -> sample -> deliver:
//   1. finish cancelled requests (their KV blocks are freed now);
//   2. the Scheduler picks the step's chunks (decode tokens first, then
//      prefill chunks under max_batched_tokens), preempting when blocks run out;
//   3. one Model::forward over the ragged batch on the PagedKvCache;
//   4. full blocks just computed are registered in the prefix cache;
//   5. requests whose last token was computed sample one token, stream it
//      through their callback, and finish on length/EOS/stop/context.
// Requests are prepared (validated, tokenised) by prepare(), which is const
// and may run on any thread; everything else runs on the step thread only.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "core/status.h"
#include "kv/paged_kv_cache.h"
#include "model/model.h"
#include "sampling/sampler.h"
#include "sampling/stop.h"
#include "scheduler/scheduler.h"
#include "tern/engine.h"
#include "tokenizer/tokenizer.h"

namespace tern {

// A validated request with its prompt as token ids.
struct PreparedRequest {
  GenerationRequest request;
  std::vector<TokenId> prompt;
};

class EngineCore {
 public:
  static Result<std::unique_ptr<EngineCore>> create(const EngineConfig& config);
  ~EngineCore();

  // Validates parameters and tokenises; errors name the problem (InvalidArgument,
  // OutOfRange for a prompt the context or the KV pool can never hold).
  Result<PreparedRequest> prepare(GenerationRequest request) const;
  // Queues a prepared request; outputs go to on_output (on the step thread).
  void add(RequestId id, PreparedRequest prepared, OutputCallback on_output);
  void cancel(RequestId id);
  void cancel_all();

  bool has_work() const;
  // One engine step. An error here is internal (a bug or exhausted memory);
  // the requests of the failed step are finished with FinishReason::Error.
  Status step();

  EngineStats stats() const;
  const Model& model() const { return *model_; }
  const Tokenizer& tokenizer() const { return *tokenizer_; }
  const PagedKvCache& kv() const { return *kv_; }
  // The context limit in force (the model's, or EngineConfig::n_ctx).
  int32_t n_ctx() const { return n_ctx_; }
  // Positions one sequence can hold: min(n_ctx(), every position of the KV pool).
  int64_t max_seq_positions() const { return max_seq_positions_; }
  std::string dump() const;

 private:
  struct Sequence;
  class Allocator;

  EngineCore() = default;
  double now_s() const;
  // last: the output of the token that ended the request, merged into the final one.
  void finish(Sequence& s, FinishReason reason, const std::string& error = {}, RequestOutput* last = nullptr);
  void sample_and_emit(Sequence& s, std::span<float> logits);

  EngineConfig config_;
  std::unique_ptr<Model> model_;
  std::unique_ptr<Tokenizer> tokenizer_;
  std::unique_ptr<PagedKvCache> kv_;
  std::unique_ptr<Scheduler> scheduler_;
  std::unique_ptr<Allocator> allocator_;
  int32_t n_ctx_ = 0;
  int64_t max_seq_positions_ = 0;  // min(n_ctx_, every position of the KV pool)
  SwapCompression swap_compression_ = SwapCompression::None;
  std::chrono::steady_clock::time_point t0_;

  std::unordered_map<uint64_t, std::unique_ptr<Sequence>> seqs_;  // by request id
  std::unordered_set<uint64_t> cancelled_;
  int32_t next_seq_ = 0;

  // Step scratch.
  ForwardInput input_;
  std::vector<float> logits_;  // [n_out][n_vocab]

  // Counters for stats().
  int64_t n_steps_ = 0, n_tokens_stepped_ = 0, n_finished_ = 0;
  int64_t n_tokens_prompt_ = 0, n_tokens_generated_ = 0;
  int kv_blocks_peak_ = 0;
  int64_t slots_sum_ = 0, used_sum_ = 0, running_sum_ = 0;
  int running_peak_ = 0;
  int64_t decode_steps_ = 0, decode_tokens_ = 0;
  double decode_time_s_ = 0;
};

}  // namespace tern
