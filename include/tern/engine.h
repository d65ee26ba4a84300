// tern/engine.h — the serving engine: many concurrent requests over one model.
//
// Contract: add requests (text or token ids, sampling parameters, priority,
// tenant, limits, stop strings) from any thread; each request's outputs
// (token, text piece, logprob, finish reason) are delivered in order through
// its callback, on the engine's output thread. cancel() frees a request's KV
// blocks at the next step. stats() is a consistent snapshot.
//
// Inside, one thread runs the step loop: schedule (continuous batching with
// chunked prefill under a token budget, policies, preemption) -> execute (one
// forward pass over a ragged batch on the paged KV cache — prefix caching,
// F16 by default — then sampling) -> update (progress, stop conditions); a
// second thread turns token ids into text and calls the callbacks. Greedy
// results do not depend on what else is running (batch invariance).
//
// Threading: every public method is thread-safe. Callbacks must not block
// for long (they delay every other request's outputs); an OutputQueue
// decouples them. This header and those it includes need nothing from src/.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "tern/config.h"
#include "tern/ids.h"
#include "tern/request.h"
#include "tern/status.h"

namespace tern {

struct EngineConfig {
  std::string model_path;
  int n_threads = 0;                 // 0 = hardware concurrency
  BackendKind backend = BackendKind::Cpu;
  // KV pool: kv_memory_bytes if > 0, else kv_memory_fraction of available RAM.
  int64_t kv_memory_bytes = 0;
  double kv_memory_fraction = 0.25;  // capped at max_num_seqs full contexts
  // Size the pool for exactly max_num_seqs full contexts instead (`tern run`:
  // one sequence); refused, naming the context, when memory cannot hold it.
  bool kv_exact_contexts = false;
  // Small-memory operation. max_rss_bytes > 0: the KV pool is sized (and
  // kv_memory_bytes capped) so that the process's resident memory stays under
  // it — the weights, the rest of the process and the activations counted
  // first; refused, with the figures, when not even one context fits.
  int64_t max_rss_bytes = 0;
  bool use_mmap = true;  // false: the model file is read into memory instead of mapped
  bool mlock = false;    // pin what the forward pass reads (weights, packed copies) in RAM
  int block_size = 16;
  KvType kv_type = KvType::F16;
  bool prefix_caching = true;
  int32_t n_ctx = 0;                 // per-sequence context limit; 0 = the model's training context
  SchedulePolicy policy = SchedulePolicy::Fcfs;
  PreemptionMode preemption = PreemptionMode::Recompute;
  SwapCompression swap_compression = SwapCompression::None;
  int max_num_seqs = 64;
  int32_t max_batched_tokens = 512;
  // Speculative decoding: proposals verified in the same pass as the last
  // token (exactly the non-speculative output; see docs/spec.md).
  SpecMethod spec = SpecMethod::None;
  int spec_k = 4;          // most proposed tokens per sequence and step (adapts down per sequence)
  // Candidates per position: 1 a chain of proposals; W > 1 a token tree
  // (the draft's next W - 1 choices at each depth, or W different prompt
  // lookup continuations) verified in one pass.
  int spec_tree = 1;
  int spec_ngram_max = 3;  // prompt lookup: longest suffix matched
  std::string spec_draft_path;  // SpecMethod::Draft: a GGUF sharing the model's vocabulary
  std::string spec_self_type = "Q4_0";  // SpecMethod::SelfDraft: the type the model is re-encoded to
  bool spec_adaptive = true;  // false: always propose spec_k (benchmarks, tests)
  // What a request keeps of its past when it does not say (tern/request.h): off by default.
  StreamingParams streaming;
  KvEvictParams kv_evict;  // the same for eviction by importance
  double watermark = 0.01;
  double ageing_per_s = 1.0;
  std::vector<std::pair<std::string, double>> tenant_weights;
};







struct EngineStats {
  int n_waiting = 0, n_running = 0, n_swapped = 0;
  int kv_blocks_total = 0, kv_blocks_used = 0, kv_blocks_free = 0, kv_blocks_cached = 0;
  int kv_blocks_peak = 0;
  int64_t kv_blocks_evicted = 0;     // given back by eviction by importance (--kv-evict)
  int64_t prefix_lookup_tokens = 0, prefix_hit_tokens = 0;
  double prefix_hit_rate = 0;        // hit / lookup tokens
  int64_t n_steps = 0;
  int64_t n_tokens_stepped = 0;      // tokens run through the model
  double tokens_per_step = 0;
  int64_t n_preemptions = 0;
  int64_t n_swaps_lost = 0;   // swapped K/V found damaged on the way back (recomputed instead)
  int64_t n_requests_finished = 0;
  int64_t n_tokens_prompt = 0, n_tokens_generated = 0;
  int block_size = 0;
  int64_t kv_block_bytes = 0;
  // Recurrent (state-space) layers: one fixed-size state per running sequence.
  int state_slots_total = 0, state_slots_used = 0, state_slots_peak = 0;
  int64_t state_slot_bytes = 0;   // one sequence's state, every recurrent layer
  int64_t state_bytes_total = 0;  // the whole state pool: running slots and prompt snapshots (as many)
  // Memory use, summed over steps (divide by n_steps for means): KV slots held
  // by running sequences (blocks x block size) and positions they fill.
  int64_t kv_slots_allocated_sum = 0, kv_positions_used_sum = 0, n_running_sum = 0;
  int n_running_peak = 0;
  // Steps that only decoded (one token per running sequence): their tokens and time.
  int64_t decode_steps = 0, decode_tokens = 0;
  double decode_time_s = 0;
  // Speculative decoding: tokens proposed and verified, and of them accepted.
  int64_t spec_proposed = 0, spec_accepted = 0;
  int64_t spec_verifies = 0;    // sequence-steps that carried proposals (accepted / this: mean accepted length)
  int64_t spec_branch_accepted = 0;  // of the accepted, those a token tree had off its first path
  double spec_draft_time_s = 0;  // spent proposing (the draft model's passes)
  // Mixture-of-experts models: tokens routed to each expert, summed over
  // layers since load ([expert_count]; empty for dense models). Sums to
  // tokens run x expert_used_count x layers.
  std::vector<uint64_t> moe_expert_tokens;
};

struct ModelInfo {
  std::string name;
  int32_t n_ctx = 0;   // the per-sequence context limit in force: min(context, what the KV pool holds)
  int32_t n_ctx_model = 0;  // the context asked for (EngineConfig::n_ctx, else the model's training length)
  int32_t n_vocab = 0;
  int32_t n_embd = 0;  // the width of the hidden state (embeddings' length)
  std::string chat_template;        // GGUF tokenizer.chat_template; empty when the file has none
  std::string bos_token, eos_token; // their texts; empty when the vocabulary has none
  StreamingParams streaming;        // the default for requests that do not say (EngineConfig::streaming)
};

class EngineCore;

class Engine {
 public:
  static Result<std::unique_ptr<Engine>> create(const EngineConfig& config);
  ~Engine();

  // Validates and queues a request; errors (bad parameters, prompt longer than
  // the context or the KV pool) are returned here, before any output.
  Result<RequestId> add_request(GenerationRequest request, OutputCallback on_output);
  // The request finishes with FinishReason::Cancelled at the next step.
  void cancel(RequestId id);
  EngineStats stats() const;
  ModelInfo model_info() const;
  // Whether a prompt of n_prompt tokens plus max_tokens (< 0: as many as
  // fit) fits one sequence, with the figures to say why not (add_request
  // refuses the same cases).
  // streaming: the request's (unset: the engine's); on, only the prompt of a shift is bounded.
  ContextCheck check_context(int64_t n_prompt, int64_t max_tokens,
                             const std::optional<StreamingParams>& streaming = std::nullopt) const;
  // What add_request would say of `request`, without queueing it.
  Status validate(const GenerationRequest& request) const;
  // Token ids <-> text with the model's tokenizer (thread-safe, no step needed).
  // quoted: special-token text marked by quote_special() stays plain text
  // (chat content inside a template; see Tokenizer::quote_special).
  std::vector<int32_t> tokenize(const std::string& text, bool add_special, bool quoted = false) const;
  std::string quote_special(const std::string& text) const;
  std::string detokenize(const std::vector<int32_t>& tokens) const;
  int32_t bos_token_id() const;  // -1 when the vocabulary has none
  int n_threads() const;         // the compute backend's threads
  // The bytes one token stands for (may be part of a UTF-8 character); "" when out of range.
  std::string token_piece(int32_t token) const;
  // Stops the step loop; unfinished requests finish with Cancelled.
  void shutdown();

 private:
  Engine() = default;
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// A thread-safe queue of outputs: pass queue.callback() as the OutputCallback
// and pop() from a consumer thread.
class OutputQueue {
 public:
  OutputCallback callback() {
    return [this](const RequestOutput& o) { push(o); };
  }
  void push(RequestOutput o) {
    {
      std::lock_guard lock(mu_);
      items_.push_back(std::move(o));
    }
    cv_.notify_one();
  }
  RequestOutput pop() {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [&] { return !items_.empty(); });
    RequestOutput o = std::move(items_.front());
    items_.pop_front();
    return o;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<RequestOutput> items_;
};

}  // namespace tern
